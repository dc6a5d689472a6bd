"""OffsetCommit (Kafka's GroupCoordinator.handleCommitOffsets): the validation matrix, per-partition checks, storage and versions."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.group import ClassicGroup
from odradek.broker.coordinator.state import GroupState
from odradek.broker.runtime.runtime import ShardStatus
from odradek.offsets.records import OffsetValue
from odradek.protocol.records import decode_batch
from odradek.storage.config import FsyncMode

from .test_offsets_harness import E, OffsetsEnv, commit_body, commit_errors, wait


@pytest.fixture
async def env(tmp_path):
    env = await OffsetsEnv(tmp_path).start()
    yield env
    await env.stop()


def stored(env, group: str = "g") -> dict:
    return dict(env.shard(group).offsets.get(group, {}))


# --- group absent ----------------------------------------------------------------------------------

async def test_simple_commit_creates_an_empty_simple_group(env):
    assert env.commit_now("g", [("t", 0, 10)]) == [E.NONE]
    group = env.shard().groups["g"]
    assert group.state is GroupState.EMPTY and group.protocol_type is None and group.generation == 0
    assert env.committed("g") == {("t", 0): 10}


@pytest.mark.parametrize("version,error", [(1, E.ILLEGAL_GENERATION), (8, E.ILLEGAL_GENERATION),
                                           (9, E.GROUP_ID_NOT_FOUND)])
async def test_member_commit_to_an_absent_group(env, version, error):
    got = env.commit_now("g", [("t", 0, 1), ("u", 0, 1)], generation=0, member="m", version=version)
    assert got == [error, error]
    assert "g" not in env.shard().groups and stored(env) == {}


async def test_empty_group_id_is_a_valid_group(env):
    assert env.commit_now("", [("t", 0, 3)]) == [E.NONE]
    assert env.committed("") == {("t", 0): 3}


async def test_null_group_id_is_invalid(env):
    assert env.commit_now(None, [("t", 0, 3)]) == [E.INVALID_GROUP_ID]


# --- group present -------------------------------------------------------------------------------------

async def test_dead_group_is_coordinator_not_available(env):
    group = ClassicGroup("g")
    group.transition(GroupState.DEAD, env.clock.now_ms())
    env.shard().groups["g"] = group
    assert env.commit_now("g", [("t", 0, 1)]) == [E.COORDINATOR_NOT_AVAILABLE]
    assert env.commit_now("g", [("t", 0, 1)], generation=1, member="m") == [E.COORDINATOR_NOT_AVAILABLE]


async def test_admin_commit_into_an_empty_consumer_group_skips_member_checks(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    env.empty_group(group)
    assert env.commit_now("g", [("t", 0, 5)], member="whoever") == [E.NONE]
    assert env.committed("g") == {("t", 0): 5}
    assert group.protocol_type == "consumer"  # still the consumer group, not a new simple one


async def test_member_commit_into_an_empty_group_is_unknown_member(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    env.empty_group(group)
    assert env.commit_now("g", [("t", 0, 5)], generation=group.generation, member="m1") == \
        [E.UNKNOWN_MEMBER_ID]


async def test_stable_member_commit_is_accepted(env):
    env.consumer_group("g", {"m1": ["t"], "m2": ["t"]})
    assert env.commit_now("g", [("t", 0, 5)], generation=1, member="m1") == [E.NONE]
    assert env.committed("g") == {("t", 0): 5}


async def test_wrong_generation_is_illegal_generation(env):
    env.consumer_group("g", {"m1": ["t"]})
    assert env.commit_now("g", [("t", 0, 5)], generation=7, member="m1") == [E.ILLEGAL_GENERATION]


async def test_unknown_member_is_unknown_member_id(env):
    env.consumer_group("g", {"m1": ["t"]})
    assert env.commit_now("g", [("t", 0, 5)], generation=1, member="m9") == [E.UNKNOWN_MEMBER_ID]


async def test_member_check_comes_before_generation_check(env):
    env.consumer_group("g", {"m1": ["t"]})
    assert env.commit_now("g", [("t", 0, 5)], generation=7, member="m9") == [E.UNKNOWN_MEMBER_ID]


async def test_static_member_checks(env):
    env.consumer_group("g", {"m1": ["t"]}, instance_ids={"m1": "i1"})
    assert env.commit_now("g", [("t", 0, 1)], generation=1, member="m1", instance="i1") == [E.NONE]
    assert env.commit_now("g", [("t", 0, 1)], generation=1, member="m1", instance="i9") == \
        [E.UNKNOWN_MEMBER_ID]
    assert env.commit_now("g", [("t", 0, 1)], generation=1, member="zombie", instance="i1") == \
        [E.FENCED_INSTANCE_ID]


async def test_simple_commit_into_an_active_group_is_unknown_member(env):
    env.consumer_group("g", {"m1": ["t"]})
    assert env.commit_now("g", [("t", 0, 1)]) == [E.UNKNOWN_MEMBER_ID]


async def test_generation_minus_one_with_a_valid_member_is_illegal_generation(env):
    env.consumer_group("g", {"m1": ["t"]})
    assert env.commit_now("g", [("t", 0, 1)], member="m1") == [E.ILLEGAL_GENERATION]


async def test_instance_id_alone_triggers_member_validation(env):
    env.consumer_group("g", {"m1": ["t"]}, instance_ids={"m1": "i1"})
    assert env.commit_now("g", [("t", 0, 1)], instance="i1") == [E.FENCED_INSTANCE_ID]


async def test_completing_rebalance_is_rebalance_in_progress(env):
    env.consumer_group("g", {"m1": ["t"]}, state=GroupState.COMPLETING_REBALANCE)
    assert env.commit_now("g", [("t", 0, 1), ("u", 1, 1)], generation=1, member="m1") == \
        [E.REBALANCE_IN_PROGRESS, E.REBALANCE_IN_PROGRESS]
    assert stored(env) == {}


async def test_old_generation_may_commit_while_preparing_rebalance(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    group.transition(GroupState.PREPARING_REBALANCE, env.clock.now_ms())
    assert env.commit_now("g", [("t", 0, 4)], generation=1, member="m1") == [E.NONE]
    assert env.committed("g") == {("t", 0): 4}


async def test_accepted_commit_resets_the_member_session(env, monkeypatch):
    from odradek.broker.coordinator import offsets

    resets = []
    monkeypatch.setattr(offsets, "reset_session", lambda *a, **k: resets.append(a))
    env.consumer_group("g", {"m1": ["t"]})
    assert env.commit_now("g", [("t", 0, 4)], generation=1, member="m1") == [E.NONE]
    assert len(resets) == 1


async def test_loading_shard_is_load_in_progress(env):
    env.shard().status = ShardStatus.LOADING
    assert env.commit_now("g", [("t", 0, 1)]) == [E.COORDINATOR_LOAD_IN_PROGRESS]


async def test_failed_shard_is_not_coordinator(env):
    env.shard().status = ShardStatus.FAILED
    assert env.commit_now("g", [("t", 0, 1)]) == [E.NOT_COORDINATOR]


# --- per partition -----------------------------------------------------------------------------------------

async def test_unknown_topics_and_partitions_fail_alone(env):
    got = env.commit_now("g", [("t", 0, 1), ("t", 4, 1), ("t", -1, 1), ("nope", 0, 1), ("v", 0, 2)])
    assert got == [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION,
                   E.UNKNOWN_TOPIC_OR_PARTITION, E.NONE]
    assert env.committed("g") == {("t", 0): 1, ("v", 0): 2}


async def test_unknown_topics_are_answered_before_group_checks(env):
    env.consumer_group("g", {"m1": ["t"]}, state=GroupState.COMPLETING_REBALANCE)
    assert env.commit_now("g", [("nope", 0, 1)], generation=1, member="m1") == \
        [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert env.commit_now(None, [("nope", 0, 1)]) == [E.UNKNOWN_TOPIC_OR_PARTITION]


async def test_metadata_limit_is_per_partition(tmp_path):
    env = await OffsetsEnv(tmp_path, offset_metadata_max_bytes=10).start()
    got = env.commit_now("g", [("t", 0, 1, "x" * 10), ("t", 1, 1, "x" * 11), ("t", 2, 1, None)])
    assert got == [E.NONE, E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert env.committed("g") == {("t", 0): 1, ("t", 2): 1}
    assert stored(env)[("t", 2)].metadata == ""  # null metadata is stored as ""
    await env.stop()


async def test_metadata_limit_counts_java_chars(tmp_path):
    env = await OffsetsEnv(tmp_path, offset_metadata_max_bytes=4).start()
    # two characters outside the BMP are four UTF-16 code units: at the limit, not over it
    assert env.commit_now("g", [("t", 0, 1, "\U0001d11e" * 2), ("t", 1, 1, "é" * 4),
                                ("t", 2, 1, "\U0001d11e" * 2 + "a")]) == \
        [E.NONE, E.NONE, E.OFFSET_METADATA_TOO_LARGE]
    await env.stop()


async def test_a_group_error_outranks_metadata_too_large_but_not_an_unknown_partition(tmp_path):
    """Kafka's order: unknown partitions first, then the group's checks, then each metadata's size
    (the commit path screens rows only when one fails its per-topic checks)."""
    env = await OffsetsEnv(tmp_path, offset_metadata_max_bytes=1).start()
    env.consumer_group("g", {"m1": ["t"]}, state=GroupState.COMPLETING_REBALANCE)
    assert env.commit_now("g", [("t", 0, 1, "xx"), ("nope", 0, 1), ("t", 1, 1)], generation=1, member="m1") == \
        [E.REBALANCE_IN_PROGRESS, E.UNKNOWN_TOPIC_OR_PARTITION, E.REBALANCE_IN_PROGRESS]
    assert env.commit_now("h", [("t", 0, 1, "xx"), ("nope", 0, 1), ("t", 1, 1)]) == \
        [E.OFFSET_METADATA_TOO_LARGE, E.UNKNOWN_TOPIC_OR_PARTITION, E.NONE]
    assert env.committed("h") == {("t", 1): 1}
    await env.stop()


async def test_all_metadata_too_large_writes_nothing(tmp_path):
    env = await OffsetsEnv(tmp_path, offset_metadata_max_bytes=1).start()
    end = env.shard().log.log_end_offset
    assert env.commit_now("g", [("t", 0, 1, "xx"), ("t", 1, 1, "yy")]) == [E.OFFSET_METADATA_TOO_LARGE] * 2
    assert env.shard().log.log_end_offset == end
    assert "g" not in env.shard().groups  # nothing written: no simple group either
    await env.stop()


async def test_one_batch_per_request(env):
    log = env.shard().log
    start = log.log_end_offset
    env.commit_now("g", [("t", p, 100 + p) for p in range(4)] + [("u", 0, 7)])
    header, records = decode_batch(log.read(start, 1 << 20))
    assert header.base_offset == start and len(records) == 5
    assert header.producer_id == -1 and log.log_end_offset == start + 5


async def test_commit_timestamp_and_leader_epoch_are_stored(env):
    now = env.clock.now_ms()
    env.commit_now("g", [("t", 0, 1, "m", 7), ("t", 1, 2, "", -1, 12345)])
    values = stored(env)
    assert values[("t", 0)] == OffsetValue(offset=1, leader_epoch=7, metadata="m", commit_timestamp=now)
    assert values[("t", 1)] == OffsetValue(offset=2, metadata="", commit_timestamp=12345)


async def test_retention_sets_an_explicit_expiry_written_as_value_v1(env):
    now = env.clock.now_ms()
    log = env.shard().log
    start = log.log_end_offset
    assert env.commit_now("g", [("t", 0, 1)], version=2, retention=60_000) == [E.NONE]
    assert stored(env)[("t", 0)].expire_timestamp == now + 60_000
    _, records = decode_batch(log.read(start, 1 << 20))
    assert records[0].value[:2] == b"\x00\x01"  # OffsetCommitValue version 1


async def test_write_failure_maps_storage_error_to_not_coordinator(env):
    env.shard().log.durability.failed = OSError("disk gone")
    assert env.commit_now("g", [("t", 0, 1)]) == [E.NOT_COORDINATOR]
    assert stored(env) == {}


async def test_batch_over_max_message_bytes_is_invalid_commit_offset_size(env):
    import dataclasses

    log = env.shard().log
    log.config = dataclasses.replace(log.config, max_message_bytes=200)
    got = env.commit_now("g", [("t", p, 1, "x" * 100) for p in range(4)])
    assert got == [E.INVALID_COMMIT_OFFSET_SIZE] * 4
    assert stored(env) == {}


async def test_survives_reload_with_simple_and_consumer_groups(env):
    group = env.consumer_group("c", {"m1": ["t"]})
    await env.persist_group(group)
    env.commit_now("c", [("t", 0, 11)], generation=1, member="m1")
    env.commit_now("s", [("u", 1, 22, "meta", 4)])
    view = env.shard().persisted_view()
    await env.restart()
    assert env.shard().persisted_view() == view
    assert env.shard().groups["s"].protocol_type is None
    assert env.shard().groups["c"].state is GroupState.STABLE


# --- durability ----------------------------------------------------------------------------------------------

async def test_fsync_always_answers_after_fsync_and_is_pending_until_then(tmp_path):
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS).start()
    promise = env.commit("g", [("t", 0, 9)])
    assert not promise.done
    error, parts = env.fetch("g", [("t", [0])], require_stable=True)
    assert parts[0].error is E.UNSTABLE_OFFSET_COMMIT and parts[0].offset == -1
    assert env.fetch("g", [("t", [0])])[1][0].offset == -1  # not yet committed
    assert await wait(promise) == [E.NONE]
    assert env.shard().log.durability.recovery_point >= env.shard().log.log_end_offset
    assert env.committed("g") == {("t", 0): 9}
    await env.stop()


# --- every version over the wire ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(10))
async def test_every_version_commits(env, version):
    now = env.clock.now_ms()
    body = commit_body("g", [("t", 0, 40 + version, "meta", 6, now - 1000), ("nope", 0, 1)],
                       retention=60_000)
    response = await env.wire(8, version, body)
    assert commit_errors(response) == {("t", 0): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    value = stored(env)[("t", 0)]
    assert value.offset == 40 + version and value.metadata == "meta"
    assert value.commit_timestamp == (now - 1000 if version == 1 else now)
    assert value.expire_timestamp == (now + 60_000 if 2 <= version <= 4 else -1)
    # the epoch travels from v6; a v1 value (explicit expiry) cannot carry it
    assert value.leader_epoch == (6 if version >= 6 else -1)


@pytest.mark.parametrize("version", range(10))
async def test_group_errors_are_repeated_on_every_partition(env, version):
    env.consumer_group("g", {"m1": ["t"]}, state=GroupState.COMPLETING_REBALANCE)
    body = commit_body("g", [("t", 0, 1), ("t", 1, 1), ("u", 0, 1)], generation=1, member="m1")
    response = await env.wire(8, version, body)
    # v0 carries no generation or member: a simple commit into an active group
    expected = E.UNKNOWN_MEMBER_ID if version == 0 else E.REBALANCE_IN_PROGRESS
    assert set(commit_errors(response).values()) == {expected}


async def test_v7_instance_id_reaches_validation(env):
    env.consumer_group("g", {"m1": ["t"]}, instance_ids={"m1": "i1"})
    response = await env.wire(8, 7, commit_body("g", [("t", 0, 1)], generation=1, member="m2",
                                                instance="i1"))
    assert commit_errors(response) == {("t", 0): E.FENCED_INSTANCE_ID}
