"""Offset expiry under KIP-211 (GroupMetadataManager.cleanupGroupMetadata), driven by a manual clock: no sleeping."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from odradek.broker.coordinator.state import GroupState
from odradek.offsets.records import GroupKey, OffsetKey, decode_key
from odradek.protocol.records import decode_batch
from odradek.storage.config import FsyncMode

from .test_offsets_harness import MINUTE, E, OffsetsEnv, wait

RETENTION = 10 * MINUTE
INTERVAL = MINUTE


@pytest.fixture
async def env(tmp_path):
    env = await OffsetsEnv(tmp_path, offsets_retention_ms=RETENTION,
                           offsets_retention_check_interval_ms=INTERVAL).start()
    yield env
    await env.stop()


def sweep(env):
    return env.coordinator.expiry.sweep()


async def test_empty_group_expires_from_when_it_became_empty(env):
    group = env.consumer_group("g", {"m1": ["t", "u"]})
    await env.persist_group(group)
    env.commit_now("g", [("t", 0, 1), ("u", 0, 2)], generation=1, member="m1")
    env.clock.advance(30 * MINUTE)  # old commits; but the group is not Empty yet
    assert env.committed("g") == {("t", 0): 1, ("u", 0): 2}
    env.empty_group(group)
    await env.persist_group(group)
    env.clock.advance(RETENTION - MINUTE)
    assert env.committed("g") == {("t", 0): 1, ("u", 0): 2}
    start = env.shard().log.log_end_offset
    env.clock.advance(MINUTE)  # the sweep at exactly Empty + retention
    assert env.committed("g") == {}
    assert "g" not in env.shard().groups and group.state is GroupState.DEAD
    header, records = decode_batch(env.shard().log.read(start, 1 << 20))  # one batch
    assert sorted(((decode_key(r.key), r.value) for r in records), key=repr) == sorted(
        [(OffsetKey("g", "t", 0), None), (OffsetKey("g", "u", 0), None), (GroupKey("g"), None)], key=repr)
    await env.restart()
    assert env.shard().persisted_view() == ({}, {})


async def test_empty_group_without_state_timestamp_uses_commit_times(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    env.commit_now("g", [("t", 0, 1)], generation=1, member="m1")
    env.clock.advance(5 * MINUTE)
    env.commit_now("g", [("t", 1, 1)], generation=1, member="m1")
    env.empty_group(group)
    group.current_state_timestamp = -1  # as loaded from a v0/v1 group record
    env.clock.advance(5 * MINUTE)
    assert env.committed("g") == {("t", 1): 1}
    env.clock.advance(5 * MINUTE)
    assert env.committed("g") == {}


async def test_stable_group_expires_only_unsubscribed_topics(env):
    env.consumer_group("g", {"m1": ["t"], "m2": ["t", "v"]})
    env.commit_now("g", [("t", 0, 1), ("u", 0, 2), ("v", 0, 3)], generation=1, member="m1")
    env.clock.advance(RETENTION - MINUTE)
    assert len(env.committed("g")) == 3
    env.clock.advance(MINUTE)
    assert env.committed("g") == {("t", 0): 1, ("v", 0): 3}
    env.clock.advance(100 * RETENTION)
    assert env.committed("g") == {("t", 0): 1, ("v", 0): 3}
    assert env.shard().groups["g"].state is GroupState.STABLE


@pytest.mark.parametrize("state", [GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE])
async def test_rebalancing_group_expires_nothing(env, state):
    env.commit_now("g", [("u", 0, 2)])
    env.consumer_group("g", {"m1": ["t"]}, state=state)
    env.clock.advance(3 * RETENTION)
    assert env.committed("g") == {("u", 0): 2}


async def test_unknown_subscription_expires_nothing(env):
    env.commit_now("g", [("u", 0, 2)])
    env.consumer_group("g", {"m1": ["t"]}).subscribed_topics = None
    env.clock.advance(3 * RETENTION)
    assert env.committed("g") == {("u", 0): 2}


async def test_non_consumer_protocol_with_members_expires_nothing(env):
    env.commit_now("g", [("u", 0, 2)])
    env.consumer_group("g", {"m1": ["t"]}).protocol_type = "connect"
    env.clock.advance(3 * RETENTION)
    assert env.committed("g") == {("u", 0): 2}


async def test_simple_group_expires_each_offset_from_its_commit(env):
    env.commit_now("s", [("t", 0, 1)])
    env.clock.advance(5 * MINUTE)
    env.commit_now("s", [("t", 1, 2)])
    start = env.shard("s").log.log_end_offset
    env.clock.advance(5 * MINUTE)
    assert env.committed("s") == {("t", 1): 2}
    env.clock.advance(5 * MINUTE)
    assert env.committed("s") == {} and "s" not in env.shard("s").groups
    keys = [decode_key(r.key) for _, rs in _batches(env, start) for r in rs]
    assert GroupKey("s") not in keys  # generation 0: a commit-only group has no group record


async def test_recommitting_restarts_a_simple_offset_clock(env):
    env.commit_now("s", [("t", 0, 1)])
    env.clock.advance(9 * MINUTE)
    env.commit_now("s", [("t", 0, 2)])
    env.clock.advance(9 * MINUTE)
    assert env.committed("s") == {("t", 0): 2}


async def test_explicit_expire_timestamp_is_honoured(env):
    env.commit_now("short", [("t", 0, 1)], version=2, retention=2 * MINUTE)
    env.commit_now("long", [("t", 0, 1)], version=4, retention=3 * RETENTION)
    env.clock.advance(2 * MINUTE)
    assert env.committed("short") == {}
    env.clock.advance(RETENTION)
    assert env.committed("long") == {("t", 0): 1}  # its own expiry beats the broker's retention
    env.clock.advance(2 * RETENTION)
    assert env.committed("long") == {}


async def test_explicit_expiry_does_not_touch_subscribed_topics(env):
    env.consumer_group("g", {"m1": ["t"]})
    env.commit_now("g", [("t", 0, 1), ("u", 0, 1)], generation=1, member="m1", version=2,
                   retention=MINUTE)
    env.clock.advance(2 * MINUTE)
    assert env.committed("g") == {("t", 0): 1}


async def test_rejoining_before_expiry_cancels_it(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    env.commit_now("g", [("t", 0, 1)], generation=1, member="m1")
    env.empty_group(group)
    env.clock.advance(RETENTION - 2 * MINUTE)
    env.consumer_group("g", {"m2": ["t"]})  # a consumer comes back, subscribed to t
    env.clock.advance(3 * RETENTION)
    assert env.committed("g") == {("t", 0): 1}
    assert env.shard().groups["g"].state is GroupState.STABLE


async def test_empty_group_without_offsets_dies_at_the_next_sweep(env):
    group = env.consumer_group("g", {"m1": ["t"]})
    env.empty_group(group)
    env.clock.advance(INTERVAL)
    assert "g" not in env.shard().groups


async def test_pending_commits_never_expire(tmp_path):
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS, offsets_retention_ms=RETENTION,
                           offsets_retention_check_interval_ms=INTERVAL).start()
    assert await wait(env.commit("s", [("t", 0, 1)])) == [E.NONE]
    env.clock.advance(RETENTION - 1)
    promise = env.commit("s", [("t", 0, 2)], version=2, retention=0)  # in flight across the sweep
    stats = sweep(env)
    assert stats.offsets_expired == 0
    assert await wait(promise) == [E.NONE]
    await env.stop()


async def test_one_batch_per_shard_and_one_log_event_per_sweep(env):
    for g in ("a", "b", "c"):
        env.commit_now(g, [("t", 0, 1), ("u", 1, 1)])
    start = env.shard().log.log_end_offset
    env.clock.advance(RETENTION - 1)
    with capture_logs() as logs:
        env.clock.advance(INTERVAL)
    sweeps = [e for e in logs if e["event"] == "offsets.expiry_sweep"]
    assert len(sweeps) == 1
    assert (sweeps[0]["offsets_expired"], sweeps[0]["groups_removed"], sweeps[0]["groups"]) == (6, 3, 3)
    assert len(_batches(env, start)) == 1


async def test_sweeps_run_every_check_interval_on_the_clock(env):
    env.commit_now("s", [("t", 0, 1)])
    before = env.coordinator.expiry.sweeps
    for _ in range(5):
        env.clock.advance(INTERVAL)
    assert env.coordinator.expiry.sweeps == before + 5


async def test_one_advance_over_many_intervals_sweeps_once_and_keeps_the_rhythm(env):
    """The runs an advance skips would have found less to do than its last one (clock.call_every)."""
    env.commit_now("s", [("t", 0, 1)])
    before = env.coordinator.expiry.sweeps
    env.clock.advance(1000 * INTERVAL + 1)
    assert env.coordinator.expiry.sweeps == before + 1
    assert env.committed("s") == {}  # what the skipped runs would have expired is expired
    env.clock.advance(INTERVAL - 2)
    assert env.coordinator.expiry.sweeps == before + 1
    env.clock.advance(1)  # the next interval boundary, as before the advance
    assert env.coordinator.expiry.sweeps == before + 2


async def test_a_shard_is_swept_when_it_finishes_loading(env):
    env.commit_now("s", [("t", 0, 1)])
    await env.stop()
    env.clock.advance(2 * RETENTION)  # the broker was down past the retention
    await env.start()
    assert env.committed("s") == {}


def _batches(env, start: int) -> list:
    data = env.shard().log.read(start, 1 << 20) if start < env.shard().log.log_end_offset else b""
    out, pos = [], 0
    while pos < len(data):
        header, records = decode_batch(data, pos)
        pos += header.size
        out.append((header, records))
    return out
