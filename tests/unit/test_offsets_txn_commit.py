"""TxnOffsetCommit and the markers that end it (Kafka's ``OffsetMetadataManager``, ``GroupCoordinator.handleTxnCommitOffsets``).

Transactional offsets are written at once as a transactional batch but stay
pending until the transaction coordinator's marker: COMMIT makes them the
committed offsets (unless a plain commit was written after them), ABORT
drops them.  Every test also reloads the shard from its log: the live path
and the load must agree.
"""

from __future__ import annotations

import pytest

from odradek.broker.coordinator import admin
from odradek.broker.coordinator.state import GroupState
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import decode_batch
from odradek.storage.config import FsyncMode

from .test_offsets_harness import MINUTE, OffsetsEnv, wait

E = ErrorCode
P, Q = 1000, 2000


@pytest.fixture
async def env(tmp_path):
    e = await OffsetsEnv(tmp_path).start()
    yield e
    await e.stop()


def stable(env: OffsetsEnv, group: str = "g") -> dict:
    """Group ``group``'s OffsetFetch answer with require_stable: {tp: offset or the error}."""
    error, parts = env.fetch(group, [("t", [0, 1])], require_stable=True)
    assert error is E.NONE
    return {(f.topic, f.partition): f.offset if f.error is E.NONE else f.error for f in parts}


async def reloaded(env: OffsetsEnv) -> None:
    """Restart from the log; the persisted and transactional state must come back as they were."""
    views = [(s.persisted_view(), s.txn_view()) for s in env.coordinator.shards]
    answers = (env.committed("g"), stable(env))
    await env.restart()
    assert [(s.persisted_view(), s.txn_view()) for s in env.coordinator.shards] == views
    assert (env.committed("g"), stable(env)) == answers


def batches(env: OffsetsEnv, group: str = "g") -> list:
    log = env.shard(group).log
    data = log.read(log.log_start_offset, 1 << 20)
    out, pos = [], 0
    while pos < len(data):
        header, records = decode_batch(data, pos)
        pos += header.size
        out.append((header, records))
    return out


# --- pending until the marker ----------------------------------------------------------------------

async def test_pending_offsets_are_invisible_until_commit_and_unstable_meanwhile(env):
    assert env.commit_now("g", [("t", 0, 5)]) == [E.NONE]
    assert env.txn_commit_now("g", [("t", 0, 9), ("t", 1, 4)]) == [E.NONE, E.NONE]
    assert env.committed("g") == {("t", 0): 5}
    assert stable(env) == {("t", 0): E.UNSTABLE_OFFSET_COMMIT, ("t", 1): E.UNSTABLE_OFFSET_COMMIT}
    await reloaded(env)
    assert env.marker_now("g", commit=True) is E.NONE
    assert env.committed("g") == {("t", 0): 9, ("t", 1): 4}
    assert stable(env) == {("t", 0): 9, ("t", 1): 4}
    await reloaded(env)


async def test_abort_drops_the_pending_offsets(env):
    env.commit_now("g", [("t", 0, 5)])
    env.txn_commit_now("g", [("t", 0, 9), ("t", 1, 4)])
    assert env.marker_now("g", commit=False) is E.NONE
    assert stable(env) == {("t", 0): 5, ("t", 1): -1}
    await reloaded(env)


async def test_the_batches_are_kafkas_transactional_batch_and_control_batch(env):
    env.txn_commit_now("g", [("t", 0, 9)], producer=P, epoch=3)
    env.marker_now("g", producer=P, epoch=3, commit=True, coordinator_epoch=7)
    (data, [record]), (control, [marker]) = batches(env)
    assert data.is_transactional and not data.is_control
    assert (data.producer_id, data.producer_epoch, data.base_sequence) == (P, 3, 0)
    assert control.is_transactional and control.is_control and control.records_count == 1
    assert (control.producer_id, control.producer_epoch, control.base_sequence) == (P, 3, -1)
    assert marker.key == b"\x00\x00\x00\x01" and marker.value == b"\x00\x00\x00\x00\x00\x07"


async def test_a_plain_commit_written_after_the_transactional_one_wins(env):
    env.txn_commit_now("g", [("t", 0, 9), ("t", 1, 9)])
    env.commit_now("g", [("t", 0, 12)])
    env.marker_now("g", commit=True)
    assert env.committed("g") == {("t", 0): 12, ("t", 1): 9}
    await reloaded(env)


async def test_of_two_transactions_the_later_write_wins_whatever_order_they_end_in(env):
    env.txn_commit_now("g", [("t", 0, 6)], producer=P)
    env.txn_commit_now("g", [("t", 0, 8), ("t", 1, 8)], producer=Q)
    env.marker_now("g", producer=P, commit=True)
    assert env.committed("g") == {("t", 0): 6}
    assert stable(env) == {("t", 0): E.UNSTABLE_OFFSET_COMMIT, ("t", 1): E.UNSTABLE_OFFSET_COMMIT}
    env.marker_now("g", producer=Q, commit=True)
    assert env.committed("g") == {("t", 0): 8, ("t", 1): 8}
    await reloaded(env)
    env.txn_commit_now("g", [("t", 0, 10)], producer=P)
    env.txn_commit_now("g", [("t", 0, 11)], producer=Q)
    env.marker_now("g", producer=Q, commit=True)
    env.marker_now("g", producer=P, commit=True)
    assert env.committed("g") == {("t", 0): 11, ("t", 1): 8}
    await reloaded(env)


async def test_a_marker_for_a_producer_with_nothing_pending_changes_nothing(env):
    env.commit_now("g", [("t", 0, 5)])
    assert env.marker_now("g", producer=Q, commit=True) is E.NONE
    assert env.committed("g") == {("t", 0): 5}
    await reloaded(env)


async def test_open_transactions_survive_a_restart_and_end_after_it(env):
    env.txn_commit_now("g", [("t", 0, 9)])
    await env.restart()
    assert stable(env) == {("t", 0): E.UNSTABLE_OFFSET_COMMIT, ("t", 1): -1}
    env.marker_now("g", commit=True)
    assert env.committed("g") == {("t", 0): 9}


# --- validation --------------------------------------------------------------------------------------

async def test_unknown_partitions_and_bad_group_ids(env):
    assert env.txn_commit_now("g", [("t", 0, 1), ("nope", 0, 1), ("t", 99, 1)]) == [
        E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert env.txn_commit_now("", [("t", 0, 1)]) == [E.INVALID_GROUP_ID]
    assert env.txn_commit_now("g", [("t", 0, 1, "x" * 5000)]) == [E.OFFSET_METADATA_TOO_LARGE]


async def test_an_unknown_group_needs_generation_minus_one(env):
    assert env.txn_commit_now("fresh", [("t", 0, 1)], generation=3, member="m") == [E.ILLEGAL_GENERATION]
    assert "fresh" not in env.shard("fresh").groups
    assert env.txn_commit_now("fresh", [("t", 0, 1)]) == [E.NONE]


async def test_kip_447_member_checks(env):
    group = env.consumer_group("g", {"m1": ["t"], "m2": ["t"]}, instance_ids={"m2": "i2"})
    gen = group.generation
    assert env.txn_commit_now("g", [("t", 0, 1)], generation=gen, member="zz") == [E.UNKNOWN_MEMBER_ID]
    assert env.txn_commit_now("g", [("t", 0, 1)], generation=gen + 1, member="m1") == [E.ILLEGAL_GENERATION]
    assert env.txn_commit_now("g", [("t", 0, 1)], generation=gen, member="m1", instance="i2") == [
        E.FENCED_INSTANCE_ID]
    assert env.txn_commit_now("g", [("t", 0, 1)], generation=gen, member="m2", instance="i2") == [E.NONE]
    # a v0-v2 request (no member fields) is accepted whatever the state (unlike OffsetCommit)
    assert env.txn_commit_now("g", [("t", 1, 1)], version=1) == [E.NONE]


async def test_no_rebalance_in_progress_for_transactional_commits(env):
    group = env.consumer_group("g", {"m1": ["t"]}, state=GroupState.COMPLETING_REBALANCE)
    assert env.txn_commit_now("g", [("t", 0, 1)], generation=group.generation, member="m1") == [E.NONE]


async def test_dead_group_is_coordinator_not_available(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    group.transition(GroupState.DEAD, env.clock.now_ms())
    assert env.txn_commit_now("g", [("t", 0, 1)], generation=group.generation, member="m1") == [
        E.COORDINATOR_NOT_AVAILABLE]


async def test_an_older_producer_epoch_is_refused(env):
    assert env.txn_commit_now("g", [("t", 0, 1)], epoch=2) == [E.NONE]
    assert env.txn_commit_now("g", [("t", 0, 2)], epoch=1) == [E.INVALID_PRODUCER_EPOCH]
    assert env.marker_now("g", epoch=1) is E.INVALID_PRODUCER_EPOCH
    assert env.marker_now("g", epoch=2, coordinator_epoch=5) is E.NONE
    assert env.marker_now("g", epoch=2, coordinator_epoch=4) is E.TRANSACTION_COORDINATOR_FENCED
    await reloaded(env)
    assert env.txn_commit_now("g", [("t", 0, 2)], epoch=1) == [E.INVALID_PRODUCER_EPOCH]
    assert env.marker_now("g", epoch=2, coordinator_epoch=4) is E.TRANSACTION_COORDINATOR_FENCED


async def test_loading_and_foreign_partitions(env):
    assert env.marker_now("g", topic="orders") is E.UNKNOWN_TOPIC_OR_PARTITION
    shard = env.shard()
    shard.status = type(shard.status).LOADING
    assert env.txn_commit_now("g", [("t", 0, 1)]) == [E.COORDINATOR_LOAD_IN_PROGRESS]
    assert env.marker_now("g") is E.NOT_LEADER_OR_FOLLOWER
    shard.status = type(shard.status).ACTIVE


class Verifier:
    def __init__(self, error: int):
        self.error = error
        self.asked: list[tuple] = []

    def verify_partition(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
        return self.error


@pytest.mark.parametrize("answer, v3, v4", [
    (E.NONE, E.NONE, E.NONE),
    (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
    (E.INVALID_PRODUCER_ID_MAPPING, E.INVALID_PRODUCER_ID_MAPPING, E.INVALID_PRODUCER_ID_MAPPING),
    (E.CONCURRENT_TRANSACTIONS, E.CONCURRENT_TRANSACTIONS, E.CONCURRENT_TRANSACTIONS),
    (E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS),
    (120, E.INVALID_TXN_STATE, 120),  # TRANSACTION_ABORTABLE: "partition not in the transaction"
])
async def test_kip_890_verification_of_the_offsets_partition(env, answer, v3, v4):
    verifier = Verifier(answer)
    assert env.txn_commit_now("g", [("t", 0, 1)], version=3, verifier=verifier) == [v3]
    assert verifier.asked == [("txn", 1000, 0, "__consumer_offsets", 0)]
    assert env.txn_commit_now("g", [("t", 0, 1)], version=4, verifier=verifier) in ([v4], [E.NONE])


async def test_verification_is_skipped_once_the_producer_has_offsets_pending_here(env):
    env.txn_commit_now("g", [("t", 0, 1)])
    verifier = Verifier(E.INVALID_TXN_STATE)
    assert env.txn_commit_now("g", [("t", 0, 2)], verifier=verifier) == [E.NONE]
    assert verifier.asked == []


# --- groups that only have pending offsets -----------------------------------------------------------------

async def test_a_group_with_only_pending_offsets_exists_until_its_abort(env):
    env.txn_commit_now("s", [("t", 0, 1)])
    [described] = admin.describe_groups(env.coordinator, ["s"])
    assert described.state == "Empty" and described.protocol_type == ""
    error, listed = admin.list_groups(env.coordinator)
    assert error is E.NONE and "s" in [g.group_id for g in listed]
    await env.restart()
    assert "s" in env.shard("s").groups
    env.marker_now("s", commit=False)
    assert "s" not in env.shard("s").groups
    await env.restart()
    assert "s" not in env.shard("s").groups


async def test_expiry_keeps_pending_offsets_and_their_group(tmp_path):
    env = await OffsetsEnv(tmp_path, offsets_retention_ms=10 * MINUTE,
                           offsets_retention_check_interval_ms=1000 * MINUTE).start()
    try:
        env.commit_now("g", [("t", 0, 5), ("t", 1, 5)])
        env.clock.advance(20 * MINUTE)
        env.txn_commit_now("g", [("t", 0, 9)])
        env.coordinator.expiry.sweep()
        assert env.committed("g") == {("t", 0): 5}  # (t, 1) expired; (t, 0) has a pending offset
        assert "g" in env.shard().groups
        env.marker_now("g", commit=True)
        assert env.committed("g") == {("t", 0): 9}
        await reloaded(env)
    finally:
        await env.stop()


async def test_offset_delete_tombstones_a_pending_only_partition_for_good(env):
    env.txn_commit_now("g", [("t", 0, 9)])
    assert env.delete("g", [("t", [0])]) == (E.NONE, [("t", 0, E.NONE)])
    assert stable(env) == {("t", 0): -1, ("t", 1): -1}
    env.marker_now("g", commit=True)
    assert env.committed("g") == {}
    await reloaded(env)


async def test_delete_groups_removes_pending_offsets_too(env):
    env.commit_now("g", [("t", 1, 3)])
    env.txn_commit_now("g", [("t", 0, 9)])
    result = await wait(admin.delete_groups(env.coordinator, ["g"]))
    assert result == {"g": E.NONE}
    env.marker_now("g", commit=True)
    assert env.committed("g") == {} and "g" not in env.shard().groups
    await reloaded(env)


async def test_a_deleted_topic_takes_its_pending_offsets(env):
    env.txn_commit_now("g", [("u", 0, 9), ("t", 0, 9)])
    await wait(env.coordinator.on_topics_deleted(["u"])[0])
    env.marker_now("g", commit=True)
    assert env.committed("g") == {("t", 0): 9}
    await reloaded(env)


# --- fsync always: pending while in flight ---------------------------------------------------------------

async def test_with_fsync_always_the_answers_wait_for_the_fsync(tmp_path):
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS).start()
    try:
        commit = env.txn_commit("g", [("t", 0, 9)])
        assert stable(env)[("t", 0)] is E.UNSTABLE_OFFSET_COMMIT  # in flight
        assert await wait(commit) == [E.NONE]
        marker = env.marker("g", commit=True)
        assert await wait(marker) is E.NONE
        assert env.committed("g") == {("t", 0): 9}
        await reloaded(env)
    finally:
        await env.stop()


async def test_open_transactions_bound_the_partitions_stable_offset(env):
    """What the cleaner must not compact past (Kafka's uncleanable boundary at the LSO)."""
    env.commit_now("g", [("t", 0, 1)])  # offset 0
    assert env.shard().stable_offset() is None
    env.txn_commit_now("g", [("t", 0, 2)], producer=P)  # 1
    env.commit_now("g", [("t", 1, 1)])  # 2
    env.txn_commit_now("g", [("t", 1, 2)], producer=Q)  # 3
    env.txn_commit_now("g", [("t", 0, 3)], producer=P)  # 4: P's transaction is open since 1
    assert env.shard().stable_offset() == 1
    env.marker_now("g", producer=P, commit=False)  # 5
    assert env.shard().stable_offset() == 3
    await env.restart()
    assert env.shard().stable_offset() == 3
    env.marker_now("g", producer=Q, commit=True)
    assert env.shard().stable_offset() is None
