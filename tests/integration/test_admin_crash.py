"""Admin changes (create/delete topics, grow topics, delete records, delete groups) are all-or-nothing across SIGKILL of ``odradek serve``.

Runs scripts/crash_admin.py with a small, bounded count (the script itself
takes larger ones).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import AsyncMock

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("crash_admin", ROOT / "scripts" / "crash_admin.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_admin"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_checker_notices_half_done_changes():
    crash = _script()
    ledger = crash.Ledger(created={"a": 2, "b": 1, "c": 3}, deleted={"b"}, deleting={"c"})
    good = ({"a": 2}, {"g": {"a"}}, ["a-0", "a-1"], {"topics": [{"name": "a"}], "deleting": []})
    assert crash.check(*good, ledger) == []
    assert crash.check({"a": 2, "c": 3}, {}, ["a-0", "a-1", "c-0", "c-1", "c-2"],
                       {"topics": [{"name": "a"}, {"name": "c"}]}, ledger) == []  # the cut-off delete undone
    assert crash.check({"a": 2, "b": 1}, {}, ["a-0", "a-1", "b-0"],
                       {"topics": [{"name": "a"}, {"name": "b"}]}, ledger)  # a deleted topic came back
    assert crash.check({"a": 2}, {}, ["a-0", "a-1", "c-2"], good[3], ledger)  # a leftover directory
    assert crash.check({"a": 2}, {"g": {"a", "b"}}, good[2], good[3], ledger)  # offsets of a deleted topic
    assert crash.check({"a": 1}, {}, ["a-0"], {"topics": [{"name": "a"}]}, ledger)  # partitions missing
    grown = crash.Ledger(created={"a": 4}, growing={"a": 6})
    registry = {"topics": [{"name": "a"}], "deleting": []}
    dirs = [f"a-{p}" for p in range(6)]
    assert crash.check({"a": 4}, {}, dirs[:4], registry, grown) == []  # the cut-off growth undone
    assert crash.check({"a": 6}, {}, dirs, registry, grown) == []  # or done
    assert crash.check({"a": 5}, {}, dirs[:5], registry, grown)  # half of it
    assert crash.check({"a": 4}, {}, dirs, registry, grown)  # directories of partitions that do not exist
    assert crash.check({"a": 3}, {}, dirs[:3], registry, crash.Ledger(created={"a": 4}))  # acknowledged growth lost


class _ScriptedClient:
    """Stands in for the wire client: answers every request with success until ``die_at``
    (an API key) is sent ``die_after`` times more, then the connection is gone."""

    def __init__(self, crash, die_at: int, die_after: int = 0):
        self.crash, self.die_at, self.die_after = crash, die_at, die_after
        self.sent: list[tuple[int, dict]] = []

    async def request(self, api_key: int, _version: int, body: dict):
        self.sent.append((api_key, body))
        if api_key == self.die_at:
            if self.die_after == 0:
                raise ConnectionError("killed")
            self.die_after -= 1
        ok = SimpleNamespace(error_code=0, low_watermark=0)
        return SimpleNamespace(topics=[ok], responses=[ok], results=[ok])

    async def close(self) -> None:
        pass


class _Choices:
    """The worker's dice: never grow, delete records or delete a topic; always a throw-away group."""

    def __init__(self):
        self.calls = 0

    def randint(self, a: int, _b: int) -> int:
        return a

    def random(self) -> float:
        self.calls += 1
        return 0.1 if self.calls % 4 == 0 else 0.9  # 4th draw of an iteration: the throw-away group

    def choice(self, seq):
        return seq[0]


def test_a_deleted_group_committed_to_again_may_hold_offsets(monkeypatch):
    """Throw-away group names repeat every cycle: a group deleted (acknowledged) in one cycle
    and committed to again in a later one, killed before that second delete is answered,
    holds offsets by right; the checker once called that a deleted group come back."""
    crash = _script()
    ledger = crash.Ledger()

    def cycle(number: int, client: _ScriptedClient) -> None:
        monkeypatch.setattr(crash.AsyncClient, "connect", AsyncMock(return_value=client))
        asyncio.run(crash.worker(0, f"a{number}-0-", "g", ledger, _Choices()))

    cycle(0, _ScriptedClient(crash, crash.CREATE, die_after=1))  # g-x1 deleted, acknowledged
    assert ledger.groups_deleted == {"g-x1"}
    crash.settle({"a0-0-1": 1}, ledger)
    killed = _ScriptedClient(crash, crash.DELETE_GROUPS)  # g-x1 committed to, then the kill
    cycle(1, killed)
    assert (crash.OFFSET_COMMIT, crash.commit_body("g-x1", "a1-0-1", 1)) in killed.sent
    topics = {"a0-0-1": 1, "a1-0-1": 1}
    registry = {"topics": [{"name": n} for n in topics], "deleting": []}
    offsets = {"g": {"a0-0-1", "a1-0-1"}, "g-x1": {"a1-0-1"}}
    assert crash.check(topics, offsets, ["a0-0-1-0", "a1-0-1-0"], registry, ledger) == []
    assert crash.check(topics, {"g-x1": {"a0-0-1"}}, [], registry,
                       crash.Ledger(created=dict(topics), groups_deleted={"g-x1"}))  # still noticed


def test_the_checker_reads_the_registry_once_the_start_finished_cut_off_deletes(tmp_path):
    """A start drops a cut-off delete's marker only after the coordinator has loaded, while it
    already serves; the checker read topics.json before that and reported the marker."""
    crash = _script()
    path = tmp_path / "topics.json"
    path.write_text(json.dumps({"topics": [], "deleting": ["t"]}))
    finishing = threading.Timer(0.3, lambda: path.write_text(json.dumps({"topics": [], "deleting": []})))
    finishing.start()
    try:
        assert crash.settled_registry(path, timeout=30)["deleting"] == []
    finally:
        finishing.join()
    path.write_text(json.dumps({"topics": [], "deleting": ["t"]}))  # a marker the start never clears
    registry = crash.settled_registry(path, timeout=0.2)
    assert crash.check({}, {}, [], registry, crash.Ledger())  # is still reported


@pytest.mark.timeout(120)
def test_admin_changes_are_whole_after_kill_9(tmp_path):
    problems = _script().run(cycles=3, seconds=30, workers=3, seed=7, data_dir=tmp_path)
    assert problems == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_admin_changes_are_whole_after_many_kill_9(tmp_path):
    problems = _script().run(cycles=15, seconds=150, workers=4, data_dir=tmp_path)
    assert problems == []
