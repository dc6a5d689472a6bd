"""Transactions across kill -9 of ``odradek serve``: read_committed sees exactly the committed
ones, each whole (runs scripts/crash_transactions.py with a small, bounded count)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("crash_transactions", ROOT / "scripts" / "crash_transactions.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_transactions"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_checker_notices_lost_leaked_and_torn_transactions():
    crash = _script()
    ledger = crash.Ledger(state={"a": "committed", "b": "aborted", "c": "committing", "d": "open"},
                          partitions={"a": (0, 1), "b": (1, 2), "c": (0, 2), "d": (0, 1)})
    assert crash.check({0: ["a", "c"], 1: ["a"], 2: ["c"]}, ledger) == []
    assert crash.check({0: [], 1: [], 2: []}, ledger)  # a committed one lost
    assert crash.check({0: ["a"], 1: ["a", "b"], 2: []}, ledger)  # an aborted one visible
    assert crash.check({0: ["a", "c"], 1: ["a"], 2: []}, ledger)  # half of an in-flight commit
    assert crash.check({0: ["a", "d"], 1: ["a", "d"], 2: []}, ledger)  # an open one visible
    assert crash.check({0: ["a", "a"], 1: ["a"], 2: []}, ledger)  # a duplicate


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fsync", ["always", "never"])
def test_read_committed_sees_exactly_the_committed_transactions_after_kill_9(tmp_path, fsync):
    problems = _script().run(cycles=3, fsync=fsync, producers=3, data_dir=tmp_path, out=lambda *_: None)
    assert problems == []
