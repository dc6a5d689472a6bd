"""Compacting ``__consumer_offsets`` with transactional offsets in it keeps every committed offset.

Kafka never cleans past a partition's last stable offset, and drops aborted
transactional records (found through the ``.txnindex``) instead of letting
them hide older committed values of the same key.  Without either, an aborted
or still-open TxnOffsetCommit newer than the committed offset would make the
cleaner drop the committed one.
"""

from __future__ import annotations

import pytest

from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.log_manager import offsets_topic_config
from odradek.storage.txn_index import read_entries

from .test_offsets_harness import OffsetsEnv

P, Q = 1000, 2000


@pytest.fixture
async def env(tmp_path):
    e = await OffsetsEnv(tmp_path).start()
    yield e
    await e.stop()


async def compact(env: OffsetsEnv) -> None:
    """Roll, then clean below the partition's last stable offset, as the broker's cleaner does."""
    log = env.shard().log
    log.roll()
    log.clean(stable_offset=env.coordinator.stable_offset(env.shard().partition))


async def test_an_aborted_transaction_does_not_hide_the_committed_offset(env):
    env.commit_now("g", [("t", 0, 5), ("t", 1, 5)])
    env.txn_commit_now("g", [("t", 0, 9)], producer=P)
    env.marker_now("g", producer=P, commit=False)
    log = env.shard().log
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in read_entries(log.directory, 0)] == [(P, 2, 3)]
    await compact(env)
    await env.restart()
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 5}


async def test_an_open_transaction_is_not_compacted_and_may_still_abort(env):
    env.commit_now("g", [("t", 0, 5)])
    env.txn_commit_now("g", [("t", 0, 9)], producer=P)
    env.commit_now("g", [("t", 1, 5)])
    assert env.coordinator.stable_offset(0) == 1
    await compact(env)
    await env.restart()
    env.marker_now("g", producer=P, commit=False)
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 5}
    await compact(env)
    await env.restart()
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 5}


async def test_a_committed_transaction_survives_compaction(env):
    env.commit_now("g", [("t", 0, 5)])
    env.txn_commit_now("g", [("t", 0, 9)], producer=P)
    env.txn_commit_now("g", [("t", 1, 3)], producer=Q)
    env.marker_now("g", producer=Q, commit=False)
    env.marker_now("g", producer=P, commit=True)
    await compact(env)
    await env.restart()
    assert env.committed("g") == {("t", 0): 9}


async def test_a_lost_index_entry_is_written_again_at_load(env):
    env.commit_now("g", [("t", 0, 5)])
    env.txn_commit_now("g", [("t", 0, 9)], producer=P)
    env.marker_now("g", producer=P, commit=False)
    log = env.shard().log
    entries = read_entries(log.directory, 0)
    for f in log.directory.glob("*.txnindex"):
        f.unlink()  # a crash between the marker's append and its index entry
    await env.restart()
    assert read_entries(env.shard().log.directory, 0) == entries
    await compact(env)
    await env.restart()
    assert env.committed("g") == {("t", 0): 5}


async def test_offline_compaction_rebuilds_the_bound_from_the_batch_headers(env):
    """``odradek compact``/the crash drivers clean the files with no broker: the open transactions
    come from the headers (``storage.cleaner.first_unstable_offset``)."""
    from odradek.storage.cleaner import first_unstable_offset

    env.commit_now("g", [("t", 0, 5)])  # 0
    env.txn_commit_now("g", [("t", 1, 1)], producer=Q)  # 1
    env.marker_now("g", producer=Q, commit=True)  # 2
    env.txn_commit_now("g", [("t", 0, 9)], producer=P)  # 3: left open
    log = env.shard().log
    assert first_unstable_offset(log) == 3 == env.coordinator.stable_offset(0)
    await env.stop()
    offline = Log.open(log.directory, offsets_topic_config(LogConfig()))
    try:
        offline.roll()
        offline.clean(stable_offset=first_unstable_offset(offline))
    finally:
        offline.close()
    await env.start()
    env.marker_now("g", producer=P, commit=False)
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 1}
