"""DescribeGroups, ListGroups, DeleteGroups (GroupCoordinator.handleDescribeGroup, handleListGroups, handleDeleteGroups)."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.state import GroupState
from odradek.offsets.records import GroupKey, OffsetKey, OffsetValue
from tests.unit.coordinator_harness import DEFAULT_PROTOCOLS, GROUP, E, Harness


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path)


def commit(h: Harness, group: str, topic: str, partition: int, offset: int) -> None:
    """What an accepted OffsetCommit leaves behind (records + the group in the cache)."""
    value = OffsetValue(offset=offset, commit_timestamp=h.clock.now_ms())
    assert h.shard.write([(OffsetKey(group, topic, partition), value)]).result() is None
    h.shard.get_or_create_group(group)


# --- DescribeGroups ----------------------------------------------------------------------------


def test_describe_unknown_group_is_dead_without_error(h):
    d = h.describe("nope")
    assert (d.error, d.state, d.protocol_type, d.protocol, d.members) == (E.NONE, "Dead", "", "", [])


def test_describe_stable_group_has_protocol_metadata_and_assignments(h):
    leader, follower = h.stable_group(2)
    d = h.describe()
    assert (d.error, d.state, d.protocol_type, d.protocol) == (E.NONE, "Stable", "consumer", "range")
    by_id = {m.member_id: m for m in d.members}
    assert set(by_id) == {leader, follower}
    m = by_id[follower]
    assert (m.client_id, m.client_host, m.group_instance_id) == ("client", "/127.0.0.1", None)
    assert m.metadata == DEFAULT_PROTOCOLS[0][1] and m.assignment == follower.encode()


def test_describe_rebalancing_group_lists_members_without_metadata(h):
    leader, follower = h.stable_group(2)
    h.join(leader)
    d = h.describe()
    assert d.state == "PreparingRebalance" and d.protocol == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in d.members)
    assert len(d.members) == 2


def test_describe_allows_the_empty_group_id(h):
    assert h.describe("").error is E.NONE


def test_describe_simple_group(h):
    commit(h, "simple", "t", 0, 5)
    d = h.describe("simple")
    assert (d.state, d.protocol_type, d.protocol, d.members) == ("Empty", "", "", [])


# --- ListGroups -----------------------------------------------------------------------------------


def test_list_shows_every_group_including_simple_ones(h):
    h.stable_group(1)
    commit(h, "simple", "t", 0, 1)
    error, groups = h.list()
    assert error is E.NONE
    assert {(g.group_id, g.protocol_type, g.state, g.group_type) for g in groups} == {
        (GROUP, "consumer", "Stable", "classic"), ("simple", "", "Empty", "classic")}


def test_list_filters_by_state_case_insensitively(h):
    h.stable_group(1)
    commit(h, "simple", "t", 0, 1)
    assert [g.group_id for g in h.list(states=["stable"])[1]] == [GROUP]
    assert [g.group_id for g in h.list(states=["EMPTY", "Dead"])[1]] == ["simple"]
    assert h.list(states=["NoSuchState"])[1] == []


def test_list_filters_by_type(h):
    h.stable_group(1)
    assert len(h.list(types=["Classic"])[1]) == 1
    assert h.list(types=["consumer"])[1] == []  # KIP-848 groups: none here


# --- DeleteGroups ----------------------------------------------------------------------------------


def test_delete_unknown_and_non_empty_groups(h):
    h.stable_group(1)
    assert h.delete("nope", GROUP) == {"nope": E.GROUP_ID_NOT_FOUND, GROUP: E.NON_EMPTY_GROUP}


def test_delete_empty_group_tombstones_offsets_and_group_record(h):
    leader = h.stable_group(1)[0]
    commit(h, GROUP, "t", 0, 10)
    commit(h, GROUP, "t", 1, 11)
    commit(h, "other", "t", 0, 3)
    h.leave(leader)
    end = h.log.log_end_offset
    assert h.delete(GROUP, GROUP) == {GROUP: E.NONE}
    assert GROUP not in h.shard.groups and GROUP not in h.shard.offsets
    assert GROUP not in h.shard.group_records
    assert h.log.log_end_offset == end + 3  # two offset tombstones + the group tombstone, one batch
    h.restart()
    assert GROUP not in h.shard.groups and "other" in h.shard.groups
    assert h.describe().state == "Dead"


def test_delete_simple_group_writes_no_group_tombstone(h):
    commit(h, "simple", "t", 0, 1)
    end = h.log.log_end_offset
    assert h.delete("simple") == {"simple": E.NONE}
    assert h.log.log_end_offset == end + 1
    assert "simple" not in h.shard.offsets


def test_delete_group_without_records_writes_nothing(h):
    h.join()  # MEMBER_ID_REQUIRED: an Empty group exists only in memory
    assert h.group().state is GroupState.EMPTY
    end = h.log.log_end_offset
    assert h.delete(GROUP) == {GROUP: E.NONE}
    assert h.log.log_end_offset == end and GROUP not in h.shard.groups


def test_deleted_group_can_be_recreated(h):
    leader = h.stable_group(1)[0]
    h.leave(leader)
    h.delete(GROUP)
    ids = h.stable_group(1)
    assert h.group().generation == 1 and ids
    assert h.shard.group_records[GROUP].generation == 1


def test_failed_delete_keeps_the_group(h, monkeypatch):
    from odradek.broker.runtime.promise import Promise

    leader = h.stable_group(1)[0]
    h.leave(leader)
    monkeypatch.setattr(h.shard, "write", lambda records, now=None: Promise.resolved(E.KAFKA_STORAGE_ERROR))
    assert h.delete(GROUP) == {GROUP: E.NOT_COORDINATOR}
    assert h.group().state is GroupState.EMPTY and GroupKey(GROUP).group in h.shard.group_records
