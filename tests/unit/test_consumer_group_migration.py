"""Online migration of a non-empty group between the protocols (KIP-848), on the broker clock:
a consumer-protocol member joining a classic group with members converts it to a consumer group
whose classic members keep JoinGroup/SyncGroup/Heartbeat; the last consumer-protocol member
leaving converts it back; the records replay to the same state; the migration policy decides."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.consumer_group import MemberState
from odradek.broker.runtime.runtime import ShardStatus, StagedWriteFailed
from odradek.offsets.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from odradek.protocol.errors import ErrorCode
from tests.unit.consumer_harness import ConsumerHarness

E = ErrorCode
G = "g"


def sub(*topics: str, owned: list[TopicPartitions] | None = None) -> bytes:
    return encode_subscription(Subscription(version=1, topics=list(topics), owned_partitions=owned or []))


PROTOCOLS = [("range", sub("t"))]


def classic_group(h: ConsumerHarness, n: int = 2) -> tuple[list[str], int]:
    """``n`` classic members of G, Stable, partitions of t (4) split by the leader."""
    parked = [h.join_new(group=G, protocols=PROTOCOLS)]
    h.advance(0)
    if n > 1:
        others = [h.join_new(group=G, protocols=PROTOCOLS) for _ in range(n - 1)]
        parked = [h.join(parked[0].result().member_id, group=G, protocols=PROTOCOLS)] + others
    results = [p.result() for p in parked]
    ids = [r.member_id for r in results]
    generation = results[0].generation
    split = {m: encode_assignment(Assignment(version=1, assigned_partitions=[
        TopicPartitions("t", [p for p in range(4) if p % n == i])])) for i, m in enumerate(ids)}
    h.sync(results[0].leader, generation, split, group=G).result()
    for m in ids:
        if m != results[0].leader:
            h.sync(m, generation, group=G).result()
    return ids, generation


def replayed_equals_live(h: ConsumerHarness) -> None:
    live_consumer, live_records = h.shard.consumer_view(), h.shard.persisted_view()
    h.restart()
    assert h.shard.consumer_view() == live_consumer
    assert h.shard.persisted_view() == live_records


def test_a_consumer_member_upgrades_a_classic_group_and_the_classic_members_are_served(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), generation = classic_group(h)
    r = h.subscribe("c1", ["t"], group=G)
    assert r.error is E.NONE
    group = h.cg(G)
    assert G not in h.shard.groups and G not in h.shard.group_records
    assert {m.member_id: m.classic is not None for m in group.members.values()} == {a: True, b: True, "c1": False}
    assert group.group_epoch == generation + 1  # the conversion at the generation, the newcomer bumps it
    # the classic members still hold their partitions: the newcomer waits for them
    assert r.assignment in ({}, None) or not any(r.assignment.values())
    # a classic member's heartbeat says rejoin; its JoinGroup (owning nothing: eager) is answered at once
    assert h.heartbeat(a, generation, group=G) is E.REBALANCE_IN_PROGRESS
    joined = h.join(a, group=G, protocols=PROTOCOLS).result()
    assert (joined.error, joined.generation, joined.protocol_type, joined.protocol_name, joined.leader,
            joined.members) == (E.NONE, group.group_epoch, "consumer", "range", "", [])
    synced = h.sync(a, joined.generation, group=G, protocol_type="consumer", protocol_name="range").result()
    assert synced.error is E.NONE
    got = decode_assignment(synced.assignment)
    assert got.assigned_partitions and got.assigned_partitions[0].topic == "t"
    assert h.heartbeat(a, joined.generation, group=G) is E.NONE
    assert h.heartbeat(a, joined.generation - 1, group=G) is E.ILLEGAL_GENERATION
    assert h.heartbeat("c1", 1, group=G) is E.UNKNOWN_MEMBER_ID  # a consumer-protocol member
    replayed_equals_live(h)


def test_records_of_the_upgrade_are_kafkas_order(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    classic_group(h)
    batches: list[list] = []
    write = h.shard.write

    def spy(records, *args, **kw):
        batches.append(list(records))
        return write(records, *args, **kw)
    h.shard.write = spy
    h.subscribe("c1", ["t"], group=G)
    # one batch: the conversion, then the newcomer's heartbeat (Kafka's one operation)
    kinds = [type(k).__name__ + ("-" if v is None else "") for k, v in batches[0]][:10]
    assert len(batches) == 1 and kinds == ["GroupKey-", "CGMemberKey", "CGMemberKey", "CGPartitionMetadataKey", "CGMetadataKey",
                     "CGTargetMemberKey", "CGTargetMemberKey", "CGTargetMetadataKey", "CGAssignmentKey",
                     "CGAssignmentKey"]


def test_the_last_consumer_member_leaving_downgrades_the_group(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), _generation = classic_group(h)
    r = h.subscribe("c1", ["t"], group=G)
    assert r.error is E.NONE
    epoch = h.cg(G).group_epoch
    res = h.hb("c1", -1, group=G)
    assert res.error is E.NONE and res.member_epoch == -1
    assert G not in h.shard.consumer_groups
    classic = h.shard.groups[G]
    assert classic.protocol_type == "consumer" and set(classic.members) == {a, b}
    assert classic.generation == epoch and classic.state.value == "PreparingRebalance"
    record = h.shard.group_records[G]
    assert record.generation == epoch and {m.member_id for m in record.members} == {a, b}
    # the classic members rejoin the classic group as usual
    assert h.heartbeat(a, epoch, group=G) is E.REBALANCE_IN_PROGRESS
    replayed_equals_live(h)


def test_policy_disabled_refuses_both_ways(tmp_path):
    h = ConsumerHarness(tmp_path, consumer_migration_policy="disabled")
    h.topic("t", 4)
    classic_group(h)
    assert h.subscribe("c1", ["t"], group=G).error is E.GROUP_ID_NOT_FOUND
    h2 = ConsumerHarness(tmp_path / "2", consumer_migration_policy="disabled")
    h2.topic("t", 4)
    assert h2.subscribe("c1", ["t"], group=G).error is E.NONE
    assert h2.join("", group=G, protocols=PROTOCOLS).result().error is E.INCONSISTENT_GROUP_PROTOCOL


def test_upgrade_only_keeps_the_consumer_group_when_consumer_members_leave(tmp_path):
    h = ConsumerHarness(tmp_path, consumer_migration_policy="upgrade")
    h.topic("t", 4)
    classic_group(h)
    h.subscribe("c1", ["t"], group=G)
    assert h.hb("c1", -1, group=G).error is E.NONE
    assert G in h.shard.consumer_groups and G not in h.shard.groups


def test_a_custom_assignors_user_data_refuses_the_upgrade(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    ids, generation = classic_group(h, 1)
    group = h.shard.groups[G]
    group.members[ids[0]].assignment = encode_assignment(Assignment(
        version=1, assigned_partitions=[TopicPartitions("t", [0])], user_data=b"sticky"))
    r = h.subscribe("c1", ["t"], group=G)
    assert r.error is E.GROUP_ID_NOT_FOUND
    assert G in h.shard.groups and G not in h.shard.consumer_groups


def test_a_classic_member_that_never_syncs_is_fenced_and_the_group_goes_back(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), _generation = classic_group(h)
    h.subscribe("c1", ["t"], group=G, rebalance_timeout=30_000)
    joined = h.join(a, group=G, protocols=PROTOCOLS, rebalance=5_000).result()
    assert joined.error is E.NONE
    h.advance(5_001)  # no SyncGroup within its rebalance timeout
    assert a not in h.cg(G).members
    assert h.cg(G).members[b].state == MemberState.STABLE


def test_after_a_restart_classic_members_keep_their_own_session_timeout(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), _generation = classic_group(h)  # JoinGroup session timeout: 10 s
    h.subscribe("c1", ["t"], group=G)
    h.restart()
    assert {m.member_id for m in h.cg(G).members.values() if m.classic is not None} == {a, b}
    h.advance(9_000)
    assert h.hb("c1", h.cg(G).members["c1"].member_epoch, group=G).error is E.NONE
    h.advance(2_000)  # past the classic members' 10 s, well inside the consumer member's 45 s
    assert set(h.cg(G).members) == {"c1"}


def test_a_classic_member_joining_a_consumer_group_gets_partitions_only_once_released(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    r = h.subscribe("c1", ["t"], group=G)
    owned = dict(r.assignment)
    assert sum(len(ps) for ps in owned.values()) == 4
    first = h.join("", group=G, protocols=PROTOCOLS).result()
    assert first.error is E.MEMBER_ID_REQUIRED
    joined = h.join(first.member_id, group=G, protocols=PROTOCOLS).result()
    assert joined.error is E.NONE
    synced = h.sync(first.member_id, joined.generation, group=G).result()
    assert decode_assignment(synced.assignment).assigned_partitions == []  # c1 still holds all four
    assert h.heartbeat(first.member_id, joined.generation, group=G) is E.NONE  # nothing free yet
    r = h.hb("c1", r.member_epoch, group=G, owned=owned)  # told to give two up
    kept = dict(r.assignment)
    assert sum(len(ps) for ps in kept.values()) == 2
    h.hb("c1", r.member_epoch, group=G, owned=kept)  # released
    assert h.heartbeat(first.member_id, joined.generation, group=G) is E.REBALANCE_IN_PROGRESS
    again = h.join(first.member_id, group=G, protocols=PROTOCOLS).result()
    synced = h.sync(first.member_id, again.generation, group=G).result()
    [tp] = decode_assignment(synced.assignment).assigned_partitions
    assert tp.topic == "t" and len(tp.partitions) == 2
    assert h.heartbeat(first.member_id, again.generation, group=G) is E.NONE


def test_a_full_classic_group_refuses_the_newcomer_and_stays_classic(tmp_path):
    h = ConsumerHarness(tmp_path, consumer_max_size=2)
    h.topic("t", 4)
    classic_group(h)
    assert h.subscribe("c1", ["t"], group=G).error is E.GROUP_MAX_SIZE_REACHED
    assert G in h.shard.groups and G not in h.shard.consumer_groups


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_without_a_rebalance(tmp_path):
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), _generation = classic_group(h)
    r = h.subscribe("c1", ["t"], group=G, instance_id="i1")
    assert r.error is E.NONE
    epoch = h.cg(G).group_epoch
    left = h.hb("c1", -2, group=G, instance_id="i1")  # the static member stops (epoch -2)
    assert left.error is E.NONE and G in h.shard.consumer_groups
    joined = h.join("", group=G, instance="i1", protocols=PROTOCOLS).result()  # back with the classic protocol
    assert joined.error is E.NONE
    classic = h.shard.groups[G]
    assert G not in h.shard.consumer_groups and classic.state.value == "Stable"
    assert set(classic.members) == {a, b, joined.member_id} and classic.generation == epoch
    synced = h.sync(joined.member_id, classic.generation, group=G, instance="i1").result()
    assert synced.error is E.NONE
    assert decode_assignment(synced.assignment).assigned_partitions  # c1's target, now its own
    replayed_equals_live(h)


# --- a conversion is all or nothing (Kafka's runtime drops a failed operation's records and state) ---


def static_classic_group(h: ConsumerHarness) -> tuple[str, int]:
    """One static classic member (instance ``i1``) of G, Stable, owning t-0..3."""
    parked = h.join("", group=G, instance="i1", protocols=PROTOCOLS)
    h.advance(0)
    joined = parked.result()
    assert joined.error is E.NONE
    everything = encode_assignment(Assignment(version=1, assigned_partitions=[TopicPartitions("t", [0, 1, 2, 3])]))
    assert h.sync(joined.member_id, joined.generation, {joined.member_id: everything}, group=G,
                  instance="i1").result().error is E.NONE
    return joined.member_id, joined.generation


def classic_snapshot(h: ConsumerHarness) -> tuple:
    """What a classic group G is, live and persisted."""
    group = h.shard.groups[G]
    return (group.state, group.generation, group.protocol_name, set(group.members),
            {m: bytes(group.members[m].assignment or b"") for m in group.members}, h.shard.group_records[G])


def test_a_heartbeat_refused_after_the_conversion_leaves_the_group_classic(tmp_path):
    """``convertToConsumerGroup`` then UNRELEASED_INSTANCE_ID: the operation fails whole -- no record
    is written and the classic group stays as it was, in memory and after a restart."""
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    member, generation = static_classic_group(h)
    before, end = classic_snapshot(h), h.log.log_end_offset
    r = h.subscribe("c1", ["t"], group=G, instance_id="i1")
    assert r.error is E.UNRELEASED_INSTANCE_ID
    assert G not in h.shard.consumer_groups and classic_snapshot(h) == before
    assert h.log.log_end_offset == end  # nothing of the conversion reached the log
    assert h.heartbeat(member, generation, group=G, instance="i1") is E.NONE  # still served as before
    assert h.shard.groups[G].members[member].heartbeat_timer is not None  # its session still runs
    h.restart()
    assert G not in h.shard.consumer_groups and h.shard.group_records[G] == before[-1]
    assert h.shard.groups[G].generation == generation and set(h.shard.groups[G].members) == {member}


def test_a_failed_append_of_the_conversion_leaves_the_group_classic(tmp_path):
    """The log refuses the conversion's batch: NOT_COORDINATOR (Kafka's answer to a storage error),
    the classic group unchanged and still served; the log and a restart agree."""
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), generation = classic_group(h)
    before, end = classic_snapshot(h), h.log.log_end_offset
    append = h.log.append_records

    def broken(*args, **kw):
        raise OSError("disk full")
    h.log.append_records = broken
    r = h.subscribe("c1", ["t"], group=G)
    h.log.append_records = append
    assert r.error is E.NOT_COORDINATOR
    assert G not in h.shard.consumer_groups and classic_snapshot(h) == before
    assert h.log.log_end_offset == end
    assert h.heartbeat(a, generation, group=G) is E.NONE and h.heartbeat(b, generation, group=G) is E.NONE
    h.restart()
    assert G not in h.shard.consumer_groups and h.shard.group_records[G] == before[-1]
    # the disk is back: the next consumer heartbeat converts the group as usual
    assert h.subscribe("c1", ["t"], group=G).error is E.NONE
    assert set(h.cg(G).members) == {a, b, "c1"}
    replayed_equals_live(h)


def test_a_failed_append_of_the_downgrade_leaves_the_consumer_group(tmp_path):
    """The last consumer-protocol member leaves but the log refuses the downgrade's batch: the
    leave answers NOT_COORDINATOR and the consumer group stays, its classic members' sessions
    running; a restart agrees."""
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), _generation = classic_group(h)
    assert h.subscribe("c1", ["t"], group=G).error is E.NONE
    before = h.shard.consumer_view()
    append = h.log.append_records

    def broken(*args, **kw):
        raise OSError("disk full")
    h.log.append_records = broken
    res = h.hb("c1", -1, group=G)
    h.log.append_records = append
    assert res.error is E.NOT_COORDINATOR
    assert G not in h.shard.groups and h.shard.consumer_view() == before
    assert all(m.session_timer is not None for m in h.cg(G).members.values())
    replayed_equals_live(h)


def test_a_staged_conversion_whose_append_fails_fails_the_shard_and_the_log_keeps_the_classic_group(tmp_path):
    """Inside a server turn the conversion is staged and applied at once; when the turn's append
    then fails, the shard goes Failed (NOT_COORDINATOR, its connections closed unanswered by the
    server) and is reloaded from its log: the classic group, as before the heartbeat."""
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), generation = classic_group(h)
    before = classic_snapshot(h)
    runtime = h.shard.writer.runtime
    runtime.begin()
    h.subscribe("c1", ["t"], group=G)
    assert G in h.shard.consumer_groups  # staged: applied, its answer held until the append
    append = h.log.append_records

    def broken(*args, **kw):
        raise OSError("disk full")
    h.log.append_records = broken
    with pytest.raises(StagedWriteFailed):
        runtime.end()
    h.log.append_records = append
    assert h.shard.status is ShardStatus.FAILED
    assert h.hb("c1", generation + 1, group=G).error is E.NOT_COORDINATOR
    h.restart()
    assert G not in h.shard.consumer_groups and classic_snapshot(h)[-1] == before[-1]
    assert set(h.shard.groups[G].members) == {a, b} and h.shard.groups[G].generation == generation


def test_the_upgrade_answers_parked_joins_once_applied_and_not_when_refused(tmp_path):
    """A classic group rebalancing (a member's JoinGroup parked): a refused conversion leaves the
    JoinGroup parked in the classic group; an applied one answers it REBALANCE_IN_PROGRESS."""
    h = ConsumerHarness(tmp_path)
    h.topic("t", 4)
    (a, b), generation = classic_group(h)
    parked = h.join(a, group=G, protocols=PROTOCOLS)  # a rejoins: PreparingRebalance, waiting for b
    assert not parked.done and h.shard.groups[G].state.value == "PreparingRebalance"
    append = h.log.append_records

    def broken(*args, **kw):
        raise OSError("disk full")
    h.log.append_records = broken
    assert h.subscribe("c1", ["t"], group=G).error is E.NOT_COORDINATOR
    h.log.append_records = append
    assert not parked.done and h.shard.groups[G].state.value == "PreparingRebalance"
    assert h.subscribe("c1", ["t"], group=G).error is E.NONE
    assert parked.done and parked.result().error is E.REBALANCE_IN_PROGRESS
    assert G not in h.shard.groups and set(h.cg(G).members) == {a, b, "c1"}
    replayed_equals_live(h)
