"""The classic-group rebalance engine: join phase, generations, sync deadline, liveness.

Requests (``join.py``, ``membership.py``) and timers on the shard's clock
both land here, because every timer ends in a rebalance step: a session
expiry removes a member and rebalances, the join deadline completes the join
phase, the pending-sync deadline removes members that never synced.  The
steps follow Kafka's old (Scala) coordinator: ``prepareRebalance``,
``InitialDelayedJoin``, ``onCompleteJoin``, ``DelayedSync``,
``removeMemberAndUpdateGroup`` in ``GroupCoordinator``.

Timers never hold a group alive: each callback first checks that the group
object is still the shard's live group (a deleted and re-created group is a
new object) and that its token/generation is current, so a stale timer is a
no-op rather than something to cancel perfectly.
"""

from __future__ import annotations

import structlog

from ...offsets.records import GroupKey
from ...protocol.errors import ErrorCode
from ..clock import real_ms
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult
from .api import JoinResult, SyncResult
from .group import ClassicGroup, Member
from .shard import Shard
from .state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE

log = structlog.get_logger("odradek.coordinator")


# storage errors on the group record, as the group APIs report them (``GroupMetadataManager.storeGroup``)
_STORE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_RECORD: ErrorCode.UNKNOWN_SERVER_ERROR,  # ours: a record that cannot be encoded
}


def is_live(shard: Shard, group: ClassicGroup) -> bool:
    """The group is still the shard's current, not-Dead group object."""
    return shard.groups.get(group.group_id) is group and group.state is not DEAD


# --- liveness (``onExpireHeartbeat``) ------------------------------------------------------------------


def reset_session(shard: Shard, group: ClassicGroup, member: Member | str) -> None:
    """Activity seen (heartbeat, join/sync answer, accepted commit): restart the session."""
    if isinstance(member, str):
        found = group.members.get(member)
        if found is None:
            return
        member = found
    schedule_expiry(shard, group, member, member.session_timeout_ms)


def schedule_expiry(shard: Shard, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
    """Expire ``member`` ``timeout_ms`` from now unless it shows activity first.

    Only the deadline moves on a heartbeat; an armed timer that fires before
    the deadline re-arms itself, so the hot path creates no timers.
    """
    deadline = shard.clock.now_ms() + timeout_ms
    member.session_deadline_ms = deadline
    member.heard_real_ms = real_ms()  # what a sparing advance asks (``spare_active``)
    timer = member.heartbeat_timer
    if timer is not None:
        if member.timer_deadline_ms <= deadline:
            return
        timer.cancel()
    _arm_session_timer(shard, group, member, deadline)


def _arm_session_timer(shard: Shard, group: ClassicGroup, member: Member, deadline: int) -> None:
    member.timer_deadline_ms = deadline
    member.heartbeat_timer = shard.clock.call_at(
        deadline, lambda: _on_session_timer(shard, group, member))


def _on_session_timer(shard: Shard, group: ClassicGroup, member: Member) -> None:
    member.heartbeat_timer = None
    if not is_live(shard, group) or group.members.get(member.member_id) is not member:
        return
    if shard.clock.now_ms() < member.session_deadline_ms:
        _arm_session_timer(shard, group, member, member.session_deadline_ms)
        return
    if not member.is_new and (member.awaiting_join or member.awaiting_sync):
        return  # a parked JoinGroup/SyncGroup keeps it alive; its answer restarts the session
    log.info("member.expired", group=group.group_id, member=member.member_id,
             instance=member.group_instance_id, new=member.is_new)
    remove_member_and_update(shard, group, member, "session timeout expired")


def spare_members(shard: Shard, heard_since_real_ms: int, shift_ms: int) -> int:
    """A sparing advance (``advance(..., spare_active=...)``): members heard from since
    ``heard_since_real_ms`` keep the session time they had left, so only the silent ones expire.
    Every kind of group's members (classic, consumer, share: each restarts its session by moving
    ``session_deadline_ms`` and stamping ``heard_real_ms``); their armed timers fire early and
    re-arm at the moved deadline (``_on_session_timer`` and the consumer and share heartbeats')."""
    spared = 0
    groups = [*shard.groups.values(), *shard.consumer_groups.values(), *shard.share_groups.values()]
    for group in groups:
        for member in group.members.values():
            if member.heard_real_ms >= heard_since_real_ms:
                member.session_deadline_ms += shift_ms
                spared += 1
    return spared


def add_pending_member(shard: Shard, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
    """A MEMBER_ID_REQUIRED id: it must rejoin within its session timeout (``addPendingMemberExpiration``)."""
    group.pending_members[member_id] = shard.clock.call_at(
        shard.clock.now_ms() + timeout_ms, lambda: _on_pending_expired(shard, group, member_id))
    log.info("member.pending", group=group.group_id, member=member_id)


def _on_pending_expired(shard: Shard, group: ClassicGroup, member_id: str) -> None:
    if not is_live(shard, group) or not group.drop_pending(member_id):
        return
    log.info("member.pending_expired", group=group.group_id, member=member_id)
    pending_gone(shard, group)


def pending_gone(shard: Shard, group: ClassicGroup) -> None:
    """A MEMBER_ID_REQUIRED id went away without joining (expired, left, refused): a join phase
    may now complete, a held leader SyncGroup may now be stored."""
    try_complete_join(shard, group)
    if group.held_sync is not None and not group.pending_members:
        release_leader_sync(shard, group)


def release_leader_sync(shard: Shard, group: ClassicGroup) -> None:
    """Store a held leader SyncGroup now (its pending ids went away, or it was held long enough)."""
    held = group.held_sync
    if held is None:
        return
    group.held_sync = None
    generation, assignments, timer = held
    timer.cancel()
    if is_live(shard, group) and group.state is COMPLETING and group.generation == generation:
        store_leader_sync(shard, group, generation, assignments)


# --- removing members ------------------------------------------------------------------


def remove_member_and_update(shard: Shard, group: ClassicGroup, member: Member, reason: str) -> None:
    """Leave or expiry (``removeMemberAndUpdateGroup``): answer what it parked, remove it, move the group on."""
    group.answer_join(member, JoinResult.failed("", ErrorCode.UNKNOWN_MEMBER_ID))
    # Kafka drops a parked SyncGroup here; answering it keeps that connection's queue moving
    member.answer_sync(SyncResult.failed(ErrorCode.UNKNOWN_MEMBER_ID))
    group.remove_member(member.member_id)
    state = group.state
    if state is STABLE or state is COMPLETING:
        maybe_prepare_rebalance(shard, group, reason)
    elif state is PREPARING:
        try_complete_join(shard, group)


# --- join phase (``prepareRebalance``, ``onCompleteJoin``) -------------------------------------------------------------------


def maybe_prepare_rebalance(shard: Shard, group: ClassicGroup, reason: str) -> None:
    if group.state is STABLE or group.state is COMPLETING or group.state is EMPTY:
        prepare_rebalance(shard, group, reason)


def prepare_rebalance(shard: Shard, group: ClassicGroup, reason: str) -> None:
    """Enter PreparingRebalance: cancel the sync phase, arm the join deadline."""
    _drop_held_sync(group)  # a held leader SyncGroup is answered 27 with the others below
    if group.state is COMPLETING:
        _reset_and_propagate_error(shard, group, ErrorCode.REBALANCE_IN_PROGRESS)
    _cancel_sync_deadline(group)
    initial = group.state is EMPTY
    rebalance_timeout = group.rebalance_timeout_ms()
    group.transition(PREPARING, shard.clock.now_ms(), reason)
    if initial:
        delay = shard.config.initial_rebalance_delay_ms
        _arm_join(shard, group, delay, initial=True, remaining=max(rebalance_timeout - delay, 0))
    else:
        _arm_join(shard, group, rebalance_timeout, initial=False)
        try_complete_join(shard, group)


def try_complete_join(shard: Shard, group: ClassicGroup) -> None:
    """Complete early once every known member waits in JoinGroup (never during the initial delay)."""
    if group.state is PREPARING and not group.join_is_initial and group.all_members_joined():
        complete_join(shard, group)


def _arm_join(shard: Shard, group: ClassicGroup, delay_ms: int, *, initial: bool,
              remaining: int = 0) -> None:
    _cancel_join(group)
    group.join_is_initial = initial
    group.initial_rebalance_remaining_ms = remaining
    token = group.join_token
    group.join_timer = shard.clock.call_at(
        shard.clock.client_deadline(delay_ms), lambda: _on_join_deadline(shard, group, token, delay_ms))


def _cancel_join(group: ClassicGroup) -> None:
    group.join_token += 1
    if group.join_timer is not None:
        group.join_timer.cancel()
        group.join_timer = None


def _on_join_deadline(shard: Shard, group: ClassicGroup, token: int, delay_ms: int) -> None:
    if group.join_token != token or not is_live(shard, group) or group.state is not PREPARING:
        return
    group.join_timer = None
    remaining = group.initial_rebalance_remaining_ms
    if group.join_is_initial and group.new_member_added and remaining != 0:
        # Kafka's InitialDelayedJoin: members still arriving buy another (shorter) wait
        group.new_member_added = False
        configured = shard.config.initial_rebalance_delay_ms
        _arm_join(shard, group, min(configured, remaining), initial=True,
                  remaining=max(remaining - delay_ms, 0))
        return
    if group.join_is_initial and group.pending_members and remaining != 0:
        # the delay is over, but member ids handed out with MEMBER_ID_REQUIRED have not come
        # back yet (their JoinGroup is one round trip away): wait for them as Kafka's regular
        # DelayedJoin does (hasAllMembersJoined: no pending member), for the rest of the
        # rebalance timeout at most, so the first generation does not form without them and
        # make them start a second round the others hear of only at their next heartbeat
        _arm_join(shard, group, remaining, initial=False)
        try_complete_join(shard, group)
        return
    complete_join(shard, group)


def complete_join(shard: Shard, group: ClassicGroup) -> None:
    """The join phase ends: drop who did not rejoin, start the next generation, answer joins."""
    _cancel_join(group)
    for member in group.not_yet_rejoined():
        if not member.is_static:
            group.remove_member(member.member_id)
            log.info("member.removed", group=group.group_id, member=member.member_id,
                     reason="did not rejoin before the rebalance deadline")
    if group.members and not group.elect_joined_leader():
        log.warning("group.no_member_rejoined", group=group.group_id)
        _arm_join(shard, group, group.rebalance_timeout_ms(), initial=False)
        return
    _init_next_generation(shard, group)
    if group.state is EMPTY:
        _store_empty(shard, group)
        return
    _answer_joins(shard, group)
    _arm_sync_deadline(shard, group)


def _init_next_generation(shard: Shard, group: ClassicGroup) -> None:
    group.generation += 1
    group.pending_sync.clear()
    if group.members:
        group.protocol_name = group.select_protocol()
        group.compute_subscribed_topics()
        group.transition(COMPLETING, shard.clock.now_ms(), "join phase complete")
    else:
        group.protocol_name = None
        group.compute_subscribed_topics()
        group.transition(EMPTY, shard.clock.now_ms(), "join phase complete with no members")


def _answer_joins(shard: Shard, group: ClassicGroup) -> None:
    everyone = group.current_member_metadata()
    for member in list(group.members.values()):
        is_leader = member.member_id == group.leader_id
        group.answer_join(member, JoinResult(
            ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
            group.protocol_name, group.leader_id or "", everyone if is_leader else []))
        reset_session(shard, group, member)
        member.is_new = False
        group.pending_sync.add(member.member_id)


def _store_empty(shard: Shard, group: ClassicGroup) -> None:
    """A join phase that ends empty still writes the (memberless) new generation."""
    def done(error: ErrorCode | None) -> None:
        if error is not None:
            log.warning("group.store_empty_failed", group=group.group_id, error=error.name)

    store_group(shard, group, {}).add_done_callback(done)


# --- sync phase (``handleSyncGroup``) -----------------------------------------------------------------------


def _arm_sync_deadline(shard: Shard, group: ClassicGroup) -> None:
    """KAFKA-12890: members that never SyncGroup are removed after one rebalance timeout.

    The timeout is the group's (the largest of its members'), as in Kafka's
    GroupMetadataManager.schedulePendingSync; a group whose members all joined
    with rebalance_timeout_ms 0 expires at once, before any SyncGroup can
    arrive, exactly as Kafka's timer does (it runs already-expired tasks at once).
    """
    _cancel_sync_deadline(group)
    generation = group.generation
    group.sync_timer = shard.clock.call_at(
        shard.clock.client_deadline(group.rebalance_timeout_ms()),
        lambda: _on_sync_deadline(shard, group, generation))


def _cancel_sync_deadline(group: ClassicGroup) -> None:
    if group.sync_timer is not None:
        group.sync_timer.cancel()
        group.sync_timer = None


def mark_synced(group: ClassicGroup, member_id: str) -> None:
    group.pending_sync.discard(member_id)
    if not group.pending_sync:
        _cancel_sync_deadline(group)


def _on_sync_deadline(shard: Shard, group: ClassicGroup, generation: int) -> None:
    group.sync_timer = None
    if (not is_live(shard, group) or group.generation != generation
            or group.state not in (COMPLETING, STABLE) or not group.pending_sync):
        return
    missing = sorted(group.pending_sync)
    for member_id in missing:
        group.remove_member(member_id)
        log.info("member.removed", group=group.group_id, member=member_id,
                 reason="no SyncGroup before the rebalance timeout")
    prepare_rebalance(shard, group, f"pending sync expired for {len(missing)} member(s)")


# the longest a leader's SyncGroup waits for member ids handed out to come back: their
# JoinGroup is one round trip away, tens of milliseconds on a loaded machine
SYNC_HOLD_MAX_MS = 1000


def hold_leader_sync(shard: Shard, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
    """The leader's SyncGroup: store its assignment now, or hold it while member ids handed out
    with MEMBER_ID_REQUIRED are still to come back.

    Such a member's JoinGroup is one round trip away.  Arriving while the group
    is CompletingRebalance it starts a new rebalance whose 27 the parked
    SyncGroups carry at once; arriving after the group went Stable, the others
    would learn of the new rebalance only at their next heartbeat (seconds).
    Holding the leader's answer is a slower group-record write as far as the
    protocol can tell; the hold ends when the ids join (a rebalance, as Kafka
    does for a member joining CompletingRebalance), leave or expire, or after
    ``SYNC_HOLD_MAX_MS`` -- a client that gave up after its MEMBER_ID_REQUIRED
    must not stall the group for its whole session timeout; a member joining
    later is handled as Kafka handles it.
    """
    if group.pending_members:
        _drop_held_sync(group)
        timer = shard.clock.call_at(shard.clock.client_deadline(SYNC_HOLD_MAX_MS),
                                    lambda: release_leader_sync(shard, group))
        group.held_sync = (group.generation, assignments, timer)
        log.info("group.sync_held", group=group.group_id, generation=group.generation,
                 pending=len(group.pending_members))
        return
    store_leader_sync(shard, group, group.generation, assignments)


def _drop_held_sync(group: ClassicGroup) -> None:
    if group.held_sync is not None:
        group.held_sync[2].cancel()
        group.held_sync = None


def store_leader_sync(shard: Shard, group: ClassicGroup, generation: int,
                      assignments: dict[str, bytes]) -> None:
    """Write the leader's assignment; when durable, answer every SyncGroup and go Stable."""
    store_group(shard, group, assignments).add_done_callback(
        lambda error: complete_sync(shard, group, generation, assignments, error))


def store_group(shard: Shard, group: ClassicGroup, assignments: dict[str, bytes]) -> Promise:
    """Write the group record for the current generation; yields None or a mapped error."""
    record = (GroupKey(group.group_id), group.to_value(assignments))
    return shard.run(CoordinatorResult([record], None, _store_failed))


def _store_failed(_response: None, error: ErrorCode) -> ErrorCode:
    return _STORE_ERRORS.get(error, error)


def complete_sync(shard: Shard, group: ClassicGroup, generation: int,
                  assignments: dict[str, bytes], error: ErrorCode | None) -> None:
    """The leader's group record is durable (or failed): hand out assignments, go Stable."""
    if not is_live(shard, group) or group.state is not COMPLETING or group.generation != generation:
        return  # the group moved on while the record was being written
    if error is not None:
        _reset_and_propagate_error(shard, group, error)
        maybe_prepare_rebalance(shard, group, f"storing the group record failed: {error.name}")
        return
    for member in group.members.values():
        member.assignment = assignments.get(member.member_id, b"")
    _propagate(shard, group, ErrorCode.NONE)
    group.transition(STABLE, shard.clock.now_ms(), "leader assignment stored")


def _reset_and_propagate_error(shard: Shard, group: ClassicGroup, error: ErrorCode) -> None:
    for member in group.members.values():
        member.assignment = b""
    _propagate(shard, group, error)


def _propagate(shard: Shard, group: ClassicGroup, error: ErrorCode) -> None:
    ok = error is ErrorCode.NONE
    protocol_type = group.protocol_type if ok else None
    protocol_name = group.protocol_name if ok else None
    for member in list(group.members.values()):
        if member.answer_sync(SyncResult(error, protocol_type, protocol_name, member.assignment)):
            reset_session(shard, group, member)


# --- shard life cycle ------------------------------------------------------------------------


def on_shard_loaded(shard: Shard) -> None:
    """Loaded members get fresh sessions (``onGroupLoaded``); a group over ``group.max.size`` rebalances."""
    for group in list(shard.groups.values()):
        if len(group.members) > shard.config.max_group_size:
            prepare_rebalance(shard, group, "loaded group is over group.max.size")
        for member in list(group.members.values()):
            reset_session(shard, group, member)


def unload_shard(shard: Shard) -> None:
    """This node stops serving the shard: stop its timers, answer what is parked, groups Dead."""
    for group in list(shard.groups.values()):
        retire_group(shard, group, ErrorCode.NOT_COORDINATOR, unloading=True)


def retire_group(shard: Shard, group: ClassicGroup, error: ErrorCode, *, unloading: bool = False) -> None:
    """The group leaves this shard's cache: its timers stop, parked JoinGroup/SyncGroup answers get
    ``error`` (NOT_COORDINATOR when the shard unloads, REBALANCE_IN_PROGRESS when the group becomes
    a consumer group), and it is Dead."""
    _cancel_join(group)
    _cancel_sync_deadline(group)
    for member_id in list(group.pending_members):
        group.drop_pending(member_id)
    for member in list(group.members.values()):
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        group.answer_join(member, JoinResult.failed(member.member_id, error))
        member.answer_sync(SyncResult.failed(error))
    shard.remove_group(group.group_id, unloading=unloading)
