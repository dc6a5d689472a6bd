"""SyncGroup, Heartbeat and LeaveGroup: members' requests after they joined.

JoinGroup lives in ``join.py`` and the rebalance machinery (sessions, join
and sync phases, storing the group record) in ``rebalance.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from ...protocol.errors import ErrorCode
from ..runtime.promise import Promise
from .api import LeaveMember, LeaveResult, SyncRequest, SyncResult
from .consumer_classic import classic_heartbeat, classic_sync
from .consumer_heartbeat import remove_members
from .group import ClassicGroup, Member, validate_member
from .rebalance import (
    hold_leader_sync,
    mark_synced,
    pending_gone,
    remove_member_and_update,
    reset_session,
    schedule_expiry,
)
from .shard import Shard
from .state import COMPLETING, DEAD, EMPTY, PREPARING

if TYPE_CHECKING:
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")



# --- SyncGroup ----------------------------------------------------------------------------


def sync_group(coordinator: GroupShards, req: SyncRequest) -> Promise:
    """A Promise of a :class:`SyncResult`; parked in CompletingRebalance until the leader's record is durable."""
    if req.require_protocol and (req.protocol_type is None or req.protocol_name is None):
        return _fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    shard, error = coordinator.check(req.group_id, allow_empty=False)
    if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return _fail(ErrorCode.REBALANCE_IN_PROGRESS)  # the in-flight rebalance was lost: rejoin
    if error is not ErrorCode.NONE:
        return _fail(error)
    group = shard.groups.get(req.group_id)
    if group is None:
        consumer = shard.consumer_groups.get(req.group_id)  # a classic member of a consumer group
        if consumer is not None:
            return Promise.resolved(classic_sync(shard, coordinator, consumer, req))
        return _fail(ErrorCode.UNKNOWN_MEMBER_ID)
    error = _validate_sync(group, req)
    if error is not ErrorCode.NONE:
        return _fail(error)
    state = group.state
    if state is EMPTY:
        return _fail(ErrorCode.UNKNOWN_MEMBER_ID)
    if state is PREPARING:
        return _fail(ErrorCode.REBALANCE_IN_PROGRESS)
    member = group.members[req.member_id]
    if state is COMPLETING:
        return _sync_completing(shard, group, member, req)
    mark_synced(group, member.member_id)  # Stable: the assignment is already known
    result = SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
    reset_session(shard, group, member)
    return Promise.resolved(result)


def _fail(error: ErrorCode) -> Promise:
    return Promise.resolved(SyncResult.failed(error))


def _validate_sync(group: ClassicGroup, req: SyncRequest) -> ErrorCode:
    if group.state is DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    error = validate_member(group, req.member_id, req.group_instance_id)
    if error is not ErrorCode.NONE:
        return error
    if req.generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    if req.protocol_type is not None and req.protocol_type != group.protocol_type:
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    if req.protocol_name is not None and req.protocol_name != group.protocol_name:
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    return ErrorCode.NONE


def _sync_completing(shard: Shard, group: ClassicGroup, member: Member, req: SyncRequest) -> Promise:
    """Park the answer; the leader's assignment is written before anyone is answered."""
    promise = member.park_sync()
    mark_synced(group, member.member_id)
    if group.is_leader(member.member_id):
        assignments = {m: req.assignments.get(m, b"") for m in group.members}
        missing = sum(1 for m in group.members if m not in req.assignments)
        log.info("group.assignment_received", group=group.group_id, generation=group.generation,
                 members=len(group.members), missing=missing)
        hold_leader_sync(shard, group, assignments)
    return promise


# --- Heartbeat ------------------------------------------------------------------------------


def heartbeat(coordinator: GroupShards, group_id: str, generation: int, member_id: str,
              group_instance_id: str | None) -> ErrorCode:
    """``handleHeartbeat``, in Kafka's order: member, then generation, then state."""
    shard, error = coordinator.check(group_id, allow_empty=False)
    if error is not ErrorCode.NONE:
        return ErrorCode.NONE if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else error
    group = shard.groups.get(group_id)
    if group is None:
        consumer = shard.consumer_groups.get(group_id)  # a classic member of a consumer group
        if consumer is not None:
            return classic_heartbeat(shard, consumer, member_id, group_instance_id, generation)
        return ErrorCode.UNKNOWN_MEMBER_ID
    state = group.state
    if state is DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    member = group.members.get(member_id)
    if member is None or group_instance_id is not None:  # the common case needs no more checks
        error = validate_member(group, member_id, group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        member = group.members[member_id]
    if generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    if state is EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    schedule_expiry(shard, group, member, member.session_timeout_ms)
    return ErrorCode.REBALANCE_IN_PROGRESS if state is PREPARING else ErrorCode.NONE


# --- LeaveGroup -----------------------------------------------------------------------------


def leave_group(coordinator: GroupShards, group_id: str, members: list[LeaveMember]) -> LeaveResult:
    """``handleLeaveGroup``: a top-level error, or one error per leaving member."""
    shard, error = coordinator.check(group_id, allow_empty=False)
    if error is not ErrorCode.NONE:
        return LeaveResult(error)
    consumer = shard.consumer_groups.get(group_id)
    if consumer is not None:  # a KIP-848 group: the admin's "remove members" fences them
        errors = remove_members(shard, consumer, [(m.member_id, m.group_instance_id) for m in members])
        return LeaveResult(ErrorCode.NONE, list(zip(members, errors, strict=True)))
    group = shard.groups.get(group_id)
    if group is None:
        return LeaveResult(ErrorCode.NONE, [(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in members])
    if group.state is DEAD:
        return LeaveResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return LeaveResult(ErrorCode.NONE, [(m, _leave_one(shard, group, m)) for m in members])


def _leave_one(shard: Shard, group: ClassicGroup, leaving: LeaveMember) -> ErrorCode:
    member_id = leaving.member_id
    if member_id == "":
        # administrative removal by group.instance.id (KIP-345)
        current = group.static_members.get(leaving.group_instance_id or "") \
            if leaving.group_instance_id is not None else None
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        _remove_leaving(shard, group, group.members[current], leaving.reason)
        return ErrorCode.NONE
    if group.drop_pending(member_id):
        log.info("member.left", group=group.group_id, member=member_id, pending=True,
                 reason=leaving.reason)
        pending_gone(shard, group)
        return ErrorCode.NONE
    error = validate_member(group, member_id, leaving.group_instance_id)
    if error is not ErrorCode.NONE:
        return error
    _remove_leaving(shard, group, group.members[member_id], leaving.reason)
    return ErrorCode.NONE


def _remove_leaving(shard: Shard, group: ClassicGroup, member: Member, reason: str | None) -> None:
    log.info("member.left", group=group.group_id, member=member.member_id,
             instance=member.group_instance_id, reason=reason)
    remove_member_and_update(shard, group, member,
                             f"member {member.member_id} left ({reason or 'no reason given'})")
