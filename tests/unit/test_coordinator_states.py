"""Every group state x member request, with the error code Kafka answers (GroupCoordinator.handleJoinGroup, handleSyncGroup, handleHeartbeat, handleLeaveGroup)."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.state import GroupState
from tests.unit.coordinator_harness import E, Harness

S = GroupState


def group_in(h: Harness, state: GroupState) -> tuple[str, int]:
    """Put group "g" in ``state``; returns (an existing member id, the group's generation)."""
    leader, follower, other = h.stable_group(3)
    if state is S.EMPTY:
        h.leave(leader, follower, other)
        return follower, h.group().generation
    if state is S.PREPARING_REBALANCE:
        h.join(leader)  # parked; the others have not rejoined yet
    elif state is S.COMPLETING_REBALANCE:
        for member in (leader, follower, other):
            h.join(member)
    elif state is S.DEAD:
        h.group().transition(S.DEAD, h.clock.now_ms())  # being removed "concurrently"
    assert h.group().state is state
    return follower, h.group().generation


# state -> (heartbeat, sync, leave, join-with-same-metadata); "parked" = no answer yet
MATRIX = {
    S.EMPTY: (E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID),
    S.PREPARING_REBALANCE: (E.REBALANCE_IN_PROGRESS, E.REBALANCE_IN_PROGRESS, E.NONE, "parked"),
    S.COMPLETING_REBALANCE: (E.NONE, "parked", E.NONE, E.NONE),
    S.STABLE: (E.NONE, E.NONE, E.NONE, E.NONE),
    S.DEAD: (E.COORDINATOR_NOT_AVAILABLE,) * 4,
}


@pytest.mark.parametrize("state", list(MATRIX), ids=lambda s: s.value)
def test_heartbeat_by_state(tmp_path, state):
    h = Harness(tmp_path)
    member, generation = group_in(h, state)
    assert h.heartbeat(member, generation) is MATRIX[state][0]


@pytest.mark.parametrize("state", list(MATRIX), ids=lambda s: s.value)
def test_sync_by_state(tmp_path, state):
    h = Harness(tmp_path)
    member, generation = group_in(h, state)
    answer = h.sync(member, generation)
    expected = MATRIX[state][1]
    if expected == "parked":
        assert not answer.done
    else:
        assert answer.result().error is expected


@pytest.mark.parametrize("state", list(MATRIX), ids=lambda s: s.value)
def test_leave_by_state(tmp_path, state):
    h = Harness(tmp_path)
    member, _ = group_in(h, state)
    result = h.leave(member)
    if state is S.DEAD:
        assert result.error is E.COORDINATOR_NOT_AVAILABLE and result.members == []
    else:
        assert result.error is E.NONE and result.members[0][1] is MATRIX[state][2]


@pytest.mark.parametrize("state", list(MATRIX), ids=lambda s: s.value)
def test_join_known_member_by_state(tmp_path, state):
    h = Harness(tmp_path)
    member, _ = group_in(h, state)
    answer = h.join(member)
    expected = MATRIX[state][3]
    if expected == "parked":
        assert not answer.done
    else:
        assert answer.result().error is expected


@pytest.mark.parametrize("state", [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE],
                         ids=lambda s: s.value)
def test_wrong_generation_by_state(tmp_path, state):
    h = Harness(tmp_path)
    member, generation = group_in(h, state)
    assert h.heartbeat(member, generation + 1) is E.ILLEGAL_GENERATION
    assert h.sync(member, generation - 1).result().error is E.ILLEGAL_GENERATION


@pytest.mark.parametrize("state", [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE],
                         ids=lambda s: s.value)
def test_unknown_member_by_state(tmp_path, state):
    h = Harness(tmp_path)
    _, generation = group_in(h, state)
    assert h.heartbeat("nobody", generation) is E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nobody", generation + 7) is E.UNKNOWN_MEMBER_ID  # member before generation
    assert h.sync("nobody", generation).result().error is E.UNKNOWN_MEMBER_ID
    assert h.leave("nobody").members[0][1] is E.UNKNOWN_MEMBER_ID
    assert h.join("nobody").result().error is E.UNKNOWN_MEMBER_ID


def test_absent_group(tmp_path):
    h = Harness(tmp_path)
    assert h.heartbeat("m", 1) is E.UNKNOWN_MEMBER_ID
    assert h.sync("m", 1).result().error is E.UNKNOWN_MEMBER_ID
    result = h.leave("m")
    assert result.error is E.NONE and result.members[0][1] is E.UNKNOWN_MEMBER_ID
    assert h.join("m").result().error is E.UNKNOWN_MEMBER_ID


def test_pending_member_ids_are_not_members(tmp_path):
    h = Harness(tmp_path)
    h.stable_group(1)
    pending = h.join().result().member_id
    assert h.heartbeat(pending, 1) is E.UNKNOWN_MEMBER_ID
    assert h.sync(pending, 1).result().error is E.UNKNOWN_MEMBER_ID
    assert h.leave(pending).members[0][1] is E.NONE  # a pending id is simply dropped
    assert pending not in h.group().pending_members


def test_invalid_group_id(tmp_path):
    h = Harness(tmp_path)
    assert h.heartbeat("m", 1, group="") is E.INVALID_GROUP_ID
    assert h.sync("m", 1, group="").result().error is E.INVALID_GROUP_ID
    assert h.leave("m", group="").error is E.INVALID_GROUP_ID
    assert h.join(group="").result().error is E.INVALID_GROUP_ID
