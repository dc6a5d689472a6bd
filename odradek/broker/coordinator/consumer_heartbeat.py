"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat, leave, fence -- request -> records + answer.

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` and its helpers, in its order:
validate the request, find or create the group, find or create the member (static members by
instance id), check its epoch, update its subscription, resolve regexes and the subscribed
topics' metadata (a change bumps the group epoch), compute a new target assignment when the
group epoch is ahead of the assignment epoch, reconcile this member towards its target
(``reconcile.py``), arm its timers, answer.  Records are computed from the state before the
request plus local copies, as Kafka does, and written as one batch through ``Shard.run``; they
change the state only when replayed (``consumer_group.replay_consumer``).

Timers run on the shard's clock (``clock.py``), so a test's ``advance`` fires them: the session
timer fences a member not heard from for ``group.consumer.session.timeout.ms``, the rebalance
timer one that keeps partitions it was asked to revoke beyond its rebalance timeout.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from sys import intern
from typing import TYPE_CHECKING, Any

import structlog

from ...offsets.consumer_records import (
    Assignment,
    CGAssignmentKey,
    CGAssignmentValue,
    CGMemberKey,
    CGMemberValue,
    CGMetadataKey,
    CGPartitionMetadataKey,
    CGPartitionMetadataValue,
    CGRegexKey,
    CGRegexValue,
    CGTargetMemberKey,
    CGTargetMemberValue,
    CGTargetMetadataKey,
    CGTargetMetadataValue,
    TopicMetadata,
)
from ...offsets.records import GroupKey
from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ..clock import real_ms
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult
from .assignors import ASSIGNORS, AssignorMember
from .consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Refused,
    TopicsView,
    subscription_metadata,
)
from .consumer_migration import maybe_downgrade, upgrade, upgraded
from .metadata_hash import epoch_record
from .reconcile import FencedMember, reconcile
from .shard import Shard
from .state import GroupState

if TYPE_CHECKING:
    from .group import ClassicGroup
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")

E = ErrorCode
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
MAX_REGEX_LENGTH = 8192  # a longer subscription regex is refused as INVALID_REGULAR_EXPRESSION


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    version: int = 1
    client_id: str = ""
    client_host: str = ""
    # a classic member's JoinGroup (``consumer_classic``): its session timeout and protocols
    classic: dict | None = None


@dataclass
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None

    @classmethod
    def failed(cls, error: ErrorCode, message: str | None = None) -> HeartbeatResult:
        return cls(error, message)


# --- validation (``throwIfConsumerGroupHeartbeatRequestIsInvalid``) --------------------------------


_STABLE = MemberState.STABLE  # a module global: the steady path reads it on every heartbeat


def validate(req: HeartbeatRequest, assignors: tuple[str, ...]) -> None:
    def blank(s: str | None) -> bool:
        return s is not None and s.strip() == ""

    epoch = req.member_epoch
    if (req.version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and (req.member_id is None or blank(req.member_id)):
        raise Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
    if req.group_id is None or blank(req.group_id):
        raise Refused(E.INVALID_REQUEST, "GroupId can't be empty.")
    if blank(req.instance_id):
        raise Refused(E.INVALID_REQUEST, "InstanceId can't be empty.")
    if blank(req.rack_id):
        raise Refused(E.INVALID_REQUEST, "RackId can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise Refused(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:  # present and empty
            raise Refused(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise Refused(E.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must be "
                          "non-null when (re-)joining.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise Refused(E.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise Refused(E.INVALID_REQUEST, f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise Refused(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                      f"Supported assignors: {', '.join(assignors)}.")
    regex = req.subscribed_topic_regex
    if regex:
        compile_regex(regex)


def compile_regex(regex: str) -> Any:
    """A subscription regex, compiled with RE2 -- Kafka evaluates them with RE2/J, a port of RE2's
    syntax and linear-time matching, so a pattern from a client cannot stall the broker's loop --
    through Google's ``google-re2`` bindings.  Without them, Python's ``re`` after refusing what RE2
    lacks (back-references, look-around, atomic groups, conditionals); see
    docs/CONSUMER_PROTOCOL.md for what differs then.  INVALID_REGULAR_EXPRESSION when refused."""
    if len(regex) > MAX_REGEX_LENGTH:
        raise Refused(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex is longer than {MAX_REGEX_LENGTH}.")
    try:
        return _compiled(regex)
    except Exception as exc:  # re2.error / re.error, or the subset check's refusal
        raise Refused(E.INVALID_REGULAR_EXPRESSION,
                      f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}") from None


def _engine_compile(regex: str) -> Any:
    """RE2 (``google-re2``, imported on the first regex subscription: a group that subscribes by
    name never loads it), or a checked ``re`` when the bindings are missing."""
    try:
        import re2  # noqa: PLC0415 - google-re2, only for regex subscriptions
    except ImportError:  # pragma: no cover - the dependency is declared; a checked ``re`` stands in
        if re.search(r"\\[1-9]|\(\?[=!<>(]|\(\?P=", regex):
            raise ValueError("back-references, look-around, atomic groups and conditionals are not RE2") from None
        return re.compile(regex)
    options = re2.Options()
    options.log_errors = False  # a client's bad pattern is answered, not logged by RE2 itself
    return re2.compile(regex, options)


_REGEX_CACHE: dict[str, Any] = {}


def _compiled(regex: str) -> Any:
    pattern = _REGEX_CACHE.get(regex)
    if pattern is None:
        if len(_REGEX_CACHE) > 1024:
            _REGEX_CACHE.clear()
        pattern = _REGEX_CACHE[regex] = _engine_compile(regex)
    return pattern


# --- the operation ---------------------------------------------------------------------------


def consumer_heartbeat(coordinator: GroupShards, topics: TopicsView, req: HeartbeatRequest) -> Promise:
    """A promise of a :class:`HeartbeatResult` once the request's records are durable and replayed."""
    config = coordinator.config
    if not coordinator.consumer_protocol_enabled():
        return failed_answer(E.UNSUPPORTED_VERSION, "The consumer group protocol is not enabled.")
    shard, error = coordinator.check(req.group_id, allow_empty=False)
    if error is E.NONE:  # a steady heartbeat passes every validation by construction (see _steady)
        steady = _steady(shard, topics, req)
        if steady is not None:
            return steady
    try:
        validate(req, config.consumer_assignors)
    except Refused as exc:
        return failed_answer(exc.error, exc.message)
    if error is not E.NONE:
        return failed_answer(error)
    converting = None
    try:
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            result, records = _leave(shard, topics, req)
        else:
            records = []
            group, converting = _find_group(shard, req, records)
            result, records = _heartbeat(shard, coordinator, topics, req, group, records)
    except Refused as exc:  # nothing was written nor changed: a conversion included
        return failed_answer(exc.error, exc.message)
    promise, applied = shard.run_applied(CoordinatorResult(records, result, write_failed))
    if applied:  # the records are applied already (replayed at once)
        if converting is not None:
            group = upgraded(shard, converting)
            group.topics_version = topics.version()
            for member in group.members.values():
                arm_session(shard, group, member)
        _arm(shard, req, result)
    return promise


def _steady(shard: Shard, topics: TopicsView, req: HeartbeatRequest) -> Promise | None:
    """The common case, answered without the general path (see ``steady_member``)."""
    if req.owned is not None or req.rebalance_timeout_ms != -1 or req.subscribed_topic_names is not None \
            or req.subscribed_topic_regex is not None or req.server_assignor is not None or req.rack_id is not None:
        return None
    steady = steady_member(shard, topics, req.group_id, req.member_id, req.member_epoch, req.instance_id,
                           req.client_id, req.client_host)
    return None if steady is None else Promise.resolved(
        HeartbeatResult(E.NONE, None, req.member_id, req.member_epoch, steady.interval_ms, None))


class Steady:
    """A member's steady heartbeat, checked once (``steady_member``): what the next one must match
    (its epoch, client id and host and instance id; the group's stamp, the topics' and group
    configs' versions), the session timeout to re-arm, the interval to answer, and ``answer``, free
    for the caller's encoding of that answer (the handler keeps its wire bytes there).  A member
    keeps it while nothing of it changes: any record of its group moves the group's stamp.  Plain
    slots, compared one by one: a heartbeat allocates nothing and reads one object more than the
    member (a tuple key would be a second object, and one more cache miss in a large group)."""

    __slots__ = ("epoch", "stamp", "topics_version", "configs_version", "client_id", "client_host",
                 "instance_id", "timeout_ms", "interval_ms", "answer")

    def __init__(self, epoch: int, stamp: int, topics_version: int, configs_version: object, client_id: str,
                 client_host: str, instance_id: str | None, timeout_ms: int, interval_ms: int) -> None:
        self.epoch, self.stamp, self.topics_version, self.configs_version = epoch, stamp, topics_version, configs_version
        self.client_id, self.client_host, self.instance_id = client_id, client_host, instance_id
        self.timeout_ms, self.interval_ms = timeout_ms, interval_ms
        self.answer: Any = None


def steady_member(shard: Shard, topics: TopicsView, group_id: str, member_id: str, epoch: int,
                  instance_id: str | None, client_id: str, client_host: str) -> Steady | None:
    """A member Stable at the group's epoch heartbeating with nothing new (the caller checked that
    no other field is set: nothing owned to report, no subscription change) while topics did not
    change: its session re-armed, and its ``Steady`` (the interval to answer; the answer is the
    member's id and epoch), or None for the general path.  The general path would write no record
    and answer the same; this only skips its work, on every poll of every member.  The checks run
    once per member and group stamp (``_check_steady``); after that a heartbeat matches a few slots."""
    group = shard.consumer_groups.get(group_id)
    if group is None:
        return None
    member = group.members.get(member_id)
    if member is None:
        return None
    steady = member.steady
    if steady is None or steady.epoch != epoch or steady.stamp != group.stamp \
            or steady.topics_version != topics.version() or steady.configs_version is not shard.group_configs.version \
            or steady.client_id != client_id or steady.client_host != client_host or steady.instance_id != instance_id:
        steady = _check_steady(shard, topics, group, member, epoch, instance_id, client_id, client_host)
        if steady is not None:
            arm_session(shard, group, member, steady.timeout_ms)  # re-armed earlier if the timeout was lowered
        return steady
    # arm_session's common case, inlined: only the deadline moves while the timer (armed for this
    # timeout, or a longer one when it changed: then the Steady was rebuilt) fires before it
    member.session_deadline_ms = shard.clock.now_ms() + steady.timeout_ms
    member.heard_real_ms = real_ms()
    if member.session_timer is None:
        arm_session(shard, group, member, steady.timeout_ms)
    return steady


def _check_steady(shard: Shard, topics: TopicsView, group: ConsumerGroup, member: ConsumerMember, epoch: int,
                  instance_id: str | None, client_id: str, client_host: str) -> Steady | None:
    """``steady_member``'s conditions, in full; the member's new ``Steady`` when they hold."""
    version = topics.version()
    if member.member_epoch != epoch or member.state != _STABLE or epoch != group.group_epoch \
            or group.assignment_epoch != epoch or group.topics_version != version:
        return None
    meta = member.meta
    if instance_id != meta.instance_id or client_id != meta.client_id or client_host != meta.client_host:
        return None
    configs = shard.group_configs
    config = configs.effective(group.group_id)
    classic = meta.classic_member_metadata  # as arm_session: a classic member keeps its JoinGroup's timeout
    timeout = config.consumer_session_timeout_ms if classic is None else classic["session_timeout_ms"]
    # interned: every member's Steady holds the same few client strings, which stay in the CPU's cache
    steady = member.steady = Steady(epoch, group.stamp, version, configs.version, intern(client_id), intern(client_host),
                                    None if instance_id is None else intern(instance_id), timeout,
                                    config.consumer_heartbeat_interval_ms)
    return steady


def failed_answer(error: ErrorCode, message: str | None = None) -> Promise:
    return Promise.resolved(HeartbeatResult.failed(error, message))


def write_failed(_result: HeartbeatResult, error: ErrorCode) -> HeartbeatResult:
    mapped = {E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
              E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR, E.INVALID_RECORD: E.UNKNOWN_SERVER_ERROR}
    return HeartbeatResult.failed(mapped.get(error, E.COORDINATOR_NOT_AVAILABLE))


def _arm(shard: Shard, req: HeartbeatRequest, result: HeartbeatResult) -> None:
    """Once applied: arm the member's timers (a member that left has none left)."""
    if result.error is E.NONE and result.member_epoch >= 0:
        group = shard.consumer_groups.get(req.group_id)
        member = group.members.get(result.member_id) if group is not None else None
        if member is not None:
            arm_session(shard, group, member)
            arm_rebalance(shard, group, member)


def _find_group(shard: Shard, req: HeartbeatRequest, records: list) -> tuple[ConsumerGroup, ClassicGroup | None]:
    """``getOrMaybeCreateConsumerGroup``: epoch 0 creates it (replacing an empty classic group), or
    converts a classic group with members, as the migration policy allows: then the classic group
    too, and ``records`` starts with the conversion's (the group returned is what they make)."""
    group = shard.consumer_groups.get(req.group_id)
    if group is not None:
        return group, None
    classic = shard.groups.get(req.group_id)
    if req.group_id in shard.share_groups:  # no conversion between share and consumer groups
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
    if req.member_epoch != 0:
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
    if classic is not None and classic.state is not GroupState.DEAD:
        if classic.state is not GroupState.EMPTY:  # online upgrade, as the migration policy allows
            if req.member_id not in classic.members and len(classic.members) >= shard.config.consumer_max_size:
                # Kafka refuses the newcomer after converting and drops both: the group stays classic
                raise Refused(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity "
                              f"of {shard.config.consumer_max_size} members.")
            conversion, group = upgrade(shard, classic, shard.topics)
            records.extend(conversion)
            return group, classic
        if req.group_id in shard.group_records:  # an empty classic group: its record goes first
            records.append((GroupKey(req.group_id), None))
    return ConsumerGroup(req.group_id), None


def _heartbeat(shard: Shard, coordinator: GroupShards, topics: TopicsView, req: HeartbeatRequest,
               group: ConsumerGroup, records: list) -> tuple[HeartbeatResult, list]:
    """The heartbeat of ``req`` to ``group`` (``_find_group``'s), its records after ``records``."""
    config = coordinator.config
    is_new_group = not group.members and req.group_id not in shard.consumer_groups
    member_id = req.member_id or str(uuid.uuid4())
    if req.member_id not in group.members and len(group.members) >= config.consumer_max_size:
        raise Refused(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                      f"{config.consumer_max_size} members.")
    member, replaced = _find_member(shard, group, req, member_id, records)
    old_meta = member.meta
    meta = _updated_meta(old_meta, req)
    bump = is_new_group and group.group_epoch == 0
    if (meta is not old_meta and meta != old_meta) or member.member_id not in group.members:
        records.append((CGMemberKey(group.group_id, member_id), meta))
        if member.member_id not in group.members and not replaced and (meta.subscribed_topic_names or
                                                                         meta.subscribed_topic_regex):
            bump = True
        elif set(meta.subscribed_topic_names) != set(old_meta.subscribed_topic_names) \
                or meta.subscribed_topic_regex != old_meta.subscribed_topic_regex:
            bump = True
    if member.member_id == member_id and meta is old_meta:
        current = member  # a steady heartbeat: nothing of the member changes here (never mutated)
    else:
        current = replace(member, member_id=member_id, meta=meta)
    members = _Members(group.members, current, replaced)  # the group as this request leaves it, built lazily
    # regexes and subscription metadata (refreshed when topics changed or the subscription did)
    regexes, regex_changed = _resolve_regexes(group, member_id, old_meta.subscribed_topic_regex,
                                              meta.subscribed_topic_regex, members, topics, shard.clock.now_ms(),
                                              records)
    bump = bump or regex_changed
    metadata = group.subscription_metadata
    if bump or group.topics_version != topics.version():
        metadata = subscription_metadata(members.all(), regexes, topics)
        if metadata != group.subscription_metadata:
            records.append((CGPartitionMetadataKey(group.group_id), CGPartitionMetadataValue(metadata)))
            bump = True
        group.topics_version = topics.version()  # live cache, not state
    group_epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump:
        records.append(epoch_record(group.group_id, group_epoch, metadata, config.consumer_metadata_hash))
    targets = group.targets
    if replaced is not None:  # the static member's new id inherits the departed one's target
        targets = {mid: t for mid, t in targets.items() if mid != replaced.member_id}
        targets[member_id] = group.targets.get(replaced.member_id, {})
    assignment_epoch = group.assignment_epoch
    if group_epoch > assignment_epoch:
        previous = targets
        targets = _compute_targets(group, members.all(), regexes, metadata, config.consumer_assignors, previous)
        for mid, target in targets.items():
            if previous.get(mid) != target:
                records.append((CGTargetMemberKey(group.group_id, mid), CGTargetMemberValue(target)))
        assignment_epoch = group_epoch
        records.append((CGTargetMetadataKey(group.group_id), CGTargetMetadataValue(assignment_epoch)))
    try:
        nxt = reconcile(current.member_epoch, current.previous_member_epoch, current.state, current.assigned,
                        current.pending_revocation, targets.get(member_id, {}), assignment_epoch, req.owned,
                        lambda t, p: group.owners.get((t, p), member_id) not in (member_id, replaced_id(replaced)))
    except FencedMember:
        raise Refused(E.FENCED_MEMBER_EPOCH, "The consumer group member has a greater member epoch") from None
    changed = (nxt.member_epoch, nxt.previous_member_epoch, nxt.state, nxt.assigned, nxt.pending_revocation) != (
        current.member_epoch, current.previous_member_epoch, current.state, current.assigned,
        current.pending_revocation)
    if changed or member_id not in group.members:
        records.append((CGAssignmentKey(group.group_id, member_id), CGAssignmentValue(
            member_epoch=nxt.member_epoch, previous_member_epoch=nxt.previous_member_epoch, state=nxt.state,
            assigned=nxt.assigned, pending_revocation=nxt.pending_revocation)))
    full = req.rebalance_timeout_ms != -1 and req.owned is not None and (
        req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
    send = req.member_epoch == 0 or full or nxt.assigned != current.assigned
    if records and any(type(k) is CGMetadataKey for k, _ in records):
        log.info("consumer_group.epoch", group=group.group_id, epoch=group_epoch, member=member_id)
    interval = shard.group_configs.effective(group.group_id).consumer_heartbeat_interval_ms
    return HeartbeatResult(E.NONE, None, member_id, nxt.member_epoch, interval,
                           nxt.assigned if send else None), records


def replaced_id(member: ConsumerMember | None) -> str | None:
    return None if member is None else member.member_id


def _find_member(shard: Shard, group: ConsumerGroup, req: HeartbeatRequest, member_id: str,
                 records: list) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The member this request speaks for, and the static member it replaces (if any).

    A static member replacing its departed self (epoch -2) inherits its state; its old id's
    records are tombstoned first (``ConsumerGroupMember`` replacement in Kafka).
    """
    epoch = req.member_epoch
    if req.instance_id is not None:
        holder_id = group.static_members.get(req.instance_id)
        holder = group.members.get(holder_id) if holder_id is not None else None
        if epoch == 0:
            if holder is None or holder.member_id == member_id:
                return _dynamic(group, req, member_id), None
            if holder.member_epoch != STATIC_LEAVE_EPOCH and req.classic is None:  # a classic joiner replaces
                raise Refused(E.UNRELEASED_INSTANCE_ID, f"Static member {req.instance_id} is already in use by "
                              f"member {holder.member_id}.")
            records.extend(_tombstones(group.group_id, holder.member_id))
            new = replace(holder, member_id=member_id, member_epoch=0, previous_member_epoch=0,
                          session_timer=None, rebalance_timer=None, join_timer=None, sync_timer=None)
            records.append((CGTargetMemberKey(group.group_id, member_id),
                            CGTargetMemberValue(group.targets.get(holder.member_id, {}))))
            return new, holder
        if holder is None:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if holder.member_id != member_id:
            raise Refused(E.FENCED_INSTANCE_ID, f"Instance id {req.instance_id} now belongs to another member.")
        _check_epoch(holder, req)
        return holder, None
    return _dynamic(group, req, member_id), None


def _dynamic(group: ConsumerGroup, req: HeartbeatRequest, member_id: str) -> ConsumerMember:
    member = group.members.get(member_id)
    if member is None:
        if req.member_epoch != 0:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
        return ConsumerMember(member_id)
    _check_epoch(member, req)
    return member


def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
    """``throwIfMemberEpochIsInvalid`` (Kafka 4.2: epoch 0 from a known member is a rejoin that passes)."""
    epoch = req.member_epoch
    if epoch == 0:
        return
    if epoch > member.member_epoch:
        raise Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch ({epoch}) "
                      f"than the one known by the group coordinator ({member.member_epoch}).")
    if epoch < member.member_epoch:
        owned = req.owned
        if epoch != member.previous_member_epoch or owned is None or not _subset(owned, member.assigned):
            raise Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch ({epoch}) "
                          f"than the one known by the group coordinator ({member.member_epoch}).")


def _subset(owned: Assignment, assigned: Assignment) -> bool:
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _updated_meta(meta: CGMemberValue, req: HeartbeatRequest) -> CGMemberValue:
    """Every non-null field of the request, plus the client id and host of its connection (the same
    object when nothing differs: the steady state)."""
    if (req.instance_id is None and req.rack_id is None and req.subscribed_topic_names is None
            and req.subscribed_topic_regex is None and req.rebalance_timeout_ms == -1
            and req.server_assignor is None and req.client_id == meta.client_id
            and req.client_host == meta.client_host and req.classic is None):
        return meta
    return CGMemberValue(
        instance_id=req.instance_id if req.instance_id is not None else meta.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else meta.rack_id,
        client_id=req.client_id, client_host=req.client_host,
        subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_names is not None else meta.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex if req.subscribed_topic_regex is not None
        else meta.subscribed_topic_regex,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
        else meta.rebalance_timeout_ms,
        server_assignor=req.server_assignor if req.server_assignor is not None else meta.server_assignor,
        classic_member_metadata=req.classic if req.classic is not None else meta.classic_member_metadata)


class _Members:
    """The group's members as this request leaves them (the heartbeating one updated, a replaced
    static member gone), copied only when the whole group is needed: a steady heartbeat of a
    large group must not cost a pass over its members."""

    def __init__(self, members: dict[str, ConsumerMember], current: ConsumerMember,
                 replaced: ConsumerMember | None) -> None:
        self.members, self.current, self.replaced = members, current, replaced
        self._all: dict[str, ConsumerMember] | None = None

    def all(self) -> dict[str, ConsumerMember]:
        if self._all is None:
            out = dict(self.members)
            if self.replaced is not None:
                out.pop(self.replaced.member_id, None)
            out[self.current.member_id] = self.current
            self._all = out
        return self._all


def _resolve_regexes(group: ConsumerGroup, member_id: str, old_regex: str | None, new_regex: str | None,
                     members: _Members, topics: TopicsView, now: int,
                     records: list) -> tuple[dict[str, CGRegexValue], bool]:
    """The group's regexes after this request, resolved synchronously over every topic name, with
    records for the changes: a regex that lost its last subscriber goes, a new one is resolved, and
    all are re-resolved when topics changed.  True when a resolution changed some member's topics."""
    if not group.regexes and not new_regex:
        return group.regexes, False
    regexes = dict(group.regexes)
    if old_regex and old_regex != new_regex and old_regex in regexes and not any(
            m.meta.subscribed_topic_regex == old_regex for m in members.all().values()):
        del regexes[old_regex]
        records.append((CGRegexKey(group.group_id, old_regex), None))
    wanted = set(regexes) | ({new_regex} if new_regex else set())
    version = topics.version()
    changed = False
    names = None
    for regex in sorted(wanted):
        old = regexes.get(regex)
        if old is not None and old.version == version:
            continue
        if names is None:
            names = sorted(topics.names())
        pattern = _compiled(regex)
        value = CGRegexValue(tuple(n for n in names if pattern.fullmatch(n)), version, now)
        regexes[regex] = value
        records.append((CGRegexKey(group.group_id, regex), value))
        if old is None or set(old.topics) != set(value.topics):
            changed = True
    return regexes, changed


def _compute_targets(group: ConsumerGroup, members: dict[str, ConsumerMember], regexes: dict[str, CGRegexValue],
                     metadata: dict[str, TopicMetadata], assignors: tuple[str, ...],
                     previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """``TargetAssignmentBuilder``: the assignor over the members' subscribed topic ids."""
    votes: dict[str, int] = {}
    for m in members.values():
        if m.meta.server_assignor:
            votes[m.meta.server_assignor] = votes.get(m.meta.server_assignor, 0) + 1
    name = max(votes, key=lambda k: votes[k]) if votes else assignors[0]
    inputs = []
    for m in sorted(members.values(), key=lambda m: m.member_id):
        names = set(m.meta.subscribed_topic_names)
        if m.meta.subscribed_topic_regex in regexes:
            names.update(regexes[m.meta.subscribed_topic_regex].topics)
        inputs.append(AssignorMember(m.member_id, frozenset(metadata[n].topic_id for n in names if n in metadata),
                                     m.meta.instance_id))
    partitions = {t.topic_id: t.num_partitions for t in metadata.values()}
    try:
        return ASSIGNORS[name](inputs, partitions, previous)
    except Exception as exc:  # an assignor bug answers UNKNOWN_SERVER_ERROR, as Kafka's does
        log.error("consumer_group.assignor_failed", group=group.group_id, assignor=name, error=str(exc))
        raise Refused(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment: {exc}") from None


def _tombstones(group_id: str, member_id: str) -> list:
    """A member's three tombstones, in the order replay needs (``GroupMetadataManager.removeMember``)."""
    return [(CGAssignmentKey(group_id, member_id), None), (CGTargetMemberKey(group_id, member_id), None),
            (CGMemberKey(group_id, member_id), None)]


# --- leaving and fencing -----------------------------------------------------------------------


def _leave(shard: Shard, topics: TopicsView, req: HeartbeatRequest) -> tuple[HeartbeatResult, list]:
    """``consumerGroupLeave``: -1 fences the member, -2 (static) keeps its assignment reserved."""
    group = shard.consumer_groups.get(req.group_id)
    if group is None:
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
    if req.instance_id is not None:
        holder_id = group.static_members.get(req.instance_id)
        if holder_id is None:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if holder_id != req.member_id:
            raise Refused(E.FENCED_INSTANCE_ID, f"Instance id {req.instance_id} now belongs to another member.")
        member = group.members[holder_id]
    else:
        member = group.members.get(req.member_id)
        if member is None:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.")
    if req.member_epoch == STATIC_LEAVE_EPOCH:
        log.info("consumer_group.static_leave", group=group.group_id, member=member.member_id)
        record = (CGAssignmentKey(group.group_id, member.member_id), CGAssignmentValue(
            member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=member.member_epoch, state=member.state,
            assigned=member.assigned, pending_revocation={}))
        return HeartbeatResult(E.NONE, None, member.member_id, STATIC_LEAVE_EPOCH), [record]
    log.info("consumer_group.member_left", group=group.group_id, member=member.member_id)
    result = HeartbeatResult(E.NONE, None, member.member_id, LEAVE_EPOCH)
    downgraded = maybe_downgrade(shard, group, [member], topics)  # the last consumer-protocol member left
    if downgraded is not None:
        if downgraded is not E.NONE:  # the log refused it: nothing changed
            raise Refused(write_failed(result, downgraded).error)
        return result, []
    return result, fence_records(group, [member], topics, shard.config.consumer_metadata_hash)


def fence_records(group: ConsumerGroup, gone: list[ConsumerMember], topics: TopicsView,
                  with_hash: bool = True) -> list:
    """Members removed: their tombstones, regexes losing their last subscriber, new metadata, epoch + 1."""
    records: list = []
    for m in gone:
        records.extend(_tombstones(group.group_id, m.member_id))
    left = {mid: m for mid, m in group.members.items() if m not in gone}
    still = {m.meta.subscribed_topic_regex for m in left.values() if m.meta.subscribed_topic_regex}
    regexes = {}
    for regex, value in group.regexes.items():
        if regex in still:
            regexes[regex] = value
        else:
            records.append((CGRegexKey(group.group_id, regex), None))
    metadata = subscription_metadata(left, regexes, topics)
    if metadata != group.subscription_metadata:
        records.append((CGPartitionMetadataKey(group.group_id), CGPartitionMetadataValue(metadata)))
    records.append(epoch_record(group.group_id, group.group_epoch + 1, metadata, with_hash))
    return records


# --- timers -----------------------------------------------------------------------------------


def fence(shard: Shard, group: ConsumerGroup, member: ConsumerMember, topics: TopicsView, reason: str) -> Promise:
    """Remove a member that timed out (or an admin removed), in one batch."""
    log.info("consumer_group.member_fenced", group=group.group_id, member=member.member_id, reason=reason)
    if maybe_downgrade(shard, group, [member], topics) is not None:
        return Promise.resolved(None)
    return shard.run(CoordinatorResult(fence_records(group, [member], topics, shard.config.consumer_metadata_hash), None), replay_now=True)


def arm_session(shard: Shard, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int | None = None) -> None:
    """(Re)start the member's session: only the deadline moves while a timer is armed before it
    (one armed after it, when the group's consumer.session.timeout.ms was lowered, is re-armed)."""
    if timeout_ms is None:
        classic = member.meta.classic_member_metadata  # a classic member keeps its JoinGroup's timeout
        timeout_ms = (shard.group_configs.effective(group.group_id).consumer_session_timeout_ms if classic is None
                      else classic["session_timeout_ms"])
    timeout = timeout_ms
    deadline = shard.clock.now_ms() + timeout
    member.session_deadline_ms = deadline
    member.heard_real_ms = real_ms()  # what a sparing advance asks (``spare_active``)
    timer = member.session_timer
    if timer is not None:
        if deadline >= member.session_timer_ms:
            return
        timer.cancel()
    member.session_timer_ms = deadline
    member.session_timer = shard.clock.call_at(deadline, lambda: _on_session(shard, group, member))


def _on_session(shard: Shard, group: ConsumerGroup, member: ConsumerMember) -> None:
    member.session_timer = None
    if shard.consumer_groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
        return
    if shard.clock.now_ms() < member.session_deadline_ms:
        member.session_timer_ms = member.session_deadline_ms
        member.session_timer = shard.clock.call_at(member.session_deadline_ms,
                                                   lambda: _on_session(shard, group, member))
        return
    fence(shard, group, member, shard_topics(shard), "session timeout expired")


def arm_rebalance(shard: Shard, group: ConsumerGroup, member: ConsumerMember) -> None:
    """A member entering UNREVOKED_PARTITIONS must revoke within its rebalance timeout; leaving it cancels."""
    timer = member.rebalance_timer
    if member.state != MemberState.UNREVOKED_PARTITIONS or member.classic is not None:  # classic: join/sync timers
        if timer is not None:
            timer.cancel()
            member.rebalance_timer = None
        return
    if timer is not None:
        return
    epoch = member.member_epoch
    timeout = max(member.meta.rebalance_timeout_ms, 0)

    def fire() -> None:
        member.rebalance_timer = None
        if shard.consumer_groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        if member.state == MemberState.UNREVOKED_PARTITIONS and member.member_epoch == epoch:
            fence(shard, group, member, shard_topics(shard), "rebalance timeout expired")
    member.rebalance_timer = shard.clock.call_at(shard.clock.now_ms() + timeout, fire)


def shard_topics(shard: Shard) -> TopicsView:
    return shard.topics


def on_shard_loaded(shard: Shard) -> None:
    """``onLoaded``: every member of every consumer group gets a fresh session (and rebalance) timer."""
    for group in shard.consumer_groups.values():
        for member in group.members.values():
            arm_session(shard, group, member)
            arm_rebalance(shard, group, member)


def unload_shard(shard: Shard) -> None:
    for group in shard.consumer_groups.values():
        for member in group.members.values():
            for timer in (member.session_timer, member.rebalance_timer, member.join_timer, member.sync_timer):
                if timer is not None:
                    timer.cancel()
            member.session_timer = member.rebalance_timer = member.join_timer = member.sync_timer = None



def remove_members(shard: Shard, group: ConsumerGroup, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
    """LeaveGroup (the classic API, admin "remove members") on a consumer group: each member by id,
    or by instance id with an empty member id, is fenced (``GroupMetadataManager.classicGroupLeave``
    for consumer groups); UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID per member otherwise."""
    errors, gone = [], []
    for member_id, instance_id in leaving:
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            if member_id and member_id != holder:
                errors.append(E.FENCED_INSTANCE_ID)
                continue
            member_id = holder
        member = group.members.get(member_id)
        if member is None:
            errors.append(E.UNKNOWN_MEMBER_ID)
            continue
        errors.append(E.NONE)
        if member not in gone:
            gone.append(member)
    if gone:
        log.info("consumer_group.members_removed", group=group.group_id, members=[m.member_id for m in gone])
        if maybe_downgrade(shard, group, gone, shard.topics) is None:
            shard.run(CoordinatorResult(fence_records(group, gone, shard.topics, shard.config.consumer_metadata_hash), None), replay_now=True)
    return errors
