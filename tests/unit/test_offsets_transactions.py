"""Transactional offset commits in a loaded log (Kafka's GroupMetadataManager.loadGroupsAndOffsets).

A ``__consumer_offsets`` imported from Kafka holds them wherever a producer
used ``sendOffsetsToTransaction``, and TxnOffsetCommit writes them: the
broker's load and ``odradek offsets`` must both count one only once its
producer's COMMIT marker follows, and must agree with each other.
"""

from __future__ import annotations

from odradek.broker.import_kafka import import_offsets
from odradek.broker.offsets_view import build_view
from odradek.offsets.records import OffsetKey, OffsetValue, encode_key, encode_value
from odradek.protocol.records import encode_batch, encode_end_txn_batch

from .test_offsets_harness import OffsetsEnv

P, Q = 7, 8  # producer ids
NOW = 1_700_000_000_000  # the harness clock: nothing has expired yet


def commit(group: str, partition: int, offset: int | None, *, producer: int | None = None) -> bytes:
    """One offset commit record (``offset`` None: a tombstone), transactional when ``producer`` is given."""
    key = encode_key(OffsetKey(group, "t", partition))
    value = None if offset is None else encode_value(OffsetValue(offset=offset, commit_timestamp=NOW))
    if producer is None:
        return encode_batch([(key, value)])
    return encode_batch([(key, value)], producer_id=producer, producer_epoch=0, base_sequence=0,
                        transactional=True)


def marker(producer: int, *, commit: bool) -> bytes:
    return encode_end_txn_batch(commit, producer_id=producer, producer_epoch=0, coordinator_epoch=0)


async def loaded(tmp_path, *batches: bytes) -> dict[tuple[str, int], int]:
    """Group g's committed offsets once a log of ``batches`` is loaded.

    Three readers must agree: the broker's load, ``odradek offsets``, and the
    broker's load of what ``odradek import`` made of the same log.
    """
    env = await OffsetsEnv(tmp_path / "broker").start()
    for data in batches:
        env.shard().log.append(data)
    await env.restart()
    committed = await committed_g(env)
    view = build_view([tmp_path / "broker"])
    seen = {tp: v.offset for pv in view.partitions for tp, v in pv.shard.offsets.get("g", {}).items()}
    assert seen == committed, "odradek offsets and the broker's load disagree"
    import_offsets(tmp_path / "broker", tmp_path / "imported", 1)
    imported = await OffsetsEnv(tmp_path / "imported").start()
    assert await committed_g(imported) == committed, "the import changed what is committed"
    return committed


async def committed_g(env: OffsetsEnv) -> dict[tuple[str, int], int]:
    try:
        return env.committed("g") if env.shard().offsets.get("g") else {}
    finally:
        await env.stop()


async def test_a_committed_transaction_counts_an_aborted_one_does_not(tmp_path):
    assert await loaded(tmp_path, commit("g", 0, 5),
                        commit("g", 0, 6, producer=P), commit("g", 1, 6, producer=P), marker(P, commit=True),
                        commit("g", 0, 9, producer=Q), marker(Q, commit=False)) == {("t", 0): 6, ("t", 1): 6}


async def test_a_transaction_without_a_marker_commits_nothing(tmp_path):
    assert await loaded(tmp_path, commit("g", 0, 5), commit("g", 0, 6, producer=P)) == {("t", 0): 5}


async def test_a_plain_commit_after_the_transactional_one_wins_at_its_commit(tmp_path):
    assert await loaded(tmp_path, commit("g", 0, 6, producer=P), commit("g", 0, 7),
                        marker(P, commit=True)) == {("t", 0): 7}


async def test_the_later_of_two_transactions_wins_whatever_order_they_end_in(tmp_path):
    assert await loaded(tmp_path, commit("g", 0, 6, producer=P), commit("g", 0, 8, producer=Q),
                        marker(Q, commit=True), marker(P, commit=True)) == {("t", 0): 8}


async def test_a_removed_offset_stays_removed_after_a_later_commit_marker(tmp_path):
    """A tombstone drops the pending offsets of its partition too (Kafka's ``OffsetMetadataManager.replay``):
    OffsetDelete, expiry or a deleted topic are not undone by the transaction's COMMIT."""
    assert await loaded(tmp_path, commit("g", 0, 5), commit("g", 0, 6, producer=P), commit("g", 0, None),
                        marker(P, commit=True)) == {}


async def test_a_transactional_tombstone_removes_like_any_other(tmp_path):
    assert await loaded(tmp_path, commit("g", 0, 5), commit("g", 1, 5), commit("g", 0, 6, producer=P),
                        commit("g", 0, None, producer=P), marker(P, commit=True)) == {("t", 1): 5}
