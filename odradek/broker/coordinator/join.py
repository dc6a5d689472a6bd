"""JoinGroup (Kafka's ``GroupCoordinator.handleJoinGroup``): who may join, with which id, and what it waits for.

The answer is a :class:`Promise` of a :class:`JoinResult`: resolved at once
for errors and for members that may go straight to SyncGroup, parked until
the join phase completes otherwise.  Order of checks follows Kafka's
``handleJoinGroup``: the common checks, session timeout bounds, group lookup
or creation, ``group.max.size`` gate, then the new-member or known-member
path, then an attempt to complete the join phase.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import structlog

from ...protocol.errors import ErrorCode
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult
from .api import JoinRequest, JoinResult, SyncResult
from .consumer_admin import group_tombstones
from .consumer_classic import classic_join
from .group import ClassicGroup, Member, validate_member
from .rebalance import (
    add_pending_member,
    maybe_prepare_rebalance,
    pending_gone,
    reset_session,
    schedule_expiry,
    store_group,
    try_complete_join,
)
from .shard import Shard
from .state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE

if TYPE_CHECKING:
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")



def _fail(member_id: str, error: ErrorCode) -> Promise:
    return Promise.resolved(JoinResult.failed(member_id, error))


def join_group(coordinator: GroupShards, req: JoinRequest) -> Promise:
    shard, error = coordinator.check(req.group_id, allow_empty=False)
    if error is not ErrorCode.NONE:
        return _fail(req.member_id, error)
    config = shard.config
    if not config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms:
        return _fail(req.member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
    if req.group_id in shard.share_groups:  # classicGroupJoin: a group of another kind, no member id
        return _fail("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    consumer = shard.consumer_groups.get(req.group_id)
    if consumer is not None:
        # a KIP-848 group: with members, the joiner becomes a classic member of it (as the migration
        # policy allows, ``consumer_classic``); an empty one becomes a classic group, its tombstones
        # first, its offsets kept (GroupMetadataManager.classicGroupJoin)
        if consumer.members:
            return classic_join(shard, coordinator, consumer, req)
        log.info("group.converted", group=req.group_id, to="classic")
        shard.run(CoordinatorResult(group_tombstones(consumer), None), replay_now=True)
    is_new = req.member_id == ""
    group = shard.groups.get(req.group_id)  # a Dead group still in the cache answers 15 below
    if group is None:
        if not is_new:
            return _fail(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        group = shard.get_or_create_group(req.group_id)
    if not _accepts(group, req.member_id, config.max_group_size):
        if group.remove_member(req.member_id) is not None or group.drop_pending(req.member_id):
            log.info("member.removed", group=group.group_id, member=req.member_id,
                     reason="group.max.size reached")
            pending_gone(shard, group)
        promise = _fail("", ErrorCode.GROUP_MAX_SIZE_REACHED)
    elif is_new:
        promise = _join_new(shard, group, req)
    else:
        promise = _join_known(shard, group, req)
    try_complete_join(shard, group)
    return promise


def _accepts(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    """Kafka's ``acceptJoiningMember``."""
    state = group.state
    if state is EMPTY or state is DEAD:
        return True
    member = group.members.get(member_id)
    if state is PREPARING:
        return (member is not None and member.awaiting_join) or group.joined_count() < max_size
    return member is not None or len(group.members) < max_size


# --- new members (member id "") ---------------------------------------------------------


MAX_STRING_BYTES = 32767  # a protocol (and record) string's limit


def new_member_id(prefix: str | None) -> str:
    """Kafka's ``<instance or client id>-<UUID>``, the prefix cut so the id fits a string field.

    Kafka does not cut it, so a 32,767-byte group.instance.id or client id
    makes a member id no JoinGroup, DescribeGroups or group record can
    encode; here the id keeps its UUID (it stays unique) and loses the
    prefix's tail.
    """
    tail = f"-{uuid.uuid4()}"
    head = str(prefix)
    raw = head.encode("utf-8")
    room = MAX_STRING_BYTES - len(tail)
    if len(raw) > room:
        head = raw[:room].decode("utf-8", "ignore")  # never half a character
    return head + tail


def _join_new(shard: Shard, group: ClassicGroup, req: JoinRequest) -> Promise:
    if group.state is DEAD:
        return _fail("", ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports_protocols(req.protocol_type, req.protocols):
        return _fail("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    instance_id = req.group_instance_id
    new_id = new_member_id(instance_id if instance_id is not None else req.client_id)
    if instance_id is not None:
        old_id = group.static_members.get(instance_id)
        if old_id is not None:
            return _replace_static(shard, group, old_id, new_id, req)
        return add_member_and_rebalance(shard, group, req, new_id)
    if req.require_known_member_id:
        add_pending_member(shard, group, new_id, req.session_timeout_ms)
        return _fail(new_id, ErrorCode.MEMBER_ID_REQUIRED)
    return add_member_and_rebalance(shard, group, req, new_id)


def add_member_and_rebalance(shard: Shard, group: ClassicGroup, req: JoinRequest,
                             member_id: str) -> Promise:
    """``addMemberAndRebalance``: a new member waits in JoinGroup under the 5-minute new-member deadline."""
    member = Member(member_id=member_id, group_instance_id=req.group_instance_id,
                    client_id=req.client_id, client_host=req.client_host,
                    rebalance_timeout_ms=req.rebalance_timeout_ms,
                    session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
                    protocols=list(req.protocols), is_new=True)
    if group.state is PREPARING and group.generation == 0:
        group.new_member_added = True  # extends the initial delayed join
    group.add_member(member)
    promise = group.park_join(member)
    schedule_expiry(shard, group, member, shard.config.new_member_join_timeout_ms)
    log.info("member.joined", group=group.group_id, member=member_id,
             instance=req.group_instance_id, client_id=req.client_id, client_host=req.client_host,
             reason=req.reason)
    maybe_prepare_rebalance(shard, group, f"new member {member_id} joined")
    return promise


# --- known members --------------------------------------------------------------------------


def _join_known(shard: Shard, group: ClassicGroup, req: JoinRequest) -> Promise:
    member_id = req.member_id
    if group.state is DEAD:
        return _fail(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports_protocols(req.protocol_type, req.protocols):
        return _fail(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if member_id in group.pending_members:
        if req.group_instance_id is not None:
            return _fail(member_id, ErrorCode.UNKNOWN_SERVER_ERROR)  # Kafka: IllegalStateException
        return add_member_and_rebalance(shard, group, req, member_id)
    error = validate_member(group, member_id, req.group_instance_id)
    if error is not ErrorCode.NONE:
        return _fail(member_id, error)
    member = group.members[member_id]
    state = group.state
    if state is PREPARING:
        return _update_and_rebalance(shard, group, member, req, "member rejoined")
    if state is COMPLETING:
        if member.same_protocols(req.protocols):
            return Promise.resolved(_current_generation(group, member))  # lost JoinGroup answer
        return _update_and_rebalance(shard, group, member, req, "member changed its metadata")
    if state is STABLE:
        if group.is_leader(member_id):
            return _update_and_rebalance(shard, group, member, req, "leader rejoined")
        if not member.same_protocols(req.protocols):
            return _update_and_rebalance(shard, group, member, req, "member changed its metadata")
        return Promise.resolved(_current_generation(group, member))
    return _fail(member_id, ErrorCode.UNKNOWN_MEMBER_ID)


def _current_generation(group: ClassicGroup, member: Member) -> JoinResult:
    """The generation in force, so the member can go on to SyncGroup (leader gets the members)."""
    members = group.current_member_metadata() if group.is_leader(member.member_id) else []
    return JoinResult(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                      group.protocol_name, group.leader_id or "", members)


def _update_and_rebalance(shard: Shard, group: ClassicGroup, member: Member, req: JoinRequest,
                          reason: str) -> Promise:
    group.update_member(member, list(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms)
    promise = group.park_join(member)
    maybe_prepare_rebalance(shard, group, f"{reason}: {member.member_id}")
    return promise


# --- static members (KIP-345) ----------------------------------------------------------------


def _replace_static(shard: Shard, group: ClassicGroup, old_id: str, new_id: str,
                    req: JoinRequest) -> Promise:
    """A known ``group.instance.id`` joins with no member id: it replaces its old member id.

    In Stable, if the protocol the group would select does not change, the
    group record is rewritten with the new id and the member gets the
    current generation without a rebalance (Kafka's updateStaticMemberAndRebalance).
    """
    instance_id = req.group_instance_id
    assert instance_id is not None
    previous_leader = group.leader_id
    old = group.members[old_id]
    group.answer_join(old, JoinResult.failed(old_id, ErrorCode.FENCED_INSTANCE_ID))
    old.answer_sync(SyncResult.failed(ErrorCode.FENCED_INSTANCE_ID))
    member = group.replace_static_member(instance_id, old_id, new_id)
    reset_session(shard, group, member)
    before = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
    group.update_member(member, list(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms)
    promise = group.park_join(member)
    log.info("member.replaced", group=group.group_id, instance=instance_id, old_member=old_id,
             member=new_id, state=group.state.value)
    if group.state is STABLE:
        if group.select_protocol() == group.protocol_name:
            _persist_static_rejoin(shard, group, member, old_id, previous_leader, before, req, promise)
        else:
            maybe_prepare_rebalance(shard, group, f"static member {instance_id} changed the protocol")
    elif group.state is COMPLETING:
        maybe_prepare_rebalance(shard, group, f"static member {instance_id} rejoined during sync")
    return promise


def _persist_static_rejoin(shard: Shard, group: ClassicGroup, member: Member, old_id: str,
                           previous_leader: str | None, before: tuple, req: JoinRequest,
                           promise: Promise) -> None:
    assignments = {m.member_id: m.assignment for m in group.members.values()}
    new_id = member.member_id

    def stored(error: ErrorCode | None) -> None:
        if error is not None:
            _revert_static_rejoin(shard, group, member, old_id, previous_leader, before, promise, error)
        elif member.join_promise is promise and _is_current(group, member, new_id):
            group.answer_join(member, _static_rejoin_result(group, new_id, previous_leader,
                                                            req.supports_skip_assignment))

    store_group(shard, group, assignments).add_done_callback(stored)


def _is_current(group: ClassicGroup, member: Member, member_id: str) -> bool:
    return member.member_id == member_id and group.members.get(member_id) is member


def _static_rejoin_result(group: ClassicGroup, new_id: str, previous_leader: str | None,
                          skip_assignment: bool) -> JoinResult:
    if skip_assignment:
        # v9+: the leader learns it leads (to watch metadata) but must not reassign
        is_leader = group.is_leader(new_id)
        return JoinResult(ErrorCode.NONE, new_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader_id or "",
                          group.current_member_metadata() if is_leader else [], is_leader)
    # older clients: report the old leader id so a returning leader does not reassign
    return JoinResult(ErrorCode.NONE, new_id, group.generation, group.protocol_type,
                      group.protocol_name, previous_leader or "", [])


def _revert_static_rejoin(shard: Shard, group: ClassicGroup, member: Member, old_id: str,
                          previous_leader: str | None, before: tuple, promise: Promise,
                          error: ErrorCode) -> None:
    log.warning("member.replace_failed", group=group.group_id, member=member.member_id,
                error=error.name)
    new_id = member.member_id
    if _is_current(group, member, new_id) and member.group_instance_id is not None:
        group.update_member(member, *before)
        group.replace_static_member(member.group_instance_id, new_id, old_id)
        reset_session(shard, group, member)
    result = JoinResult(error, "", group.generation, group.protocol_type, group.protocol_name,
                        previous_leader or "")
    if member.join_promise is promise:
        group.answer_join(member, result)
    else:
        promise.set(result)
