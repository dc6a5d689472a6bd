"""Loading (GroupMetadataManager.loadGroupsAndOffsets): answers while a shard loads, groups rebuilt from the log, sessions restart."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.service import Coordinator
from odradek.broker.coordinator.state import GroupState
from odradek.broker.runtime.runtime import ShardStatus
from tests.unit.coordinator_harness import GROUP, SESSION, E, Harness, ok


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path)


@pytest.fixture
def loading(h):
    """A second coordinator over the same log that has not replayed it yet."""
    leader = h.stable_group(1)[0]
    h.coordinator = Coordinator(h.clock, h.config, [h.log])
    assert h.shard.status is ShardStatus.LOADING
    return leader


def test_join_leave_describe_delete_answer_load_in_progress(h, loading):
    assert h.join().result().error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.join(loading).result().member_id == loading
    assert h.leave(loading).error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.describe().error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.delete(GROUP) == {GROUP: E.COORDINATOR_LOAD_IN_PROGRESS}


def test_heartbeat_answers_none_while_loading(h, loading):
    assert h.heartbeat(loading, 1) is E.NONE
    assert h.heartbeat("anyone", 42) is E.NONE


def test_sync_answers_rebalance_in_progress_while_loading(h, loading):
    assert h.sync(loading, 1).result().error is E.REBALANCE_IN_PROGRESS


def test_list_groups_reports_load_in_progress(h, loading):
    error, groups = h.list()
    assert error is E.COORDINATOR_LOAD_IN_PROGRESS and groups == []


def test_invalid_group_id_wins_over_loading(h, loading):
    assert h.join(group="").result().error is E.INVALID_GROUP_ID
    assert h.heartbeat("m", 1, group="") is E.INVALID_GROUP_ID


# --- after a restart ---------------------------------------------------------------------------


def test_stable_group_is_rebuilt_from_its_record(h):
    leader, follower = h.stable_group(2)
    before = h.group()
    h.restart()
    group = h.group()
    assert group.state is GroupState.STABLE
    assert (group.generation, group.protocol_type, group.protocol_name, group.leader_id) == \
        (before.generation, "consumer", "range", leader)
    assert {m: x.assignment for m, x in group.members.items()} == {leader: leader.encode(),
                                                                   follower: follower.encode()}
    assert group.subscribed_topics == {"t"}
    assert h.heartbeat(leader, 2) is E.NONE
    assert ok(h.sync(follower, 2).result()).assignment == follower.encode()


def test_loaded_members_that_never_return_expire_and_the_group_rebalances(h):
    leader, follower = h.stable_group(2)
    h.restart()
    h.advance(SESSION - 1)
    assert h.heartbeat(leader, 2) is E.NONE
    h.advance(1)
    assert follower not in h.group().members
    assert h.heartbeat(leader, 2) is E.REBALANCE_IN_PROGRESS


def test_nobody_returns_after_restart(h):
    h.stable_group(2)
    h.restart()
    h.advance(SESSION)
    group = h.group()
    assert group.state is GroupState.EMPTY and group.generation == 3
    h.restart()
    assert h.group().state is GroupState.EMPTY and h.group().generation == 3


def test_group_over_max_size_rebalances_after_load(tmp_path):
    h = Harness(tmp_path)
    leader, a, b = h.stable_group(3)
    h.config = type(h.config)(**{**h.config.__dict__, "max_group_size": 2})
    h.restart()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, 2) is E.REBALANCE_IN_PROGRESS


def test_rebalance_in_flight_is_lost_on_restart(h):
    leader, follower = h.stable_group(2)
    h.join(leader)  # PreparingRebalance in memory only
    h.restart()
    assert h.group().state is GroupState.STABLE and h.group().generation == 2


def test_empty_group_record_is_loaded_as_empty(h):
    leader = h.stable_group(1)[0]
    h.leave(leader)
    h.restart()
    group = h.group()
    assert group.state is GroupState.EMPTY and group.generation == 2 and not group.members
    assert group.protocol_type == "consumer" and group.protocol_name is None
