"""Heartbeat, LeaveGroup and session expiry (Kafka's handleHeartbeat, handleLeaveGroup, onExpireHeartbeat) on a ManualClock."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.api import LeaveMember
from odradek.broker.coordinator.rebalance import reset_session
from odradek.broker.coordinator.state import GroupState
from tests.unit.coordinator_harness import GROUP, SESSION, E, Harness, ok


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path)


# --- session expiry ---------------------------------------------------------------------------


def test_silent_member_expires_and_the_group_rebalances(h):
    leader, follower = h.stable_group(2)
    h.advance(SESSION - 1000)
    assert h.heartbeat(leader, 2) is E.NONE
    assert follower in h.group().members
    h.advance(1000)
    group = h.group()
    assert follower not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(leader, 2) is E.REBALANCE_IN_PROGRESS
    assert ok(h.join(leader).result()).generation == 3


def test_heartbeats_keep_a_member_alive(h):
    leader = h.stable_group(1)[0]
    for _ in range(20):
        h.advance(SESSION - 1)
        assert h.heartbeat(leader, 1) is E.NONE
    assert h.group().state is GroupState.STABLE


def test_expiry_is_exactly_one_session_after_the_last_activity(h):
    leader = h.stable_group(1)[0]
    h.advance(4000)
    h.heartbeat(leader, 1)
    h.advance(SESSION - 1)
    assert leader in h.group().members
    h.advance(1)
    assert leader not in h.group().members


def test_last_member_expiring_empties_the_group_and_writes_a_record(h):
    h.stable_group(1)
    h.advance(SESSION)
    group = h.group()
    assert group.state is GroupState.EMPTY and group.generation == 2
    record = h.shard.group_records[GROUP]
    assert record.members == [] and record.generation == 2


def test_heartbeat_in_preparing_rebalance_resets_the_session(h):
    leader, follower = h.stable_group(2, rebalance=60_000, session=10_000)
    h.join(leader, rebalance=60_000)
    for _ in range(5):
        h.advance(9_000)
        assert h.heartbeat(follower, 2) is E.REBALANCE_IN_PROGRESS
    assert follower in h.group().members


def test_heartbeat_in_completing_rebalance_resets_the_session(h):
    leader, follower = h.stable_group(2, rebalance=60_000)
    h.join(leader, rebalance=60_000)
    h.join(follower, rebalance=60_000)
    for _ in range(5):  # the leader takes its time to assign; both keep heartbeating (KAFKA-10134)
        h.advance(9_000)
        assert h.heartbeat(leader, 3) is E.NONE and h.heartbeat(follower, 3) is E.NONE
    assert h.group().state is GroupState.COMPLETING_REBALANCE and len(h.group().members) == 2


def test_parked_join_keeps_a_known_member_alive(h):
    leader, follower = h.stable_group(2, rebalance=60_000)
    parked = h.join(leader, rebalance=60_000)
    for _ in range(5):
        h.advance(9_000)
        h.heartbeat(follower, 2)
    assert not parked.done and leader in h.group().members  # 45 s > session, still there
    h.join(follower, rebalance=60_000)
    assert ok(parked.result()).generation == 3


def test_parked_sync_keeps_a_member_alive(h):
    leader, follower = h.stable_group(2, rebalance=60_000)
    h.join(leader, rebalance=60_000)
    h.join(follower, rebalance=60_000)
    parked = h.sync(follower, 3)
    h.advance(SESSION + 5000)  # the leader never syncs; the follower waits in SyncGroup
    assert follower in h.group().members and leader not in h.group().members
    assert parked.result().error is E.REBALANCE_IN_PROGRESS  # the leader's expiry rebalanced


def test_accepted_commit_resets_the_session(h):
    leader = h.stable_group(1)[0]
    for _ in range(3):
        h.advance(SESSION - 1)
        reset_session(h.shard, h.group(), leader)  # what an accepted OffsetCommit does
    assert leader in h.group().members
    reset_session(h.shard, h.group(), "not-a-member")  # harmless


# --- Heartbeat order of checks ---------------------------------------------------------------


def test_heartbeat_member_before_generation_before_state(h):
    leader, _ = h.stable_group(2)
    assert h.heartbeat("ghost", 99) is E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(leader, 99) is E.ILLEGAL_GENERATION
    h.join(leader)  # PreparingRebalance keeps the old generation
    assert h.heartbeat(leader, 99) is E.ILLEGAL_GENERATION
    assert h.heartbeat(leader, 2) is E.REBALANCE_IN_PROGRESS


# --- LeaveGroup ------------------------------------------------------------------------------


def test_leave_rebalances_the_rest(h):
    leader, follower = h.stable_group(2)
    result = h.leave(follower)
    assert result.error is E.NONE and result.members[0][1] is E.NONE
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert ok(h.join(leader).result()).members == [(leader, None, h.group().members[leader].metadata("range"))]


def test_leave_answers_a_parked_join_with_unknown_member(h):
    leader, follower = h.stable_group(2)
    parked = h.join(leader)
    h.leave(leader)
    result = parked.result()
    assert result.error is E.UNKNOWN_MEMBER_ID and result.member_id == ""


def test_leaving_last_member_during_join_completes_into_empty(h):
    leader, follower = h.stable_group(2)
    h.join(leader)
    h.leave(leader, follower)
    group = h.group()
    assert group.state is GroupState.EMPTY and group.generation == 3
    assert h.shard.group_records[GROUP].members == []


def test_batched_leave_reports_each_member(h):
    leader, follower = h.stable_group(2)
    result = h.leave(LeaveMember(follower, reason="bye"), LeaveMember("ghost"),
                     LeaveMember(leader, "wrong-instance"))
    assert [e for _, e in result.members] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert [m.member_id for m, _ in result.members] == [follower, "ghost", leader]


def test_leave_during_initial_delay_waits_for_the_delay(tmp_path):
    h = Harness(tmp_path, initial_rebalance_delay_ms=3000)
    first = h.join_new()
    member = h.group().members.copy().popitem()[0]
    h.leave(member)
    assert first.result().error is E.UNKNOWN_MEMBER_ID
    assert h.group().state is GroupState.PREPARING_REBALANCE  # the initial delay never ends early
    h.advance(3000)
    assert h.group().state is GroupState.EMPTY and h.group().generation == 1
