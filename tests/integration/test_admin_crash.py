"""Admin changes (create/delete topics, grow topics, delete records, delete groups) are all-or-nothing across SIGKILL of ``odradek serve``.

Runs scripts/crash_admin.py with a small, bounded count (the script itself
takes larger ones).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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


@pytest.mark.timeout(120)
def test_admin_changes_are_whole_after_kill_9(tmp_path):
    problems = _script().run(cycles=3, seconds=30, workers=3, seed=7, data_dir=tmp_path)
    assert problems == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_admin_changes_are_whole_after_many_kill_9(tmp_path):
    problems = _script().run(cycles=15, seconds=150, workers=4, data_dir=tmp_path)
    assert problems == []
