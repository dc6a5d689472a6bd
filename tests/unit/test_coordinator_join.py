"""JoinGroup (Kafka's GroupCoordinator.handleJoinGroup) driven on a ManualClock."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.state import GroupState
from tests.unit.coordinator_harness import (
    DEFAULT_PROTOCOLS,
    GROUP,
    SESSION,
    E,
    Harness,
    ok,
    subscription,
)


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path)


# --- checks before the group is touched ----------------------------------------------------


def test_empty_group_id_is_invalid(h):
    assert h.join(group="").result().error is E.INVALID_GROUP_ID


@pytest.mark.parametrize("session", [5999, 1_800_001])
def test_session_timeout_outside_bounds(h, session):
    result = h.join("someone", session=session).result()
    assert result.error is E.INVALID_SESSION_TIMEOUT
    assert result.member_id == "someone" and result.generation == -1


def test_session_timeout_bounds_are_inclusive(h):
    assert h.join(session=6000).result().error is E.MEMBER_ID_REQUIRED
    assert h.join(session=1_800_000).result().error is E.MEMBER_ID_REQUIRED


def test_known_member_id_for_absent_group_is_unknown(h):
    result = h.join("ghost").result()
    assert result.error is E.UNKNOWN_MEMBER_ID and result.member_id == "ghost"
    assert GROUP not in h.shard.groups


# --- MEMBER_ID_REQUIRED (v4+, KIP-394) ---------------------------------------------------------


def test_v4_new_member_gets_an_id_and_nothing_else_changes(h):
    result = h.join(version=4, client_id="cli").result()
    assert result.error is E.MEMBER_ID_REQUIRED
    assert result.member_id.startswith("cli-") and result.generation == -1
    group = h.group()
    assert group.state is GroupState.EMPTY and not group.members
    assert result.member_id in group.pending_members


def test_pending_id_is_admitted_on_rejoin(h):
    member_id = h.join().result().member_id
    parked = h.join(member_id)
    assert member_id in h.group().members and member_id not in h.group().pending_members
    h.advance(0)
    result = ok(parked.result())
    assert result.generation == 1 and result.leader == member_id


def test_pending_id_expires_after_its_session_timeout(h):
    member_id = h.join(session=7000).result().member_id
    h.advance(6999)
    assert member_id in h.group().pending_members
    h.advance(1)
    assert member_id not in h.group().pending_members
    assert h.join(member_id).result().error is E.UNKNOWN_MEMBER_ID


def test_pending_id_blocks_early_join_completion_until_it_expires(h):
    leader = h.stable_group(1)[0]
    pending = h.join().result().member_id  # MEMBER_ID_REQUIRED: pending, not a member
    assert h.group().state is GroupState.STABLE  # nothing changes for the group
    parked = h.join(leader)  # leader rejoin: rebalance, but a pending id is outstanding
    assert not parked.done and h.group().state is GroupState.PREPARING_REBALANCE
    h.advance(SESSION)  # the pending id expires: now every known member has joined
    assert ok(parked.result()).generation == 2
    assert pending not in h.group().pending_members


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_before_v4_new_members_are_added_at_once(h, version):
    parked = h.join(version=version)
    assert not parked.done
    h.advance(0)
    result = ok(parked.result())
    assert result.member_id in h.group().members and result.generation == 1


def test_static_members_skip_member_id_required(h):
    parked = h.join(instance="i-1", version=5)
    h.advance(0)
    result = ok(parked.result())
    assert result.member_id.startswith("i-1-")


# --- protocol checks (supportsProtocols) ----------------------------------------------------------------------


def test_first_member_needs_protocol_type_and_protocols(h):
    assert h.join(protocol_type="").result().error is E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=[]).result().error is E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_type_must_match(h):
    h.stable_group(1)
    result = h.join(protocol_type="connect").result()
    assert result.error is E.INCONSISTENT_GROUP_PROTOCOL and result.member_id == ""


def test_a_protocol_supported_by_every_member_is_required(h):
    h.stable_group(1)
    assert h.join(protocols=[("sticky", b"")]).result().error is E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=[("sticky", b""), ("roundrobin", b"")]).result().error \
        is E.MEMBER_ID_REQUIRED


def test_known_member_with_inconsistent_protocols_keeps_its_id(h):
    leader = h.stable_group(1)[0]
    result = h.join(leader, protocols=[("other", b"")]).result()
    assert result.error is E.INCONSISTENT_GROUP_PROTOCOL and result.member_id == leader


def test_protocol_vote_picks_the_most_preferred_common_protocol(h):
    rr_first = [("roundrobin", b"r"), ("range", b"g")]
    first = h.join_new(protocols=rr_first)
    h.advance(0)
    first_id = first.result().member_id
    others = [h.join_new(protocols=[("range", b"g"), ("roundrobin", b"r")]) for _ in range(2)]
    h.join(first_id, protocols=rr_first)
    result = ok(others[0].result())
    assert result.protocol_name == "range"  # two votes against one
    assert result.protocol_type == "consumer"


# --- the initial delayed join (InitialDelayedJoin, KIP-134) -----------------------------------------------------


def test_initial_delay_never_completes_early(tmp_path):
    h = Harness(tmp_path, initial_rebalance_delay_ms=3000)
    parked = h.join_new()
    h.advance(2999)
    assert not parked.done  # everyone known has joined, but the initial delay holds
    h.advance(1)
    assert ok(parked.result()).generation == 1


def test_initial_delay_extends_while_members_keep_arriving(tmp_path):
    h = Harness(tmp_path, initial_rebalance_delay_ms=3000)
    first = h.join_new(rebalance=10_000)  # remaining budget = 10000 - 3000 = 7000
    h.advance(2000)
    second = h.join_new(rebalance=10_000)  # sets new_member_added
    h.advance(1000)  # t=3000: first delay fires; a member arrived: wait min(3000, 7000) more
    assert not first.done
    h.advance(2999)
    assert not first.done
    h.advance(1)  # t=6000: no new member in the second delay: complete
    assert ok(first.result()).generation == 1 and ok(second.result()).generation == 1


def test_initial_delay_budget_is_the_rebalance_timeout(tmp_path):
    h = Harness(tmp_path, initial_rebalance_delay_ms=3000)
    first = h.join_new(rebalance=7000)  # delay 3000, remaining budget 7000 - 3000 = 4000
    h.advance(1000)
    h.join_new(rebalance=7000)
    h.advance(2000)  # t=3000: re-arm for min(3000, 4000) = 3000, remaining 4000 - 3000 = 1000
    h.advance(1000)
    h.join_new(rebalance=7000)  # arrives during the second delay
    h.advance(2000)  # t=6000: re-arm for min(3000, 1000) = 1000, remaining 0
    assert not first.done
    h.advance(999)
    h.join_new(rebalance=7000)
    h.advance(1)  # t=7000: no budget left: complete although a member just arrived
    result = ok(first.result())
    assert result.generation == 1 and len(h.group().members) == 4


def test_initial_delay_only_from_empty(tmp_path):
    h = Harness(tmp_path, initial_rebalance_delay_ms=3000)
    parked = h.join_new()
    h.advance(3000)
    leader = ok(parked.result()).member_id
    h.sync(leader, 1, {leader: b"a"})
    rejoin = h.join(leader)  # Stable -> PreparingRebalance: normal join, completes at once
    assert ok(rejoin.result()).generation == 2


def test_initial_join_waits_for_member_ids_it_handed_out(h):
    """Consumers started together: their first JoinGroups (79 MEMBER_ID_REQUIRED) come before
    the first rejoin with an id.  The first generation waits for every id handed out to come
    back, instead of forming with the first and making the others start a second round."""
    first_id = h.join().result().member_id
    second_id = h.join().result().member_id  # pending: its JoinGroup with the id is on its way
    first = h.join(first_id)
    h.advance(0)  # the initial delay (0 here) is over, but an id is still to come back
    assert not first.done and h.group().state is GroupState.PREPARING_REBALANCE
    second = h.join(second_id)  # everyone known has joined and nobody is pending: complete
    assert ok(first.result()).generation == 1 and ok(second.result()).generation == 1
    assert sorted(m[0] for m in first.result().members) == sorted([first_id, second_id])


def test_initial_join_waits_for_pending_ids_only_until_they_expire(h):
    first_id = h.join().result().member_id
    h.join(session=7000)  # never comes back
    first = h.join(first_id)
    h.advance(6999)
    assert not first.done
    h.advance(1)  # the pending id expires: the join phase completes without it
    assert ok(first.result()).generation == 1 and len(h.group().members) == 1


def test_initial_join_waits_for_pending_ids_at_most_the_rebalance_timeout(h):
    first_id = h.join(rebalance=5000).result().member_id
    h.join(session=60_000)  # pending longer than the rebalance timeout
    first = h.join(first_id, rebalance=5000)
    h.advance(4999)
    assert not first.done
    h.advance(1)
    assert ok(first.result()).generation == 1


# --- completing the join phase -----------------------------------------------------------------------


def test_join_completes_as_soon_as_every_known_member_rejoined(h):
    leader, follower = h.stable_group(2)
    first = h.join(follower, protocols=[("range", subscription("t", "u"))])  # metadata change
    assert not first.done and h.group().state is GroupState.PREPARING_REBALANCE
    second = h.join(leader)
    assert ok(first.result()).generation == 3 and ok(second.result()).generation == 3


def test_leader_gets_members_with_metadata_and_followers_get_none(h):
    leader, follower = h.stable_group(2)
    a = h.join(leader)
    b = h.join(follower)
    lead, foll = ok(a.result()), ok(b.result())
    assert lead.leader == leader == foll.leader
    assert {m for m, _, _ in lead.members} == {leader, follower}
    assert all(meta == DEFAULT_PROTOCOLS[0][1] for _, _, meta in lead.members)  # selected: range
    assert foll.members == []


def test_rebalance_deadline_removes_dynamic_members_that_did_not_rejoin(h):
    leader, follower = h.stable_group(2, rebalance=8000)  # deadline before any session expiry
    parked = h.join(leader, rebalance=8000)
    h.advance(7999)
    assert not parked.done
    assert h.heartbeat(follower, 2) is E.REBALANCE_IN_PROGRESS  # alive, told to rejoin, does not
    h.advance(1)
    result = ok(parked.result())
    assert follower not in h.group().members and [m for m, _, _ in result.members] == [leader]


def test_new_leader_is_elected_when_the_leader_does_not_rejoin(h):
    leader, follower = h.stable_group(2, rebalance=8000)
    parked = h.join(follower, protocols=[("range", b"changed")], rebalance=8000)
    h.advance(8000)
    result = ok(parked.result())
    assert result.leader == follower and leader not in h.group().members


def test_new_member_join_timeout_is_five_minutes(h):
    leader = h.stable_group(1)[0]
    late = h.join_new(rebalance=400_000)  # the join deadline is 400 s; the leader never rejoins...
    for _ in range(59):
        h.advance(5_000)
        assert h.heartbeat(leader, 1) is E.REBALANCE_IN_PROGRESS  # ...but stays alive
    h.advance(4_999)
    assert not late.done
    h.advance(1)  # 300 s after it joined, the new member's JoinGroup times out
    result = late.result()
    assert result.error is E.UNKNOWN_MEMBER_ID and result.member_id == ""
    assert list(h.group().members) == [leader]


def test_join_phase_ending_empty_writes_a_memberless_record(h):
    leader = h.stable_group(1)[0]
    parked = h.join(leader)
    assert ok(parked.result()).generation == 2
    h.sync(leader, 2, {leader: b"x"})
    assert h.leave(leader).members[0][1] is E.NONE
    group = h.group()
    assert group.state is GroupState.EMPTY and group.generation == 3
    record = h.shard.group_records[GROUP]
    assert record.members == [] and record.generation == 3
    assert record.protocol is None and record.leader is None and record.protocol_type == "consumer"
    assert record.current_state_timestamp == h.clock.now_ms()


# --- known members by state ---------------------------------------------------------------------------


def test_completing_rebalance_same_metadata_answers_current_generation(h):
    leader, follower = h.stable_group(2)
    a = h.join(leader)
    h.join(follower)
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    again = h.join(leader).result()  # lost JoinGroup answer: same metadata
    assert ok(again).generation == a.result().generation
    assert {m for m, _, _ in again.members} == {leader, follower}
    assert h.group().state is GroupState.COMPLETING_REBALANCE


def test_completing_rebalance_changed_metadata_rebalances(h):
    leader, follower = h.stable_group(2)
    h.join(leader)
    h.join(follower)
    parked = h.join(follower, protocols=[("range", b"new")])
    assert not parked.done and h.group().state is GroupState.PREPARING_REBALANCE


def test_stable_follower_with_same_metadata_gets_current_generation(h):
    leader, follower = h.stable_group(2)
    result = ok(h.join(follower).result())
    assert result.generation == 2 and result.members == [] and result.leader == leader
    assert h.group().state is GroupState.STABLE


def test_stable_leader_rejoin_always_rebalances(h):
    leader, _ = h.stable_group(2)
    parked = h.join(leader)
    assert not parked.done and h.group().state is GroupState.PREPARING_REBALANCE


def test_known_member_id_not_in_group(h):
    h.stable_group(1)
    result = h.join("stranger").result()
    assert result.error is E.UNKNOWN_MEMBER_ID and result.member_id == "stranger"


def test_known_member_in_empty_group_is_unknown(h):
    leader = h.stable_group(1)[0]
    h.leave(leader)
    assert h.group().state is GroupState.EMPTY
    assert h.join(leader).result().error is E.UNKNOWN_MEMBER_ID


# --- group.max.size -------------------------------------------------------------------------------------


def test_group_max_size_rejects_new_members(tmp_path):
    h = Harness(tmp_path, max_group_size=2)
    h.stable_group(2)
    result = h.join().result()  # the size gate comes before MEMBER_ID_REQUIRED
    assert result.error is E.GROUP_MAX_SIZE_REACHED and result.member_id == ""
    assert not h.group().pending_members


def test_group_max_size_counts_waiting_members_while_preparing(tmp_path):
    h = Harness(tmp_path, max_group_size=2)
    leader, follower = h.stable_group(2)
    h.join(leader)  # PreparingRebalance, one member waiting
    newcomer = h.join_new()  # 1 waiting < 2: admitted, now two are waiting
    assert not newcomer.done and h.group().joined_count() == 2
    # the follower had not rejoined yet: the waiting count is at the limit, it is turned away
    result = h.join(follower).result()
    assert result.error is E.GROUP_MAX_SIZE_REACHED and result.member_id == ""
    assert follower not in h.group().members
    assert ok(newcomer.result()).generation == 3  # and the join phase could complete


def test_group_max_size_accepts_existing_members_when_stable(tmp_path):
    h = Harness(tmp_path, max_group_size=1)
    leader = h.stable_group(1)[0]
    assert ok(h.join(leader).result()).generation == 2  # the leader may rejoin (and rebalance)


def test_pending_member_with_instance_id_is_a_server_error(h):
    pending = h.join().result().member_id
    assert h.join(pending, instance="i").result().error is E.UNKNOWN_SERVER_ERROR


def test_rebalance_timeout_is_the_largest_members(h):
    first = h.join_new(rebalance=10_000)
    h.advance(0)
    leader = ok(first.result()).member_id
    h.sync(leader, 1, {leader: b"x"})
    second = h.join_new(rebalance=50_000)  # PreparingRebalance; deadline = max(10s, 50s)
    for _ in range(5):
        h.advance(9_000)
        assert h.heartbeat(leader, 1) is E.REBALANCE_IN_PROGRESS  # alive but never rejoins
    h.advance(4_999)
    assert not second.done
    h.advance(1)
    assert ok(second.result()).generation == 2 and leader not in h.group().members


def test_group_rebalance_timeout_comes_from_its_members(h):
    # (JoinGroup v0 has none: the wire glue passes the session timeout, see test_groups_wire)
    first = h.join(version=0, session=8000, rebalance=8000)
    h.advance(0)
    assert ok(first.result()).generation == 1
    assert h.group().rebalance_timeout_ms() == 8000
