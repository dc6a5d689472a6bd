"""Acknowledged commits survive SIGKILL of ``odradek serve``; compaction keeps OffsetFetch answers.

Runs scripts/crash_commits.py with a small, bounded count (the script itself
takes larger ones).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("crash_commits", ROOT / "scripts" / "crash_commits.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_commits"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_checker_notices_a_lost_commit():
    crash = _script()
    ledger = crash.Ledger(acked={("g", "t", 0): 5}, sent={("g", "t", 0): 7})
    assert crash.check({"g": {("t", 0): (6, 1, "m6", 0)}}, ledger) == []
    assert crash.check({"g": {("t", 0): (4, 1, "m4", 0)}}, ledger)
    assert crash.check({"g": {}}, ledger)
    assert crash.check({"g": {("t", 0): (6, 1, "m5", 0)}}, ledger)  # a value torn from its offset


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("fsync", ["always", "never"])
def test_acknowledged_commits_survive_kill_9(tmp_path, fsync):
    problems = _script().run(cycles=3, seconds=20, fsync=fsync, connections=3, data_dir=tmp_path)
    assert problems == []


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_sigterm_under_commit_load_exits_cleanly_and_keeps_acknowledged_commits(tmp_path):
    """Graceful stop: exit 0 within seconds, and no acknowledged commit is lost."""
    problems = _script().run(cycles=2, seconds=20, fsync="never", connections=3, data_dir=tmp_path,
                             how="term")
    assert problems == []
