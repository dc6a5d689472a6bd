"""Consumer groups under the other group APIs: OffsetCommit/OffsetFetch member epochs, ListGroups v5,
DescribeGroups, DeleteGroups, OffsetDelete, KIP-211 expiry, and a classic JoinGroup on the id."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.admin import delete_groups, describe_group, list_groups
from odradek.broker.coordinator.consumer_admin import describe_consumer_groups
from odradek.broker.coordinator.offsets import (
    CommitRequest,
    commit_offsets,
    delete_offsets,
    fetch_offsets,
    validate_consumer_fetch,
)
from tests.unit.consumer_harness import GROUP, ConsumerHarness, E


@pytest.fixture
def h(tmp_path):
    harness = ConsumerHarness(tmp_path)
    harness.topic("t", 2)
    harness.topic("u", 1)
    return harness


def count(h):
    return lambda name: h.topic_table[name][1] if name in h.topic_table else None


def commit(h, member: str, epoch: int, version: int = 9, topic: str = "t") -> E:
    req = CommitRequest(GROUP, epoch, member, None, -1, version)
    [error] = commit_offsets(h.coordinator, req, [(topic, 0, 5, -1, "", -1)], count(h)).result()
    return error


def test_offset_commit_checks_the_member_epoch(h):
    h.subscribe("a", ["t"])
    assert commit(h, "a", 1) == E.NONE
    assert commit(h, "a", 0) == E.STALE_MEMBER_EPOCH
    assert commit(h, "a", 2) == E.STALE_MEMBER_EPOCH
    assert commit(h, "b", 1) == E.UNKNOWN_MEMBER_ID
    assert commit(h, "a", 1, version=8) == E.UNSUPPORTED_VERSION
    assert commit(h, "", -1) == E.UNKNOWN_MEMBER_ID  # an admin commit only to a group without members
    h.hb("a", -1)
    assert commit(h, "", -1) == E.NONE
    assert fetch_offsets(h.coordinator, GROUP, [("t", [0])])[1][0].offset == 5


def test_offset_fetch_v9_checks_the_member_epoch(h):
    h.subscribe("a", ["t"])
    assert validate_consumer_fetch(h.coordinator, GROUP, "a", 1) == E.NONE
    assert validate_consumer_fetch(h.coordinator, GROUP, "a", 3) == E.STALE_MEMBER_EPOCH
    assert validate_consumer_fetch(h.coordinator, GROUP, "x", 1) == E.UNKNOWN_MEMBER_ID
    assert validate_consumer_fetch(h.coordinator, "nope", "x", 1) == E.NONE


def test_list_groups_shows_types_and_consumer_states(h):
    h.subscribe("a", ["t"])
    [member] = h.stable_group(1)
    _error, groups = list_groups(h.coordinator)
    kinds = {g.group_id: (g.protocol_type, g.state, g.group_type) for g in groups}
    assert kinds == {GROUP: ("consumer", "Stable", "consumer"), "g": ("consumer", "Stable", "classic")}
    assert [g.group_id for g in list_groups(h.coordinator, types=["consumer"])[1]] == [GROUP]
    assert [g.group_id for g in list_groups(h.coordinator, types=["Classic"])[1]] == ["g"]
    assert list_groups(h.coordinator, types=["share"])[1] == []
    h.subscribe("b", ["t"])  # Reconciling now
    assert [g.group_id for g in list_groups(h.coordinator, states=["reconciling"])[1]] == [GROUP]


def test_describe_apis(h):
    h.subscribe("a", ["t"], instance_id="i")
    assert describe_group(h.coordinator, GROUP).state == "Dead"  # not a classic group
    [d] = describe_consumer_groups(h.coordinator, [GROUP], False)
    assert (d["error_code"], d["group_state"], d["group_epoch"], d["assignor_name"]) == (E.NONE, "Stable", 1, "uniform")
    [m] = d["members"]
    assert (m["member_id"], m["instance_id"], m["member_type"]) == ("a", "i", 1)
    assert m["assignment"]["topic_partitions"][0]["topic_name"] == "t"
    [missing, empty] = describe_consumer_groups(h.coordinator, ["nope", ""], False)
    assert missing["error_code"] == E.GROUP_ID_NOT_FOUND and empty["error_code"] == E.INVALID_GROUP_ID


def test_delete_groups_refuses_members_then_removes_everything(h):
    h.subscribe("a", ["t"])
    commit(h, "a", 1)
    assert delete_groups(h.coordinator, [GROUP]).result() == {GROUP: E.NON_EMPTY_GROUP}
    h.hb("a", -1)
    assert delete_groups(h.coordinator, [GROUP]).result() == {GROUP: E.NONE}
    assert GROUP not in h.shard.consumer_groups and GROUP not in h.shard.offsets
    h.restart()
    assert GROUP not in h.shard.consumer_groups and GROUP not in h.shard.groups


def test_offset_delete_refuses_subscribed_topics_only(h):
    h.subscribe("a", ["t"])
    commit(h, "a", 1, topic="t")
    commit(h, "a", 1, topic="u")
    error, parts = delete_offsets(h.coordinator, GROUP, [("t", [0]), ("u", [0])], count(h)).result()
    assert error == E.NONE and parts == [("t", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("u", 0, E.NONE)]
    assert set(h.shard.offsets[GROUP]) == {("t", 0)}


def test_expiry_drops_unsubscribed_offsets_then_the_empty_group(tmp_path):
    h = ConsumerHarness(tmp_path, offsets_retention_ms=60_000)
    h.topic("t", 1)
    h.topic("u", 1)
    h.subscribe("a", ["t"])
    commit(h, "a", 1, topic="t")
    commit(h, "a", 1, topic="u")
    h.advance(30_000)
    h.hb("a", 1)
    h.advance(31_000)
    h.hb("a", 1)
    h.coordinator.expiry.sweep()
    assert set(h.shard.offsets[GROUP]) == {("t", 0)}  # subscribed: kept whatever its age
    h.hb("a", -1)
    h.coordinator.expiry.sweep()
    assert GROUP not in h.shard.consumer_groups and GROUP not in h.shard.offsets


def test_classic_join_on_a_consumer_group_id(h):
    from tests.unit.coordinator_harness import ok

    h.subscribe("a", ["t"], group="g")
    # a classic joiner of a non-empty consumer group becomes its classic member (online migration):
    # first the MEMBER_ID_REQUIRED round; a protocol type other than consumer is refused
    assert h.join("", group="g").result().error == E.MEMBER_ID_REQUIRED
    assert h.join("", group="g", protocol_type="other").result().error == E.INCONSISTENT_GROUP_PROTOCOL
    commit_req = CommitRequest("g", 1, "a", None, -1, 9)
    commit_offsets(h.coordinator, commit_req, [("t", 0, 7, -1, "", -1)], count(h)).result()
    h.hb("a", -1, group="g")
    [member] = h.stable_group(1)  # the empty consumer group became a classic one
    ok(h.describe())
    assert "g" not in h.shard.consumer_groups and h.group().members.keys() == {member}
    assert fetch_offsets(h.coordinator, "g", [("t", [0])])[1][0].offset == 7  # offsets kept
    h.restart()
    assert "g" not in h.shard.consumer_groups and "g" in h.shard.groups


@pytest.mark.parametrize("overrides, enabled", [
    ({}, True),
    ({"group.coordinator.rebalance.protocols": "classic"}, False),
    ({"odradek.emulate.kafka.version": "3.9"}, False),  # 3.x defaulted to classic only
    ({"odradek.emulate.kafka.version": "3.9", "group.coordinator.rebalance.protocols": "classic,consumer"}, True),
    ({"odradek.emulate.kafka.version": "4.0"}, True),
])
def test_the_consumer_protocol_setting(overrides, enabled):
    from odradek.broker.config import Config
    from odradek.broker.coordinator.config import CoordinatorConfig

    assert CoordinatorConfig.from_config(Config.load(None, overrides=overrides, environ={})).consumer_protocol is enabled


@pytest.mark.parametrize("value", ["consumer", "classic,share", "uniform"])
def test_bad_protocol_settings_fail_at_start(value):
    from odradek.broker.config import Config, ConfigError

    with pytest.raises(ConfigError):
        Config.load(None, overrides={"group.coordinator.rebalance.protocols": value}, environ={})
    if value == "uniform":
        Config.load(None, overrides={"group.consumer.assignors": "range,uniform"}, environ={})
        with pytest.raises(ConfigError):
            Config.load(None, overrides={"group.consumer.assignors": "sticky"}, environ={})


def test_transactional_commit_checks_the_member_epoch(h):
    from odradek.broker.coordinator.txn_offsets import TxnCommitRequest, validate_txn_commit

    h.subscribe("a", ["t"])

    def check(member: str, epoch: int) -> E:
        return validate_txn_commit(h.shard, TxnCommitRequest("tx", GROUP, 1, 0, generation=epoch, member_id=member))
    assert check("a", 1) == E.NONE
    assert check("a", 0) == E.ILLEGAL_GENERATION  # a stale epoch, as a transactional commit reports it
    assert check("b", 1) == E.UNKNOWN_MEMBER_ID


def test_leave_group_removes_consumer_members_like_an_admin(h):
    from odradek.broker.coordinator.api import LeaveMember

    h.subscribe("a", ["t"])
    h.subscribe("b", ["t"], instance_id="ib")
    result = h.leave(LeaveMember("a"), LeaveMember("", "ib"), LeaveMember("zz"), LeaveMember("x", "ib"),
                     group=GROUP)
    assert [e for _m, e in result.members] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID]
    assert h.cg().members == {} and h.cg().group_epoch == 3


@pytest.mark.parametrize("release, served", [("", (0, 1)), ("3.5", None), ("3.9", (0, 0)), ("4.0", (0, 1))])
def test_emulation_hides_the_apis_releases_lacked(release, served):
    from odradek.broker.app import served_apis
    from odradek.broker.config import Config

    apis = served_apis(Config.load(None, overrides={"odradek.emulate.kafka.version": release}, environ={}))
    assert apis.get(68) == served and apis.get(69) == served
