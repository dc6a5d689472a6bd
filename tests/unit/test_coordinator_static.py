"""Static membership (KIP-345): instance ids, fencing, rejoining without a rebalance."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.api import LeaveMember
from odradek.broker.coordinator.state import GroupState
from odradek.broker.runtime.promise import Promise
from tests.unit.coordinator_harness import GROUP, E, Harness, ok


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path)


def static_group(h: Harness, *instances: str, **kw) -> dict[str, str]:
    """A Stable group of static members; returns instance id -> member id (leader first)."""
    first = h.join(instance=instances[0], **kw)
    h.advance(0)
    lead = ok(first.result()).member_id
    parked = [h.join(instance=i, **kw) for i in instances[1:]]
    if parked:
        first = h.join(lead, instance=instances[0], **kw)
    results = [ok(p.result()) for p in [first, *parked]]
    ids = {i: r.member_id for i, r in zip(instances, results, strict=True)}
    ok(h.sync(results[0].leader, results[0].generation, {m: m.encode() for m in ids.values()}).result())
    assert h.group().state is GroupState.STABLE
    return ids


def test_static_member_ids_start_with_the_instance_id(h):
    ids = static_group(h, "a", "b")
    assert ids["a"].startswith("a-") and ids["b"].startswith("b-")
    assert h.group().static_members == {"a": ids["a"], "b": ids["b"]}


def test_requests_from_a_fenced_member_id(h):
    ids = static_group(h, "a", "b")
    assert h.heartbeat("a-old", 2, instance="a") is E.FENCED_INSTANCE_ID
    assert h.sync("a-old", 2, instance="a").result().error is E.FENCED_INSTANCE_ID
    assert h.join("a-old", instance="a").result().error is E.FENCED_INSTANCE_ID
    assert h.leave(LeaveMember("a-old", "a")).members[0][1] is E.FENCED_INSTANCE_ID
    assert h.heartbeat(ids["a"], 2, instance="zzz") is E.UNKNOWN_MEMBER_ID  # unknown instance
    assert h.heartbeat(ids["a"], 2, instance="a") is E.NONE


def test_rejoin_in_stable_without_protocol_change_skips_the_rebalance(h):
    ids = static_group(h, "a", "b")
    leader = ids["a"]
    result = ok(h.join(instance="b").result())  # b restarted: no member id
    group = h.group()
    assert group.state is GroupState.STABLE and group.generation == 2
    assert result.generation == 2 and result.member_id != ids["b"] and result.members == []
    assert result.leader == leader
    assert group.static_members["b"] == result.member_id and ids["b"] not in group.members
    assert group.members[result.member_id].assignment == ids["b"].encode()  # keeps its assignment
    record = h.shard.group_records[GROUP]  # the group record was rewritten with the new id
    assert {m.member_id for m in record.members} == {leader, result.member_id}
    synced = ok(h.sync(result.member_id, 2, instance="b").result())
    assert synced.assignment == ids["b"].encode()


def test_returning_static_leader_before_v9_is_told_the_old_leader_id(h):
    ids = static_group(h, "a", "b")
    result = ok(h.join(instance="a", version=5).result())
    assert result.leader == ids["a"] != result.member_id  # so it will not reassign
    assert h.group().leader_id == result.member_id and not result.skip_assignment


def test_returning_static_leader_with_v9_skips_assignment(h):
    ids = static_group(h, "a", "b", version=9)
    result = ok(h.join(instance="a", version=9).result())
    assert result.skip_assignment and result.leader == result.member_id
    assert {m for m, _, _ in result.members} == {result.member_id, ids["b"]}
    assert {i for _, i, _ in result.members} == {"a", "b"}
    assert h.group().state is GroupState.STABLE


def test_returning_static_follower_with_v9_does_not_skip(h):
    static_group(h, "a", "b", version=9)
    result = ok(h.join(instance="b", version=9).result())
    assert not result.skip_assignment and result.members == []


def test_rejoin_that_changes_the_selected_protocol_rebalances(h):
    static_group(h, "a", protocols=[("range", b"x"), ("roundrobin", b"x")])
    assert h.group().protocol_name == "range"
    parked = h.join(instance="a", protocols=[("roundrobin", b"x"), ("range", b"x")])
    result = ok(parked.result())  # rebalance; the only member rejoined: it completes at once
    assert result.generation == 2 and result.protocol_name == "roundrobin"


def test_rejoin_fences_a_parked_join_of_the_old_id(h):
    ids = static_group(h, "a", "b")
    old = h.join(ids["b"], instance="b", protocols=[("range", b"changed")])  # parked: rebalance
    assert not old.done
    new = h.join(instance="b")
    fenced = old.result()
    assert fenced.error is E.FENCED_INSTANCE_ID and fenced.member_id == ids["b"]
    assert not new.done  # PreparingRebalance: waits with the others
    h.join(ids["a"], instance="a")
    assert ok(new.result()).generation == 3


def test_rejoin_during_completing_rebalance_fences_parked_sync_and_rebalances(h):
    ids = static_group(h, "a", "b")
    h.join(ids["a"], instance="a")
    h.join(ids["b"], instance="b")
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    parked_sync = h.sync(ids["b"], 3, instance="b")
    assert not parked_sync.done
    h.join(instance="b")
    assert parked_sync.result().error is E.FENCED_INSTANCE_ID
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_static_members_survive_the_rebalance_deadline(h):
    ids = static_group(h, "a", "b", session=60_000)
    parked = h.join(ids["a"], instance="a", session=60_000)
    h.advance(30_000)  # rebalance timeout: b did not rejoin but is static: it stays
    result = ok(parked.result())
    assert ids["b"] in h.group().members
    assert {m for m, _, _ in result.members} == set(ids.values())


def test_static_member_that_never_syncs_is_removed_after_the_sync_deadline(h):
    ids = static_group(h, "a", "b", session=60_000)
    parked = h.join(ids["a"], instance="a", session=60_000)
    h.advance(30_000)
    generation = ok(parked.result()).generation
    h.sync(ids["a"], generation, {})  # the leader syncs; b never does
    assert h.group().state is GroupState.STABLE
    h.advance(30_000)
    assert ids["b"] not in h.group().members
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_leave_by_instance_id(h):
    ids = static_group(h, "a", "b")
    result = h.leave(LeaveMember("", "b"), LeaveMember("", "nope"))
    assert [e for _, e in result.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert ids["b"] not in h.group().members and "b" not in h.group().static_members


def test_failed_record_write_reverts_the_replacement(h, monkeypatch):
    ids = static_group(h, "a", "b")
    monkeypatch.setattr(h.shard, "write",
                        lambda records, now=None: Promise.resolved(E.KAFKA_STORAGE_ERROR))
    result = h.join(instance="b").result()
    assert result.error is E.NOT_COORDINATOR and result.member_id == ""  # 56 -> 16
    group = h.group()
    assert group.static_members["b"] == ids["b"] and ids["b"] in group.members
    assert group.state is GroupState.STABLE


def test_static_member_restart_after_broker_restart(h):
    ids = static_group(h, "a", "b")
    h.restart()
    result = ok(h.join(instance="b").result())
    assert h.group().state is GroupState.STABLE and result.generation == 2
    assert h.group().members[result.member_id].assignment == ids["b"].encode()
