"""OffsetDelete (KIP-496, GroupCoordinator.handleDeleteOffsets) and offsets of deleted topics."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.state import GroupState
from odradek.broker.runtime.runtime import ShardStatus
from odradek.offsets.records import GroupKey, OffsetKey, decode_key
from odradek.protocol.records import decode_batch

from .test_offsets_harness import E, OffsetsEnv, wait


@pytest.fixture
async def env(tmp_path):
    env = await OffsetsEnv(tmp_path).start()
    yield env
    await env.stop()


def records_since(env, start: int) -> list[tuple[object, bytes | None]]:
    out = []
    data = env.shard().log.read(start, 1 << 20)
    pos = 0
    while pos < len(data):
        header, records = decode_batch(data, pos)
        pos += header.size
        out.extend((decode_key(r.key), r.value) for r in records)
    return out


async def test_empty_group_deletes_listed_partitions(env):
    env.commit_now("g", [("t", 0, 1), ("t", 1, 2), ("u", 0, 3)])
    error, parts = env.delete("g", [("t", [0, 3]), ("u", [1])])
    assert error is E.NONE
    assert parts == [("t", 0, E.NONE), ("t", 3, E.NONE), ("u", 1, E.NONE)]
    assert env.committed("g") == {("t", 1): 2, ("u", 0): 3}


async def test_tombstones_only_where_an_offset_existed(env):
    env.commit_now("g", [("t", 0, 1), ("t", 1, 2)])
    start = env.shard().log.log_end_offset
    env.delete("g", [("t", [0, 2])])
    assert records_since(env, start) == [(OffsetKey("g", "t", 0), None)]


async def test_unknown_topic_partitions_get_error_3(env):
    env.commit_now("g", [("t", 0, 1)])
    error, parts = env.delete("g", [("t", [0, 9]), ("nope", [0])])
    assert error is E.NONE
    assert parts == [("t", 0, E.NONE), ("t", 9, E.UNKNOWN_TOPIC_OR_PARTITION),
                     ("nope", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]


async def test_absent_and_dead_groups_are_group_id_not_found(env):
    assert env.delete("g", [("t", [0])]) == (E.GROUP_ID_NOT_FOUND, [])
    env.commit_now("g", [("t", 0, 1)])
    env.shard().groups["g"].transition(GroupState.DEAD, env.clock.now_ms())
    assert env.delete("g", [("t", [0])]) == (E.GROUP_ID_NOT_FOUND, [])


async def test_group_id_must_not_be_empty(env):
    assert env.delete("", [("t", [0])]) == (E.INVALID_GROUP_ID, [])


async def test_loading_shard(env):
    env.shard().status = ShardStatus.LOADING
    assert env.delete("g", [("t", [0])]) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])


@pytest.mark.parametrize("state", [GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                                   GroupState.COMPLETING_REBALANCE])
async def test_active_consumer_group_keeps_subscribed_topics(env, state):
    env.commit_now("g", [("t", 0, 1), ("u", 0, 2), ("v", 0, 3)])
    env.consumer_group("g", {"m1": ["t"], "m2": ["t", "v"]}, state=state)
    if state is GroupState.PREPARING_REBALANCE:
        env.shard().groups["g"].subscribed_topics = {"t", "v"}  # as computed at the last generation
    error, parts = env.delete("g", [("t", [0]), ("u", [0]), ("v", [0])])
    assert error is E.NONE
    assert parts == [("t", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("u", 0, E.NONE),
                     ("v", 0, E.GROUP_SUBSCRIBED_TO_TOPIC)]
    assert env.committed("g") == {("t", 0): 1, ("v", 0): 3}


async def test_unknown_subscription_counts_as_subscribed(env):
    env.commit_now("g", [("u", 0, 2)])
    group = env.consumer_group("g", {"m1": ["t"]})
    group.subscribed_topics = None  # a member's metadata could not be parsed
    assert env.delete("g", [("u", [0])]) == (E.NONE, [("u", 0, E.GROUP_SUBSCRIBED_TO_TOPIC)])


async def test_other_protocol_types_with_members_are_non_empty_group(env):
    env.commit_now("g", [("u", 0, 2)])
    group = env.consumer_group("g", {"m1": ["t"]})
    group.protocol_type = "connect"
    assert env.delete("g", [("u", [0])]) == (E.NON_EMPTY_GROUP, [])
    assert env.committed("g") == {("u", 0): 2}


async def test_simple_group_dies_with_its_last_offset_without_group_tombstone(env):
    env.commit_now("g", [("t", 0, 1)])
    start = env.shard().log.log_end_offset
    assert env.delete("g", [("t", [0])]) == (E.NONE, [("t", 0, E.NONE)])
    assert "g" not in env.shard().groups
    assert records_since(env, start) == [(OffsetKey("g", "t", 0), None)]
    await env.restart()
    assert "g" not in env.shard().groups


async def test_empty_consumer_group_dies_with_a_group_tombstone_in_the_same_batch(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    await env.persist_group(group)
    env.commit_now("g", [("t", 0, 1)], generation=1, member="m1")
    env.empty_group(group)
    await env.persist_group(group)
    start = env.shard().log.log_end_offset
    assert env.delete("g", [("t", [0])]) == (E.NONE, [("t", 0, E.NONE)])
    assert group.state is GroupState.DEAD and "g" not in env.shard().groups
    header, records = decode_batch(env.shard().log.read(start, 1 << 20))
    assert [(decode_key(r.key), r.value) for r in records] == [
        (OffsetKey("g", "t", 0), None), (GroupKey("g"), None)]
    await env.restart()
    assert "g" not in env.shard().groups and env.shard().persisted_view() == ({}, {})


async def test_deleted_topics_lose_their_offsets_in_every_group(tmp_path):
    env = await OffsetsEnv(tmp_path, partitions=3).start()
    groups = [f"g{i}" for i in range(6)]
    for g in groups:
        env.commit_now(g, [("t", 0, 1), ("u", 1, 2)])
    env.commit_now("only-t", [("t", 1, 1)])
    promises = env.coordinator.on_topics_deleted(["t"])
    for p in promises:
        assert await wait(p) is None
    for g in groups:
        assert env.committed(g) == {("u", 1): 2}
    assert "only-t" not in env.shard("only-t").groups  # Empty, no offsets: dead
    views = [s.persisted_view() for s in env.coordinator.shards]
    await env.restart()
    assert [s.persisted_view() for s in env.coordinator.shards] == views
    await env.stop()


async def test_wire_error_response_has_no_topics(env):
    response = await env.wire(47, 0, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert response.error_code == E.GROUP_ID_NOT_FOUND and response.topics == []
    env.commit_now("g", [("t", 0, 1)])
    response = await env.wire(47, 0, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 7}]}]})
    assert response.error_code == 0
    assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == [
        (0, 0), (7, E.UNKNOWN_TOPIC_OR_PARTITION)]
