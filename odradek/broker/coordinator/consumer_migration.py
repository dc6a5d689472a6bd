"""Online migration of a non-empty group between the protocols (KIP-848, ``group.consumer.migration.policy``).

Kafka's ``GroupMetadataManager.convertToConsumerGroup`` / ``convertToClassicGroup`` with
``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``:

- **Upgrade** (policy ``upgrade`` or ``bidirectional``): the first consumer-protocol heartbeat to a
  classic group with members turns it into a consumer group.  Every classic member becomes a
  member of the consumer group that still speaks the classic protocol (its session timeout and
  JoinGroup protocols kept in the member record's ``ClassicMemberMetadata``), Stable at the
  classic generation with its last assignment as both current and target assignment.  Records:
  the classic group's tombstone, then the members, subscription metadata, group epoch (= the
  generation), targets, target epoch and current assignments.  Refused (GROUP_ID_NOT_FOUND) when
  the policy forbids it, the group's protocol type is not ``consumer``, it has more members than
  ``group.consumer.max.size``, or an assignment cannot be read or carries a custom assignor's user
  data (which would be lost).
- **Downgrade** (policy ``downgrade`` or ``bidirectional``): when consumer-protocol members leave
  or are fenced and only classic members remain (at most ``group.max.size``), the group becomes a
  classic group again: its consumer-group tombstones, then one GroupMetadata record (Stable,
  generation = group epoch, each member's target assignment encoded in the ConsumerProtocol),
  followed by a classic rebalance.

The classic members' requests inside a consumer group are ``consumer_classic.py``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import structlog

from ...offsets.consumer_protocol import (
    Assignment as ProtocolAssignment,
)
from ...offsets.consumer_protocol import (
    ConsumerProtocolError,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from ...offsets.consumer_records import (
    Assignment,
    CGAssignmentKey,
    CGAssignmentValue,
    CGMemberKey,
    CGMemberValue,
    CGPartitionMetadataKey,
    CGPartitionMetadataValue,
    CGTargetMemberKey,
    CGTargetMemberValue,
    CGTargetMetadataKey,
    CGTargetMetadataValue,
)
from ...offsets.records import GroupKey, GroupValue, MemberValue
from ...protocol.errors import ErrorCode
from ..runtime.runtime import CoordinatorResult
from .consumer_admin import group_tombstones
from .consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Refused,
    TopicsView,
    replay_consumer,
    subscription_metadata,
)
from .group import ClassicGroup, Member
from .metadata_hash import epoch_record
from .rebalance import prepare_rebalance, reset_session, retire_group

if TYPE_CHECKING:
    from .shard import Shard

log = structlog.get_logger("odradek.coordinator")

CONSUMER_PROTOCOL_TYPE = "consumer"
UPGRADE_POLICIES = frozenset({"upgrade", "bidirectional"})
DOWNGRADE_POLICIES = frozenset({"downgrade", "bidirectional"})
MAX_ASSIGNMENT_VERSION = 3


def classic_metadata(session_timeout_ms: int, protocols: list[tuple[str, bytes]]) -> dict:
    """``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata`` of a classic member."""
    return {"session_timeout_ms": session_timeout_ms,
            "supported_protocols": [{"name": name, "metadata": bytes(metadata)} for name, metadata in protocols]}


def classic_protocols(member: ConsumerMember) -> list[tuple[str, bytes]]:
    """A classic member's JoinGroup protocols, in its order of preference."""
    return [(p["name"], bytes(p["metadata"])) for p in member.classic["supported_protocols"]]


# --- upgrade ---------------------------------------------------------------------------------------


def upgrade(shard: Shard, classic: ClassicGroup, topics: TopicsView) -> tuple[list, ConsumerGroup]:
    """``convertToConsumerGroup``: the classic group's conversion records and the consumer group
    they make, detached (built by replaying them apart from the shard).  Nothing changes yet: the
    heartbeat goes on from that group and its records follow these in the same batch, so the
    conversion is written with the heartbeat or not at all; once applied, ``upgraded`` retires
    the classic group.  Raises ``Refused``."""
    gid = classic.group_id
    policy = shard.config.consumer_migration_policy
    if policy not in UPGRADE_POLICIES:
        raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group "
                      "because online upgrade is disabled.")
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group "
                      "because the group does not use the consumer embedded protocol.")
    if len(classic.members) > shard.config.consumer_max_size:
        raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group "
                      "because the group size exceeds the consumer group maximum size.")
    generation = classic.generation
    members = {m.member_id: _upgraded_member(classic, m, generation, topics) for m in classic.members.values()}
    metadata = subscription_metadata(members, {}, topics)
    records: list = [(CGMemberKey(gid, mid), m.meta) for mid, m in members.items()]
    if metadata:
        records.append((CGPartitionMetadataKey(gid), CGPartitionMetadataValue(metadata)))
    records.append(epoch_record(gid, generation, metadata, shard.config.consumer_metadata_hash))
    records += [(CGTargetMemberKey(gid, mid), CGTargetMemberValue(m.assigned)) for mid, m in members.items()]
    records.append((CGTargetMetadataKey(gid), CGTargetMetadataValue(generation)))
    records += [(CGAssignmentKey(gid, mid), CGAssignmentValue(
        member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
        assigned=m.assigned, pending_revocation={})) for mid, m in members.items()]
    detached: dict[str, ConsumerGroup] = {}
    for key, value in records:
        replay_consumer(detached, key, value)
    return [(GroupKey(gid), None), *records], detached[gid]


def upgraded(shard: Shard, classic: ClassicGroup) -> ConsumerGroup:
    """The conversion's records are applied (the classic group left the cache as they were
    replayed): its parked JoinGroup/SyncGroup answers get REBALANCE_IN_PROGRESS (those members
    rejoin the new group) and its timers stop.  The live consumer group; the caller arms its
    members' sessions."""
    retire_group(shard, classic, ErrorCode.REBALANCE_IN_PROGRESS)
    group = shard.consumer_groups[classic.group_id]
    log.info("group.converted", group=classic.group_id, to="consumer", members=len(group.members),
             generation=classic.generation)
    return group


def _upgraded_member(classic: ClassicGroup, member: Member, generation: int, topics: TopicsView) -> ConsumerMember:
    """``ConsumerGroup.fromClassicGroup`` for one member: Stable at the generation, its last
    assignment as current and target, its subscription's topics and rack."""
    gid = classic.group_id
    try:
        assigned: Assignment = {}
        if member.assignment:
            decoded = decode_assignment(member.assignment)
            if decoded.user_data:
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer "
                              "group because an unsupported custom assignor is in use. Please refer to the "
                              "documentation or switch to a default assignor before re-attempting the upgrade.")
            assigned = to_ids(decoded.assigned_partitions, topics)
        protocol = classic.protocol_name or (member.protocols[0][0] if member.protocols else None)
        subscription = decode_subscription(member.metadata(protocol))
    except ConsumerProtocolError:
        raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group "
                      "because the embedded consumer protocol is malformed.") from None
    meta = CGMemberValue(
        instance_id=member.group_instance_id, rack_id=subscription.rack_id, client_id=member.client_id,
        client_host=member.client_host, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        subscribed_topic_regex="", rebalance_timeout_ms=member.rebalance_timeout_ms, server_assignor=None,
        classic_member_metadata=classic_metadata(member.session_timeout_ms, list(member.protocols)))
    return ConsumerMember(member.member_id, meta=meta, member_epoch=generation, previous_member_epoch=generation,
                          assigned=assigned)


def to_ids(partitions: list[TopicPartitions], topics: TopicsView) -> Assignment:
    """ConsumerProtocol topic names to topic ids (topics that no longer exist are dropped)."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in partitions:
        found = topics.lookup(tp.topic)
        if found is not None and tp.partitions:
            out[found[0]] = out.get(found[0], frozenset()) | frozenset(tp.partitions)
    return out


def to_names(assignment: Assignment, group: ConsumerGroup, topics: TopicsView) -> list[TopicPartitions]:
    """Topic ids to ConsumerProtocol names (from the group's subscription metadata, else the
    cluster's topics), sorted as Kafka's ``toConsumerProtocolAssignment`` leaves them."""
    names = {md.topic_id: name for name, md in group.subscription_metadata.items()}
    out = []
    for topic_id, partitions in assignment.items():
        name = names.get(topic_id)
        if name is None:
            name = next((n for n in topics.names() if (topics.lookup(n) or (None,))[0] == topic_id), None)
        if name is not None and partitions:
            out.append(TopicPartitions(name, sorted(partitions)))
    return sorted(out, key=lambda tp: tp.topic)


def encoded_assignment(assignment: Assignment, version_of: bytes, group: ConsumerGroup, topics: TopicsView) -> bytes:
    """A member's partitions as a ConsumerProtocol Assignment in the version of its subscription
    (``prepareAssignment``)."""
    try:
        version = decode_subscription(version_of).version
    except ConsumerProtocolError:
        version = 0
    return encode_assignment(ProtocolAssignment(version=min(max(version, 0), MAX_ASSIGNMENT_VERSION),
                                                assigned_partitions=to_names(assignment, group, topics)))


# --- downgrade -------------------------------------------------------------------------------------


def maybe_downgrade(shard: Shard, group: ConsumerGroup, gone: list[ConsumerMember], topics: TopicsView, *,
                    rebalance: bool = True) -> ErrorCode | None:
    """``validateOnlineDowngradeWith{FencedMembers,ReplacedMember}`` then ``convertToClassicGroup``:
    None when the departure of ``gone`` (or a classic static member having replaced the last
    consumer-protocol one: ``gone`` empty) does not turn the group into a classic group; else
    NONE once it did, its records written, with a classic rebalance unless ``rebalance`` is False
    (a replacement with the same subscription), or the write's error when the log refused them
    (the consumer group is then left as it was, its timers running: all or nothing)."""
    remaining = [m for m in group.members.values() if m not in gone]
    if not remaining or any(m.classic is None for m in remaining):
        return None
    gid = group.group_id
    if shard.config.consumer_migration_policy not in DOWNGRADE_POLICIES:
        log.info("group.downgrade_refused", group=gid, reason="online downgrade is disabled")
        return None
    if len(remaining) > shard.config.max_group_size:
        log.info("group.downgrade_refused", group=gid, reason="more members than group.max.size")
        return None
    protocol = _select_protocol(remaining)
    leader = remaining[0].member_id
    values = [_member_value(group, m, protocol, topics) for m in remaining]
    value = GroupValue(protocol_type=CONSUMER_PROTOCOL_TYPE, generation=group.group_epoch, protocol=protocol,
                       leader=leader, current_state_timestamp=shard.clock.now_ms(), members=values)
    members = list(group.members.values())
    written, applied = shard.run_applied(CoordinatorResult(group_tombstones(group) + [(GroupKey(gid), value)], None))
    if not applied:
        log.warning("group.downgrade_failed", group=gid, error=written.result().name)
        return written.result()
    for m in members:  # the replayed tombstones stopped the session and rebalance timers
        for timer in (m.session_timer, m.rebalance_timer, m.join_timer, m.sync_timer):
            if timer is not None:
                timer.cancel()
        m.session_timer = m.rebalance_timer = m.join_timer = m.sync_timer = None
    shard.groups.pop(gid, None)  # a simple group the tombstones left behind gives way to the record's
    shard.reconcile(gid)
    classic = shard.groups[gid]
    log.info("group.converted", group=gid, to="classic", members=len(remaining), generation=group.group_epoch)
    for member in classic.members.values():
        reset_session(shard, classic, member)
    if rebalance:
        prepare_rebalance(shard, classic, f"Downgrade group {gid} from consumer to classic for member leaving.")
    return ErrorCode.NONE


def _select_protocol(members: list[ConsumerMember]) -> str:
    """``ClassicGroup.selectProtocol``: of the protocols every member supports, the one most members
    prefer (each votes for its first such protocol; ties: the first candidate)."""
    lists = [[name for name, _ in classic_protocols(m)] for m in members]
    candidates = [name for name in lists[0] if all(name in names for names in lists[1:])]
    if not candidates:  # cannot happen: a classic member joins only with a protocol all support
        return lists[0][0]
    votes = {name: 0 for name in candidates}
    for names in lists:
        votes[next(n for n in names if n in votes)] += 1
    return max(candidates, key=lambda name: votes[name])


def _member_value(group: ConsumerGroup, member: ConsumerMember, protocol: str, topics: TopicsView) -> MemberValue:
    subscription = dict(classic_protocols(member)).get(protocol, b"")
    return MemberValue(member_id=member.member_id, group_instance_id=member.meta.instance_id,
                       client_id=member.meta.client_id, client_host=member.meta.client_host,
                       rebalance_timeout=member.meta.rebalance_timeout_ms,
                       session_timeout=member.classic["session_timeout_ms"], subscription=subscription,
                       assignment=encoded_assignment(group.targets.get(member.member_id, {}), subscription,
                                                     group, topics))
