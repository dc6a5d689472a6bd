"""ConsumerGroupHeartbeat on the broker clock: join, epochs, reconciliation, leave, timers, errors,
and a reload that rebuilds the same group (Kafka's ``GroupMetadataManagerTest`` cases)."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.consumer_group import ASSIGNING, EMPTY, RECONCILING, STABLE, MemberState
from odradek.broker.coordinator.consumer_heartbeat import HeartbeatRequest, consumer_heartbeat
from tests.unit.consumer_harness import GROUP, ConsumerHarness, E, owned_twice


@pytest.fixture
def h(tmp_path):
    harness = ConsumerHarness(tmp_path)
    harness.topic("t", 4)
    return harness


def parts(result, h, topic="t") -> set[int]:
    tid = h.topic_table[topic][0]
    return set((result.assignment or {}).get(tid, ()))


def test_first_member_gets_every_partition_at_epoch_1(h):
    r = h.subscribe("a", ["t"])
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (E.NONE, "a", 1, 5000)
    assert parts(r, h) == {0, 1, 2, 3}
    g = h.cg()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, STABLE)


def test_second_member_waits_until_the_first_revokes(h):
    """The fact sheet's example: no partition is ever owned by two members."""
    tid = h.topic_table["t"][0]
    h.subscribe("a", ["t"])
    r = h.subscribe("b", ["t"])
    assert (r.member_epoch, parts(r, h)) == (2, set())  # its partitions are still a's
    g = h.cg()
    assert g.members["b"].state == MemberState.UNRELEASED_PARTITIONS
    assert g.state == RECONCILING
    r = h.hb("a", 1, owned={tid: frozenset({0, 1, 2, 3})})
    assert r.member_epoch == 1 and len(parts(r, h)) == 2  # revoke first, at the old epoch
    assert g.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert owned_twice(g) == []
    kept = frozenset(parts(r, h))
    r = h.hb("b", 2)
    assert parts(r, h) == set()  # still held by a
    r = h.hb("a", 1, owned={tid: kept})
    assert (r.member_epoch, r.assignment) == (2, None)
    r = h.hb("b", 2)
    assert parts(r, h) == {0, 1, 2, 3} - kept
    assert h.cg().state == STABLE and owned_twice(h.cg()) == []


def test_leave_fences_and_bumps_the_epoch(h):
    h.subscribe("a", ["t"])
    h.subscribe("b", ["t"])
    r = h.hb("b", -1)
    assert (r.error, r.member_id, r.member_epoch) == (E.NONE, "b", -1)
    g = h.cg()
    assert "b" not in g.members and g.group_epoch == 3 and g.state == ASSIGNING
    r = h.hb("a", 1)
    assert (r.member_epoch, r.assignment) == (3, None)  # it kept all four: nothing to send
    assert h.cg().state == STABLE


def test_last_member_leaving_leaves_an_empty_group(h):
    h.subscribe("a", ["t"])
    h.hb("a", -1)
    assert h.cg().state == EMPTY


@pytest.mark.parametrize("kw, error", [
    ({"member_id": "", "epoch": 0}, E.INVALID_REQUEST),  # v1: the client makes the id
    ({"member_id": "  ", "epoch": 0}, E.INVALID_REQUEST),
    ({"member_id": "x", "epoch": -3}, E.INVALID_REQUEST),
    ({"member_id": "x", "epoch": -2}, E.INVALID_REQUEST),  # static leave without an instance id
    ({"member_id": "x", "epoch": 0, "rebalance_timeout": -1}, E.INVALID_REQUEST),
    ({"member_id": "x", "epoch": 0, "topics": None}, E.INVALID_REQUEST),
    ({"member_id": "x", "epoch": 0, "owned": None}, E.INVALID_REQUEST),  # present and empty on a join
    ({"member_id": "x", "epoch": 0, "owned": {"t": frozenset({0})}}, E.INVALID_REQUEST),
    ({"member_id": "x", "epoch": 0, "server_assignor": "sticky"}, E.UNSUPPORTED_ASSIGNOR),
    ({"member_id": "x", "epoch": 0, "subscribed_topic_regex": "("}, E.INVALID_REGULAR_EXPRESSION),
    ({"member_id": "x", "epoch": 0, "subscribed_topic_regex": "(a)\\1"}, E.INVALID_REGULAR_EXPRESSION),
    ({"member_id": "x", "epoch": 0, "subscribed_topic_regex": "(?=a)b"}, E.INVALID_REGULAR_EXPRESSION),
    ({"member_id": "x", "epoch": 0, "subscribed_topic_regex": "a*+"}, E.INVALID_REGULAR_EXPRESSION),
    ({"member_id": "x", "epoch": 0, "subscribed_topic_regex": "a" * 10_000}, E.INVALID_REGULAR_EXPRESSION),
    ({"member_id": "x", "epoch": 0, "instance_id": ""}, E.INVALID_REQUEST),
    ({"member_id": "x", "epoch": 5}, E.GROUP_ID_NOT_FOUND),  # no such group
    ({"member_id": "x", "epoch": -1}, E.GROUP_ID_NOT_FOUND),
])
def test_malformed_or_misplaced_heartbeats_get_kafkas_error(h, kw, error):
    member, epoch = kw.pop("member_id"), kw.pop("epoch")
    kw.setdefault("topics", ["t"])
    kw.setdefault("rebalance_timeout", 30_000)
    kw.setdefault("owned", {} if epoch == 0 else None)
    r = h.hb(member, epoch, **kw)
    assert r.error == error and r.member_id is None
    assert GROUP not in h.shard.consumer_groups


def test_epoch_checks(h):
    tid = h.topic_table["t"][0]
    h.subscribe("a", ["t"])
    assert h.hb("a", 2).error == E.FENCED_MEMBER_EPOCH  # ahead of the server
    assert h.hb("zz", 1).error == E.UNKNOWN_MEMBER_ID
    h.subscribe("b", ["t"])  # epoch 2
    h.hb("a", 1, owned={tid: frozenset({0, 1, 2, 3})})
    a = h.cg().members["a"]
    h.hb("a", 1, owned={tid: a.assigned[tid]})  # a reaches epoch 2, previous 1
    assert h.cg().members["a"].member_epoch == 2
    # a lost answer: the previous epoch with owned partitions within the assignment passes
    assert h.hb("a", 1, owned={tid: a.assigned[tid]}).error == E.NONE
    assert h.hb("a", 1, owned={tid: frozenset({0, 1, 2, 3})}).error == E.FENCED_MEMBER_EPOCH
    assert h.hb("a", 0, topics=["t"], rebalance_timeout=1000, owned={}).error == E.NONE  # 4.2: a rejoin


def test_group_max_size(tmp_path):
    h = ConsumerHarness(tmp_path, consumer_max_size=1)
    h.topic("t", 1)
    h.subscribe("a", ["t"])
    assert h.subscribe("b", ["t"]).error == E.GROUP_MAX_SIZE_REACHED
    assert h.hb("a", 1).error == E.NONE


def test_disabled_protocol_answers_unsupported_version(tmp_path):
    h = ConsumerHarness(tmp_path, consumer_protocol=False)
    assert h.subscribe("a", ["t"]).error == E.UNSUPPORTED_VERSION


def test_session_timeout_fences_on_the_broker_clock(h):
    h.subscribe("a", ["t"])
    h.subscribe("b", ["t"])
    h.advance(30_000)
    h.hb("a", 1, owned=None)
    h.advance(20_000)  # b silent for 50 s > 45 s; a heard 20 s ago
    g = h.cg()
    assert set(g.members) == {"a"} and g.group_epoch == 3


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(h):
    tid = h.topic_table["t"][0]
    h.subscribe("a", ["t"], rebalance_timeout=5_000)
    h.subscribe("b", ["t"])
    h.hb("a", 1, owned={tid: frozenset({0, 1, 2, 3})})  # asked to revoke
    h.hb("b", 2)
    h.advance(4_000)
    assert "a" in h.cg().members
    h.hb("b", 2)
    h.advance(2_000)
    assert "a" not in h.cg().members


def test_static_member_leaves_temporarily_and_comes_back_without_a_rebalance(h):
    h.subscribe("a", ["t"], instance_id="i1")
    r = h.hb("a", -2, instance_id="i1")
    assert (r.error, r.member_epoch) == (E.NONE, -2)
    g = h.cg()
    epoch = g.group_epoch
    r = h.subscribe("a2", ["t"], instance_id="i1")
    assert (r.error, r.member_epoch, parts(r, h)) == (E.NONE, epoch, {0, 1, 2, 3})
    g = h.cg()
    assert g.group_epoch == epoch and set(g.members) == {"a2"} and g.static_members == {"i1": "a2"}


def test_static_instance_in_use(h):
    h.subscribe("a", ["t"], instance_id="i1")
    assert h.subscribe("b", ["t"], instance_id="i1").error == E.UNRELEASED_INSTANCE_ID
    assert h.hb("b", 1, instance_id="i1").error == E.FENCED_INSTANCE_ID
    assert h.hb("b", 1, instance_id="nope").error == E.UNKNOWN_MEMBER_ID


def test_new_partitions_bump_the_epoch(h):
    h.subscribe("a", ["t"])
    h.topic("t", 6)
    r = h.hb("a", 1)
    assert r.member_epoch == 2 and parts(r, h) == set(range(6))


def test_a_pathological_regex_does_not_stall_the_broker(h):
    """RE2 matches in linear time: a pattern that backtracks exponentially in Python's ``re``
    resolves at once against a long topic name."""
    h.topic("a" * 240 + "c", 1)
    r = h.subscribe("a", [], subscribed_topic_regex="(a+)+b")
    assert r.error == E.NONE and r.assignment == {}


def test_regex_subscription_picks_up_a_topic_created_later(h):
    r = h.subscribe("a", [], subscribed_topic_regex="t.*")
    assert parts(r, h) == {0, 1, 2, 3}
    h.topic("tx", 2)
    r = h.hb("a", 1)
    assert parts(r, h, "tx") == {0, 1}
    h.topic("other", 2)
    assert h.hb("a", r.member_epoch).assignment is None


def test_reload_rebuilds_the_same_groups_and_rearms_the_session(h):
    tid = h.topic_table["t"][0]
    h.subscribe("a", ["t"])
    h.subscribe("b", ["t"], instance_id="i")
    h.hb("a", 1, owned={tid: frozenset({0, 1, 2, 3})})
    before = h.shard.consumer_view()
    h.restart()
    assert h.shard.consumer_view() == before
    assert owned_twice(h.cg()) == []
    h.advance(46_000)
    assert h.cg().members == {}  # fenced by the timers re-armed at load


def test_empty_classic_group_becomes_a_consumer_group(h):
    """Kafka 4: an empty classic group (its record tombstoned first) turns into a consumer group on
    the first consumer heartbeat; a non-empty one is refused GROUP_ID_NOT_FOUND."""
    classic = "g"
    [member] = h.stable_group(1)
    assert h.subscribe("a", ["t"], group=classic).error == E.GROUP_ID_NOT_FOUND
    h.leave(member, group=classic)
    assert classic in h.shard.group_records
    r = h.subscribe("a", ["t"], group=classic)
    assert r.error == E.NONE and classic not in h.shard.groups and classic not in h.shard.group_records
    h.restart()
    assert classic in h.shard.consumer_groups and classic not in h.shard.groups


# --- the steady path's kept checks (``consumer_heartbeat.Steady``) follow what they were made of ---


def test_a_steady_member_follows_a_lowered_session_timeout(h):
    """The member's Steady keeps its session timeout; a group config change rebuilds it, and the
    session timer armed for the longer timeout is re-armed for the shorter one."""
    h.subscribe("a", ["t"])
    h.hb("a", 1)
    assert h.hb("a", 1).error is E.NONE and h.cg().members["a"].steady is not None  # its Steady (45 s)
    h.shard.group_configs.set_overrides(GROUP, {"consumer_session_timeout_ms": 10_000})
    assert h.hb("a", 1).error is E.NONE
    h.advance(9_000)
    assert h.hb("a", 1).error is E.NONE  # heard: 10 s from now
    h.advance(10_001)
    assert GROUP not in h.shard.consumer_groups or "a" not in h.cg().members


def test_a_steady_answer_is_not_reused_once_the_group_changed(h):
    """A record of the group (a newcomer bumps the epoch) invalidates every member's Steady: the
    steady member's next heartbeat is answered by the general path (revoke), not from the cache."""
    tid = h.topic_table["t"][0]
    h.subscribe("a", ["t"])
    h.hb("a", 1)  # the group's first look at the topics' version
    steady = h.hb("a", 1)
    assert (steady.error, steady.member_epoch, steady.assignment) == (E.NONE, 1, None)
    assert h.cg().members["a"].steady is not None
    h.subscribe("b", ["t"])
    r = h.hb("a", 1)
    assert r.error is E.NONE and r.assignment is not None and len(r.assignment[tid]) == 2  # asked to revoke two
    assert h.cg().members["a"].state == MemberState.UNREVOKED_PARTITIONS


def test_a_steady_member_heard_from_another_client_goes_the_general_way(h):
    """The client id is part of what a Steady matches: a heartbeat from another client id writes
    the member's record, as Kafka does, rather than taking the kept answer."""
    h.subscribe("a", ["t"])
    assert h.hb("a", 1).error is E.NONE
    before = h.log.log_end_offset
    req = HeartbeatRequest(group_id=GROUP, member_id="a", member_epoch=1, client_id="other", client_host="/127.0.0.1")
    r = consumer_heartbeat(h.coordinator, h.coordinator.topics, req).result()
    assert (r.error, r.member_epoch) == (E.NONE, 1)
    assert h.log.log_end_offset == before + 1 and h.cg().members["a"].meta.client_id == "other"
