"""Classic-protocol members of a consumer group: JoinGroup, SyncGroup and Heartbeat served inside it.

Kafka's ``GroupMetadataManager.classicGroupJoinToConsumerGroup``,
``classicGroupSyncToConsumerGroup`` and ``classicGroupHeartbeatToConsumerGroup``: while a group
migrates between the protocols (``consumer_migration.py``), its classic members keep speaking
JoinGroup/SyncGroup/Heartbeat/LeaveGroup and the consumer group serves them:

- **JoinGroup** is a consumer heartbeat with epoch 0 made from the JoinGroup: topics, rack and
  owned partitions from the ConsumerProtocol subscription, the session timeout and protocols kept
  in the member record.  It answers at once: generation = the member's epoch, protocol type
  ``consumer``, the member's first protocol, no leader role and no member list.  Refused with
  INCONSISTENT_GROUP_PROTOCOL when the migration policy is ``disabled``, the protocol type is not
  ``consumer``, or no protocol of the joiner is supported by every classic member already there;
  MEMBER_ID_REQUIRED for a dynamic member without an id (v4+).  The member then has the
  rebalance timeout to send its SyncGroup.
- **SyncGroup** hands out the member's assigned partitions as a ConsumerProtocol Assignment
  (ILLEGAL_GENERATION if the generation is not its epoch; REBALANCE_IN_PROGRESS if the group
  epoch moved on and it is not revoking).
- **Heartbeat** answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch moved
  on, it must revoke partitions, or the partitions it waits for are free; it then has the
  rebalance timeout to rejoin.
- **LeaveGroup** fences the member (``consumer_heartbeat.remove_members``).

A classic member's session is its own JoinGroup session timeout; a member that misses its sync
or rejoin deadline is fenced, as Kafka's join and sync timers do.
"""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING

import structlog

from ...offsets.consumer_protocol import ConsumerProtocolError, decode_subscription
from ...protocol.errors import ErrorCode
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult
from .api import JoinRequest, JoinResult, SyncRequest, SyncResult
from .consumer_group import ConsumerGroup, ConsumerMember, MemberState, Refused
from .consumer_heartbeat import HeartbeatRequest, HeartbeatResult, _heartbeat, arm_session, fence
from .consumer_migration import (
    CONSUMER_PROTOCOL_TYPE,
    classic_metadata,
    classic_protocols,
    encoded_assignment,
    maybe_downgrade,
    to_ids,
)

if TYPE_CHECKING:
    from .shard import Shard
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")

E = ErrorCode


def _join_failed(member_id: str, error: ErrorCode) -> Promise:
    return Promise.resolved(JoinResult.failed(member_id, error))


def classic_join(shard: Shard, coordinator: GroupShards, group: ConsumerGroup, req: JoinRequest) -> Promise:
    """A JoinGroup to a consumer group with members (``classicGroupJoinToConsumerGroup``)."""
    if shard.config.consumer_migration_policy == "disabled":
        log.info("consumer_group.classic_join_refused", group=group.group_id, reason="migration disabled")
        return _join_failed(req.member_id, E.INCONSISTENT_GROUP_PROTOCOL)
    member_id = req.member_id or _new_member_id()
    if member_id not in group.members and len(group.members) >= shard.config.consumer_max_size:
        return _join_failed(member_id, E.GROUP_MAX_SIZE_REACHED)
    if not _supports(group, req.protocol_type, req.protocols):
        return _join_failed(member_id, E.INCONSISTENT_GROUP_PROTOCOL)
    if req.member_id == "" and req.require_known_member_id and req.group_instance_id is None:
        return _join_failed(member_id, E.MEMBER_ID_REQUIRED)
    try:
        subscription = decode_subscription(req.protocols[0][1])
    except ConsumerProtocolError:
        return _join_failed(member_id, E.INCONSISTENT_GROUP_PROTOCOL)
    topics = coordinator.topics
    holder = group.members.get(group.static_members.get(req.group_instance_id or "", ""))
    # a classic static member replacing the last consumer-protocol member downgrades the group
    replaces_consumer = holder is not None and holder.member_id != member_id and holder.classic is None
    same_subscription = holder is not None and set(holder.meta.subscribed_topic_names) == set(subscription.topics)
    hb = HeartbeatRequest(
        group_id=group.group_id, member_id=member_id, member_epoch=0, instance_id=req.group_instance_id,
        rack_id=subscription.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=list(subscription.topics), subscribed_topic_regex="", server_assignor=None,
        owned=to_ids(subscription.owned_partitions, topics), client_id=req.client_id, client_host=req.client_host,
        classic=classic_metadata(req.session_timeout_ms, list(req.protocols)))
    try:
        result, records = _heartbeat(shard, coordinator, topics, hb, group, [])
    except Refused as exc:
        return _join_failed(member_id, exc.error)
    answer = Promise()

    def joined(outcome: HeartbeatResult) -> None:
        if outcome.error is not E.NONE:
            answer.set(JoinResult.failed(member_id, outcome.error))
            return
        downgraded = maybe_downgrade(shard, group, [], topics, rebalance=not same_subscription) \
            if replaces_consumer else None
        if downgraded is not None:  # NONE: a classic group now; else the log refused the conversion
            answer.set(JoinResult(E.NONE, member_id, generation=shard.groups[group.group_id].generation,
                                  protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=req.protocols[0][0])
                       if downgraded is E.NONE else JoinResult.failed(member_id, _write_failed(outcome, downgraded).error))
            return
        member = group.members.get(member_id)
        if member is not None:
            _cancel(member, "join_timer")
            arm_session(shard, group, member)
            _arm_deadline(shard, group, member, "sync_timer", "the member failed to sync within timeout")
        answer.set(JoinResult(E.NONE, member_id, generation=outcome.member_epoch,
                              protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=req.protocols[0][0]))
    shard.run(CoordinatorResult(records, result, _write_failed), replay_now=True).add_done_callback(joined)
    return answer


def _write_failed(_result: HeartbeatResult, error: ErrorCode) -> HeartbeatResult:
    mapped = {E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR}
    return HeartbeatResult.failed(mapped.get(error, E.COORDINATOR_NOT_AVAILABLE))


def _new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 URL-safe base64 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _supports(group: ConsumerGroup, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
    """``ConsumerGroup.supportsClassicProtocols``: type ``consumer`` and a protocol every classic
    member already there supports (any, when there is none)."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return False
    classic = [m for m in group.members.values() if m.classic is not None]
    names = {name for name, _ in protocols}
    return not classic or any(all(name in {n for n, _ in classic_protocols(m)} for m in classic) for name in names)


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """``validateConsumerGroupMember``: by instance id when given (82 if it maps to another id),
    else by member id; only classic members use these APIs (25 otherwise)."""
    if instance_id is not None:
        holder = group.static_members.get(instance_id)
        if holder is None:
            raise Refused(E.UNKNOWN_MEMBER_ID)
        if holder != member_id:
            raise Refused(E.FENCED_INSTANCE_ID)
        member_id = holder
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        raise Refused(E.UNKNOWN_MEMBER_ID)
    return member


def classic_sync(shard: Shard, coordinator: GroupShards, group: ConsumerGroup, req: SyncRequest) -> SyncResult:
    """A SyncGroup of a classic member (``classicGroupSyncToConsumerGroup``): its partitions now."""
    try:
        member = _member(group, req.member_id, req.group_instance_id)
    except Refused as exc:
        return SyncResult.failed(exc.error)
    if req.generation != member.member_epoch:
        return SyncResult.failed(E.ILLEGAL_GENERATION)
    protocols = classic_protocols(member)
    name, metadata = protocols[0]
    if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            req.protocol_name is not None and req.protocol_name != name):
        return SyncResult.failed(E.INCONSISTENT_GROUP_PROTOCOL)
    if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
        _arm_deadline(shard, group, member, "join_timer", "the classic member failed to join within the "
                      "rebalance timeout", if_absent=True)
        return SyncResult.failed(E.REBALANCE_IN_PROGRESS)
    _cancel(member, "sync_timer")
    arm_session(shard, group, member)
    assignment = encoded_assignment(member.assigned, metadata, group, coordinator.topics)
    return SyncResult(E.NONE, req.protocol_type or CONSUMER_PROTOCOL_TYPE, req.protocol_name or name, assignment)


def classic_heartbeat(shard: Shard, group: ConsumerGroup, member_id: str, instance_id: str | None,
                      generation: int) -> ErrorCode:
    """A Heartbeat of a classic member (``classicGroupHeartbeatToConsumerGroup``)."""
    try:
        member = _member(group, member_id, instance_id)
    except Refused as exc:
        return exc.error
    if generation != member.member_epoch:
        return E.ILLEGAL_GENERATION
    arm_session(shard, group, member)
    if member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS or (
            member.state == MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member)):
        _arm_deadline(shard, group, member, "join_timer", "the classic member failed to join within the "
                      "rebalance timeout", if_absent=True)
        return E.REBALANCE_IN_PROGRESS
    return E.NONE


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """``ConsumerGroup.waitingOnUnreleasedPartition``: a target partition it lacks is still held."""
    for topic_id, partitions in group.targets.get(member.member_id, {}).items():
        assigned = member.assigned.get(topic_id, frozenset())
        if any(p not in assigned and (topic_id, p) in group.owners for p in partitions):
            return True
    return False


def _cancel(member: ConsumerMember, attr: str) -> None:
    timer = getattr(member, attr)
    if timer is not None:
        timer.cancel()
        setattr(member, attr, None)


def _arm_deadline(shard: Shard, group: ConsumerGroup, member: ConsumerMember, attr: str, reason: str, *,
                  if_absent: bool = False) -> None:
    """The join or sync deadline (the member's rebalance timeout): fenced when it passes."""
    if getattr(member, attr) is not None:
        if if_absent:
            return
        _cancel(member, attr)

    def fire() -> None:
        setattr(member, attr, None)
        if shard.consumer_groups.get(group.group_id) is group and group.members.get(member.member_id) is member:
            fence(shard, group, member, shard.topics, reason)
    timeout = max(member.meta.rebalance_timeout_ms, 0)
    setattr(member, attr, shard.clock.call_at(shard.clock.now_ms() + timeout, fire))
