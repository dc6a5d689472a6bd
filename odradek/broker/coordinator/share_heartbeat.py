"""ShareGroupHeartbeat (KIP-932): join, heartbeat, leave, fence -- request -> records + answer.

Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` in its order: find or create the group and
the member, check the member's epoch, update its subscription (a change bumps the group epoch),
bump also when partitions finished initializing since the last assignment or the subscribed
topics changed, compute a new target assignment with the ``simple`` assignor over the
*initialized* share-partitions only, bring this member to its target (share groups have no
revocation: a member jumps straight to it), arm its session, and ask for the initialization of
subscribed partitions that have no durable state yet.  The records go as one batch through
``Shard.run`` and change the state when replayed (``share_group.replay_share``).

Share-partition initialization (``GroupCoordinatorService.persisterInitialize``): the heartbeat's
batch lists the new partitions as *initializing* (record 15); once it is durable, the share
coordinator writes a fresh snapshot per partition (state epoch = group epoch, start offset -1:
the data path applies ``share.auto.offset.reset`` on first load); then a second record 15 moves
them to *initialized* -- or, if any failed, out of *initializing*, so a later heartbeat retries.
The next heartbeat sees initialized partitions nobody is assigned and bumps the epoch: a new
group's first member gets its partitions on its second heartbeat, as on Kafka.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from ...offsets.share_group_records import (
    Assignment,
    SGAssignmentKey,
    SGAssignmentValue,
    SGMemberKey,
    SGMemberValue,
    SGMetadataKey,
    SGMetadataValue,
    SGStatePartitionKey,
    SGStatePartitionValue,
    SGTargetMemberKey,
    SGTargetMemberValue,
    SGTargetMetadataKey,
    SGTargetMetadataValue,
    TopicPartitionsInfo,
)
from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ..clock import real_ms
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, ShardStatus
from . import share_assignor
from .consumer_group import TopicsView
from .consumer_heartbeat import HeartbeatResult as ShareHeartbeatResult  # the same answer's fields
from .consumer_heartbeat import Refused, failed_answer, write_failed
from .shard import Shard
from .share_group import ShareGroup, ShareMember

if TYPE_CHECKING:
    from .shards import GroupShards, SharePersister

log = structlog.get_logger("odradek.coordinator")

E = ErrorCode
LEAVE_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36  # KafkaApis.isMemberIdValid


@dataclass
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


def validate(req: ShareHeartbeatRequest) -> None:
    """``throwIfShareGroupHeartbeatRequestIsInvalid`` (INVALID_REQUEST)."""
    def blank(s: str | None) -> bool:
        return s is not None and s.strip() == ""

    if req.member_id is None or blank(req.member_id):
        raise Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
    if req.group_id is None or blank(req.group_id):
        raise Refused(E.INVALID_REQUEST, "GroupId can't be empty.")
    if blank(req.rack_id):
        raise Refused(E.INVALID_REQUEST, "RackId can't be empty.")
    if req.member_epoch == 0 and not req.subscribed_topic_names:
        raise Refused(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    if req.member_epoch < LEAVE_EPOCH:
        raise Refused(E.INVALID_REQUEST, f"MemberEpoch is {req.member_epoch}, but must be greater than or equal "
                      f"to -1.")


# --- the operation ---------------------------------------------------------------------------


def share_heartbeat(coordinator: GroupShards, req: ShareHeartbeatRequest) -> Promise:
    """A promise of a :class:`ShareHeartbeatResult` once the request's records are durable."""
    quiet = _quiet(coordinator, req)
    if quiet is not None:
        return Promise.resolved(quiet)
    try:
        validate(req)
    except Refused as exc:
        return failed_answer(exc.error, exc.message)
    shard, error = coordinator.check(req.group_id, allow_empty=False)
    if error is not E.NONE:
        return failed_answer(error)
    init: dict[uuid.UUID, TopicPartitionsInfo] = {}
    try:
        if req.member_epoch == LEAVE_EPOCH:
            result, records = _leave(shard, req)
        else:
            result, records, init = _heartbeat(shard, coordinator, req)
    except Refused as exc:
        return failed_answer(exc.error, exc.message)
    if not records and req.rack_id is None and req.subscribed_topic_names is None and req.member_epoch > 0:
        group = shard.share_groups[req.group_id]  # nothing to do: so is the next plain heartbeat, until
        group.quiet = (group.group_epoch, group.partitions_version, shard.topics.version())  # something moves
    promise = shard.run(CoordinatorResult(records, result, write_failed), replay_now=True)
    if result.member_epoch >= 0:
        group = shard.share_groups.get(req.group_id)
        member = group.members.get(result.member_id) if group is not None else None
        if member is not None:
            arm_session(shard, group, member)
    if init:
        group = shard.share_groups[req.group_id]
        now = shard.clock.now_ms()
        for tid in init:
            group.initializing_since[tid] = now
        epoch = group.group_epoch
        promise.add_done_callback(lambda r: r.error is E.NONE and initialize_partitions(
            coordinator.share_persister, shard, req.group_id, epoch, init))
    return promise


def _quiet(coordinator: GroupShards, req: ShareHeartbeatRequest) -> ShareHeartbeatResult | None:
    """The common case answered without the general path: a plain heartbeat (no rack, no topics) of
    a member at the group's epoch while nothing moved since a plain heartbeat found nothing to do
    (no record 15 replayed, no topic changed, no partition initializing).  The general path would
    write nothing and answer the same; this skips its work on every heartbeat of every member."""
    if req.rack_id is not None or req.subscribed_topic_names is not None or req.member_epoch <= 0:
        return None
    shard, error = coordinator.check(req.group_id, allow_empty=False)
    group = shard.share_groups.get(req.group_id) if error is E.NONE else None
    if group is None or group.initializing or group.quiet != (group.group_epoch, group.partitions_version,
                                                               shard.topics.version()):
        return None
    member = group.members.get(req.member_id)
    if member is None or member.member_epoch != req.member_epoch or req.member_epoch != group.assignment_epoch \
            or group.assignment_epoch != group.group_epoch or member.meta.client_id != req.client_id \
            or member.meta.client_host != req.client_host:
        return None
    arm_session(shard, group, member)
    interval = shard.group_configs.effective(group.group_id).share_heartbeat_interval_ms
    return ShareHeartbeatResult(E.NONE, None, member.member_id, member.member_epoch, interval, None)


def other_kind(shard: Shard, group_id: str) -> bool:
    """The id holds a classic or consumer group (Kafka keeps one map of groups of every type)."""
    return group_id in shard.consumer_groups or shard.group(group_id) is not None


def _find_group(shard: Shard, req: ShareHeartbeatRequest) -> ShareGroup:
    """``getOrMaybeCreatePersistedShareGroup``: epoch 0 creates it; another kind of group is not found."""
    group = shard.share_groups.get(req.group_id)
    if group is not None:
        return group
    if req.member_epoch != 0:
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
    if other_kind(shard, req.group_id):
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
    return ShareGroup(req.group_id)


def _find_member(group: ShareGroup, req: ShareHeartbeatRequest) -> ShareMember:
    member = group.members.get(req.member_id)
    epoch = req.member_epoch
    if member is None:
        if epoch != 0:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}.")
        return ShareMember(req.member_id)
    if epoch == 0:  # a rejoin keeps the member's state
        return member
    if epoch > member.member_epoch:
        raise Refused(E.FENCED_MEMBER_EPOCH, f"The share group member has a greater member epoch ({epoch}) than "
                      f"the one known by the group coordinator ({member.member_epoch}).")
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise Refused(E.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch ({epoch}) than "
                      f"the one known by the group coordinator ({member.member_epoch}).")
    return member


def _heartbeat(shard: Shard, coordinator: GroupShards, req: ShareHeartbeatRequest
               ) -> tuple[ShareHeartbeatResult, list, dict[uuid.UUID, TopicPartitionsInfo]]:
    config = coordinator.config
    topics = shard.topics
    group = _find_group(shard, req)
    gid = group.group_id
    if req.member_id not in group.members and len(group.members) >= config.share_max_size:
        raise Refused(E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of "
                      f"{config.share_max_size} members.")
    member = _find_member(group, req)
    is_new = req.member_id not in group.members
    records: list = []
    old = member.meta
    meta = SGMemberValue(
        rack_id=req.rack_id if req.rack_id is not None else old.rack_id, client_id=req.client_id,
        client_host=req.client_host,
        subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_names is not None else old.subscribed_topic_names)
    if is_new or meta != old:
        records.append((SGMemberKey(gid, member.member_id), meta))
    subscription_changed = set(meta.subscribed_topic_names) != set(old.subscribed_topic_names)
    bump = subscription_changed
    members = dict(group.members)
    members[member.member_id] = current = replace(member, meta=meta, session_timer=None)
    metadata = _metadata(members, topics)
    if not bump and group.members:
        bump = _initialized_unassigned(group, metadata)
    if bump or group.topics_version != topics.version():
        group.topics_version = topics.version()  # live cache, not state
        if metadata_hash(metadata) != group.metadata_hash:
            bump = True
    group_epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump:
        records.append((SGMetadataKey(gid), SGMetadataValue(group_epoch, metadata_hash(metadata))))
    targets, assignment_epoch = group.targets, group.assignment_epoch
    if group_epoch > assignment_epoch:
        targets = _compute_targets(group, members, metadata)
        for mid, target in targets.items():
            if group.targets.get(mid) != target:
                records.append((SGTargetMemberKey(gid, mid), SGTargetMemberValue(target)))
        assignment_epoch = group_epoch
        records.append((SGTargetMetadataKey(gid), SGTargetMetadataValue(assignment_epoch)))
    subscribed_ids = {metadata[n][0] for n in meta.subscribed_topic_names if n in metadata}
    target = {t: ps for t, ps in targets.get(member.member_id, {}).items() if t in subscribed_ids}
    epoch, previous, assigned = current.member_epoch, current.previous_member_epoch, current.assigned
    if epoch != assignment_epoch:
        epoch, previous, assigned = assignment_epoch, current.member_epoch, target
    elif subscription_changed:
        assigned = target
    if is_new or (epoch, previous, assigned) != (current.member_epoch, current.previous_member_epoch,
                                                 current.assigned):
        records.append((SGAssignmentKey(gid, member.member_id), SGAssignmentValue(
            member_epoch=epoch, previous_member_epoch=previous, assigned=assigned)))
    init = _to_initialize(group, metadata, shard.clock.now_ms(), config.share_initialize_retry_interval_ms)
    if init:
        records.append((SGStatePartitionKey(gid), _with_initializing(group, init)))
    if bump:
        log.info("share_group.epoch", group=gid, epoch=group_epoch, member=member.member_id)
    send = req.member_epoch == 0 or req.subscribed_topic_names is not None or assigned != current.assigned
    interval = shard.group_configs.effective(gid).share_heartbeat_interval_ms
    return (ShareHeartbeatResult(E.NONE, None, member.member_id, epoch, interval, assigned if send else None),
            records, init)


def _initialized_unassigned(group: ShareGroup, metadata: dict[str, tuple[uuid.UUID, int]]) -> bool:
    """Some subscribed topic's initialized partitions differ from what the target assignment
    hands out of it (partitions finished initializing since the last assignment).  Only topics
    that exist as initialized count: a deleted (or re-created) one is the metadata's business."""
    for tid, info in group.initialized.items():
        found = metadata.get(info.topic_name)
        if found is None or found[0] != tid:
            continue
        assigned: set[int] = set()
        for target in group.targets.values():
            assigned |= target.get(tid, frozenset())
        if assigned != {p for p in info.partitions if p < found[1]}:
            return True
    return False


def _metadata(members: dict[str, ShareMember], topics: TopicsView) -> dict[str, tuple[uuid.UUID, int]]:
    """Subscribed topic name -> (id, partition count), for the topics that exist."""
    out = {}
    for name in sorted({n for m in members.values() for n in m.meta.subscribed_topic_names}):
        found = topics.lookup(name)
        if found is not None:
            out[name] = (found[0], found[1])
    return out


def metadata_hash(metadata: dict[str, tuple[uuid.UUID, int]]) -> int:
    """A stable int64 of the subscribed topics' names, ids and partition counts (Kafka computes
    KIP-1101's hash; only a change of it matters: it bumps the group epoch); 0 for none."""
    if not metadata:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name, (tid, n) in sorted(metadata.items()):
        digest.update(f"{name}\0{tid}\0{n}\0".encode())
    return struct.unpack(">q", digest.digest())[0]


def _compute_targets(group: ShareGroup, members: dict[str, ShareMember],
                     metadata: dict[str, tuple[uuid.UUID, int]]) -> dict[str, Assignment]:
    """The ``simple`` assignor over the initialized partitions of the subscribed topics."""
    partitions = {}
    for _name, (tid, n) in metadata.items():
        info = group.initialized.get(tid)
        if info is not None:
            partitions[tid] = frozenset(p for p in info.partitions if p < n)
    subscriptions = {mid: frozenset(metadata[n][0] for n in m.meta.subscribed_topic_names if n in metadata)
                     for mid, m in members.items()}
    try:
        return share_assignor.assign(subscriptions, partitions, group.targets)
    except Exception as exc:  # an assignor bug answers UNKNOWN_SERVER_ERROR, as Kafka's does
        log.error("share_group.assignor_failed", group=group.group_id, error=str(exc))
        raise Refused(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment: {exc}") from None


def _to_initialize(group: ShareGroup, metadata: dict[str, tuple[uuid.UUID, int]], now: int,
                   retry_ms: int) -> dict[uuid.UUID, TopicPartitionsInfo]:
    """Subscribed partitions neither initialized nor initializing (or initializing for too long)."""
    out = {}
    for name, (tid, n) in metadata.items():
        have = set(group.initialized[tid].partitions) if tid in group.initialized else set()
        pending = group.initializing.get(tid)
        if pending is not None and now - group.initializing_since.get(tid, now) < retry_ms:
            have |= pending.partitions
        missing = set(range(n)) - have
        if missing:
            out[tid] = TopicPartitionsInfo(name, frozenset(missing))
    return out


def _with_initializing(group: ShareGroup, init: dict[uuid.UUID, TopicPartitionsInfo]) -> SGStatePartitionValue:
    """Record 15 with ``init`` added to *initializing* (and no longer *deleting*)."""
    value = _copy(group.partitions)
    for tid, info in init.items():
        before = value.initializing.get(tid)
        parts = info.partitions | (before.partitions if before is not None else frozenset())
        value.initializing[tid] = TopicPartitionsInfo(info.topic_name, parts)
        value.deleting.pop(tid, None)
    return value


def _copy(value: SGStatePartitionValue | None) -> SGStatePartitionValue:
    if value is None:
        return SGStatePartitionValue()
    return SGStatePartitionValue(dict(value.initializing), dict(value.initialized), dict(value.deleting))


# --- initialization with the share coordinator -------------------------------------------------


def initialize_partitions(persister: SharePersister | None, shard: Shard, group_id: str, state_epoch: int,
                          init: dict[uuid.UUID, TopicPartitionsInfo]) -> None:
    """InitializeShareGroupState for every partition of ``init``, then record 15: all succeeded ->
    *initialized*; any failed -> out of *initializing* (a later heartbeat asks again)."""
    if persister is None:
        return
    idents = [(group_id, tid, p) for tid, info in init.items() for p in sorted(info.partitions)]
    outcomes: list[ErrorCode] = []

    def done(error: ErrorCode) -> None:
        outcomes.append(error)
        if len(outcomes) == len(idents):
            failed = [e for e in outcomes if e is not E.NONE]
            if failed:
                log.warning("share_group.initialize_failed", group=group_id, error=failed[0].name)
            _finish_initializing(shard, group_id, init, ok=not failed)

    for ident in idents:
        persister.initialize(ident, state_epoch=state_epoch, start_offset=-1).add_done_callback(done)


def _finish_initializing(shard: Shard, group_id: str, init: dict[uuid.UUID, TopicPartitionsInfo], *, ok: bool) -> None:
    group = shard.share_groups.get(group_id)
    if group is None or shard.status is not ShardStatus.ACTIVE:
        return  # deleted meanwhile, or a reset replaced the shard
    value = _copy(group.partitions)
    for tid, info in init.items():
        before = value.initializing.get(tid)
        if before is not None:
            left = before.partitions - info.partitions
            if left:
                value.initializing[tid] = TopicPartitionsInfo(before.topic_name, left)
            else:
                del value.initializing[tid]
        if ok:
            done = value.initialized.get(tid)
            parts = info.partitions | (done.partitions if done is not None else frozenset())
            value.initialized[tid] = TopicPartitionsInfo(info.topic_name, parts)
    shard.run(CoordinatorResult([(SGStatePartitionKey(group_id), value)], None), replay_now=True)


# --- leaving and fencing -----------------------------------------------------------------------


def _leave(shard: Shard, req: ShareHeartbeatRequest) -> tuple[ShareHeartbeatResult, list]:
    """``shareGroupLeave``: the member's records go and the group epoch moves on."""
    group = shard.share_groups.get(req.group_id)
    if group is None:
        why = "is not a share group" if other_kind(shard, req.group_id) else "not found"
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} {why}.")
    member = group.members.get(req.member_id)
    if member is None:
        raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.")
    log.info("share_group.member_left", group=group.group_id, member=member.member_id)
    return (ShareHeartbeatResult(E.NONE, None, member.member_id, LEAVE_EPOCH),
            fence_records(group, [member], shard.topics))


def fence_records(group: ShareGroup, gone: list[ShareMember], topics: TopicsView) -> list:
    """Members removed: their tombstones (current, target, member -- the order replay needs), then
    the group epoch + 1 with the hash of what the others subscribe to."""
    records: list = []
    for m in gone:
        records += [(SGAssignmentKey(group.group_id, m.member_id), None),
                    (SGTargetMemberKey(group.group_id, m.member_id), None),
                    (SGMemberKey(group.group_id, m.member_id), None)]
    left = {mid: m for mid, m in group.members.items() if m not in gone}
    records.append((SGMetadataKey(group.group_id),
                    SGMetadataValue(group.group_epoch + 1, metadata_hash(_metadata(left, topics)))))
    return records


def arm_session(shard: Shard, group: ShareGroup, member: ShareMember) -> None:
    """(Re)start the member's session (the group's ``share.session.timeout.ms``): only the
    deadline moves while a timer is armed before it."""
    timeout = shard.group_configs.effective(group.group_id).share_session_timeout_ms
    member.session_deadline_ms = deadline = shard.clock.now_ms() + timeout
    member.heard_real_ms = real_ms()  # what a sparing advance asks (``spare_active``)
    if member.session_timer is None:
        member.session_timer = shard.clock.call_at(deadline, lambda: _on_session(shard, group, member))


def _on_session(shard: Shard, group: ShareGroup, member: ShareMember) -> None:
    member.session_timer = None
    if shard.share_groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
        return
    if shard.clock.now_ms() < member.session_deadline_ms:
        member.session_timer = shard.clock.call_at(member.session_deadline_ms,
                                                   lambda: _on_session(shard, group, member))
        return
    log.info("share_group.member_fenced", group=group.group_id, member=member.member_id,
             reason="session timeout expired")
    shard.run(CoordinatorResult(fence_records(group, [member], shard.topics), None), replay_now=True)


def on_shard_loaded(shard: Shard) -> None:
    """``onLoaded``: every member of every share group gets a fresh session timer."""
    for group in shard.share_groups.values():
        for member in group.members.values():
            arm_session(shard, group, member)


def unload_shard(shard: Shard) -> None:
    for group in shard.share_groups.values():
        for member in group.members.values():
            if member.session_timer is not None:
                member.session_timer.cancel()
                member.session_timer = None
