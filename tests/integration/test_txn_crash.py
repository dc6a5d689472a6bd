"""Transactions across ``kill -9`` of ``odradek serve``: each ends as Kafka's would after the restart.

Runs scripts/crash_transactions.py with a small, bounded count (the script
itself takes larger ones): raw-frame transactional producers doing
consume-transform-produce, the broker killed while transactions are ongoing,
being prepared or completing; after the restart a read_committed consumer
(confluent-kafka) must see exactly the committed transactions and each
group's committed offset must be its last committed transaction's.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def _script():
    spec = importlib.util.spec_from_file_location("crash_transactions", ROOT / "scripts" / "crash_transactions.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_transactions"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_checker_notices_what_kafka_would_not_do():
    crash = _script()
    producers = [crash.Producer(0, crash.Ledger(), None)]
    ledger = producers[0].ledger
    tid = producers[0].tid
    ledger.state = {(tid, 1): crash.COMMITTED, (tid, 2): crash.ENDING_COMMIT, (tid, 3): crash.OPEN,
                    (tid, 4): crash.ABORTED}
    ledger.records = {(tid, 1): 2, (tid, 2): 3, (tid, 3): 1, (tid, 4): 1}
    offsets = {producers[0].group: (2, f"{tid}:2")}
    assert crash.check(ledger, {(tid, 1): 2, (tid, 2): 3}, offsets, producers) == []
    assert crash.check(ledger, {(tid, 1): 2}, {producers[0].group: (1, f"{tid}:1")}, producers) == []
    assert crash.check(ledger, {(tid, 1): 1, (tid, 2): 3}, offsets, producers)  # a committed record lost
    assert crash.check(ledger, {(tid, 1): 4, (tid, 2): 3}, offsets, producers)  # a duplicate
    assert crash.check(ledger, {(tid, 1): 2, (tid, 2): 2}, offsets, producers)  # half a transaction
    assert crash.check(ledger, {(tid, 1): 2, (tid, 2): 3, (tid, 3): 1}, offsets, producers)  # never ended
    assert crash.check(ledger, {(tid, 1): 2, (tid, 4): 1}, offsets, producers)  # aborted, visible
    assert crash.check(ledger, {(tid, 1): 2}, offsets, producers)  # offsets of an invisible transaction


@pytest.mark.parametrize("transaction_version", [1, 2])
def test_one_crash_cycle(tmp_path, transaction_version):
    """A short run: one kill, the restart, the checks (not slow: a few seconds); the classic
    protocol, and transactions v2 as Kafka 4's producer runs it (EndTxn v5, Produce v12's add)."""
    assert _script().run(cycles=1, seconds=20, fsync="always", producers=2, data_dir=tmp_path,
                         transaction_version=transaction_version) == []


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("transaction_version", [1, 2])
@pytest.mark.parametrize("fsync", ["always", "never"])
def test_transactions_end_as_kafkas_after_kill_9(tmp_path, fsync, transaction_version):
    assert _script().run(cycles=5, seconds=60, fsync=fsync, producers=3, data_dir=tmp_path,
                         transaction_version=transaction_version) == []
