"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, deleted topics (Kafka's ``GroupCoordinator.handleCommitOffsets``, ``handleFetchOffsets``, ``handleDeleteOffsets``).

Sans-I/O, like the rest of the coordinator: each operation validates against
the shard's in-memory state and turns what it accepts into records and an
answer (a ``CoordinatorResult``); ``Shard.run`` writes the records as **one
batch** and the answer is delivered through a ``Promise`` that completes
only once the batch is durable and replayed.  The
shard's persisted view (``shard.offsets``) is the only copy of committed
offsets, so what OffsetFetch returns is exactly what a reload would rebuild.

Topic existence is not the coordinator's knowledge: callers pass a
``partition_count(topic) -> int | None`` accessor (the data plane's), used
for the request-level UNKNOWN_TOPIC_OR_PARTITION filtering Kafka does before
the coordinator sees a request (``KafkaApis.handleOffsetCommitRequest``).

``remove_offsets`` is Kafka's ``cleanupGroupMetadata``: the one routine that
drops offsets (OffsetDelete, expiry, deleted topics) and kills groups that
end up Empty with no offsets, so the three paths cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from ...offsets.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from ...offsets.records import GroupKey, OffsetKey, encode_commits, offset_key, offset_value
from ...protocol.errors import ErrorCode
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, ShardStatus
from .consumer_admin import delete_consumer_offsets
from .consumer_group import validate_consumer_commit
from .group import ClassicGroup, validate_member
from .rebalance import reset_session
from .shard import Record, Shard, TopicPartition
from .state import GroupState

if TYPE_CHECKING:
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")

PartitionCount = Callable[[str], "int | None"]
_NO_TOPIC = object()

_E = ErrorCode
# storage errors as an OffsetCommit answers them (``GroupMetadataManager.storeOffsets``)
_COMMIT_WRITE_ERRORS = {
    _E.UNKNOWN_TOPIC_OR_PARTITION: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_LEADER_OR_FOLLOWER: _E.NOT_COORDINATOR,
    _E.KAFKA_STORAGE_ERROR: _E.NOT_COORDINATOR,
    _E.MESSAGE_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
    _E.RECORD_LIST_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
    _E.INVALID_FETCH_SIZE: _E.INVALID_COMMIT_OFFSET_SIZE,
    _E.NETWORK_EXCEPTION: _E.COORDINATOR_LOAD_IN_PROGRESS,
    _E.INVALID_RECORD: _E.INVALID_COMMIT_OFFSET_SIZE,  # ours: a value too long for its length prefix
}


class PartitionCommit(NamedTuple):
    """One partition of an OffsetCommit request, version differences already folded in.

    The hot path (the handler) passes plain tuples of these six fields, in
    this order: building a NamedTuple costs a Python-level call per partition.
    """

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1  # -1: none (before v6, or the client did not know)
    metadata: str | None = ""  # None is stored as ""
    commit_timestamp: int = -1  # v1 only; -1: the broker's clock


class CommitRequest(NamedTuple):
    """The group-level fields of an OffsetCommit request."""

    group_id: str | None
    generation: int = -1  # v0 has none: a simple commit
    member_id: str = ""
    group_instance_id: str | None = None
    retention_ms: int = -1  # v2-v4; -1: the broker's KIP-211 rules
    version: int = 9


class FetchedOffset(NamedTuple):
    """One partition of an OffsetFetch answer."""

    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


# --- topic existence ---------------------------------------------------------------------------

def partition_exists(partition_count: PartitionCount, cache: dict[str, int | None],
                     topic: str, partition: int) -> bool:
    """Whether ``topic``-``partition`` exists, asking the accessor once per topic per request."""
    if topic in cache:
        count = cache[topic]
    else:
        count = cache[topic] = partition_count(topic)
    return count is not None and 0 <= partition < count


def metadata_length(metadata: str) -> int:
    """Java's ``String.length()`` (UTF-16 code units), which is what Kafka compares (``validateOffsetMetadataLength``)."""
    return len(metadata) + sum(1 for c in metadata if c > "\uffff")


def metadata_too_large(metadata: str | None, limit: int) -> bool:
    """``offset.metadata.max.bytes`` check; null metadata is stored as "" and always fits."""
    if metadata is None:
        return False
    n = len(metadata)
    if n > limit:
        return True
    return 2 * n > limit and metadata_length(metadata) > limit  # only non-BMP text can tip it


# --- OffsetCommit --------------------------------------------------------------------------------

CommitRow = tuple  # (partition, offset, leader_epoch, metadata, commit_timestamp): a PartitionCommit under its topic
_ROW_PARTITION, _ROW_METADATA = itemgetter(0), itemgetter(3)


def commit_offsets(coordinator: GroupShards, request: CommitRequest, partitions: list[PartitionCommit],
                   partition_count: PartitionCount) -> Promise:
    """Validate, write one batch, answer once durable (``handleCommitOffsets``).

    The promise yields one ErrorCode per entry of ``partitions``, in order.
    :func:`commit_topic_offsets` with the partitions under their topics.
    """
    topics: list[tuple[str, list[CommitRow]]] = []
    last: object = _NO_TOPIC
    rows: list[CommitRow] = []
    for p in partitions:
        if p[0] != last:
            last = p[0]
            rows = []
            topics.append((last, rows))
        rows.append(p[1:])
    return commit_topic_offsets(coordinator, request, topics, partition_count)


def commit_topic_offsets(coordinator: GroupShards, request: CommitRequest,
                         topics: list[tuple[str, list[CommitRow]]], partition_count: PartitionCount) -> Promise:
    """:func:`commit_offsets` of ``[(topic, [(partition, offset, leader_epoch, metadata,
    commit_timestamp)])]``, as the request lists them (the handler reads a topic's rows with one
    ``itemgetter`` in C); the promise yields one ErrorCode per row, in order.

    The usual commit (every partition exists, no metadata near the bound) is checked topic by
    topic in C (``_plain``); anything else is screened row by row (``_screen``), with Kafka's
    order of errors: an unknown partition, then the group's error, then metadata too large.
    """
    errors = [ErrorCode.NONE] * sum([len(rows) for _topic, rows in topics])
    if not errors:
        return Promise.resolved(errors)
    max_metadata = coordinator.config.offset_metadata_max_bytes
    cache: dict[str, int | None] = {}  # the accessor is asked once per topic per request
    too_large: list[int] = []
    if not _plain(topics, partition_count, cache, max_metadata):
        topics = _screen(topics, partition_count, cache, max_metadata, errors, too_large)
        if not topics and not too_large:
            return Promise.resolved(errors)  # Kafka answers without asking the coordinator
    shard, error = coordinator.check(request.group_id, allow_empty=True)
    if error is ErrorCode.NONE:
        error = validate_commit(shard, request)
    none = ErrorCode.NONE
    if error is not none:
        return Promise.resolved([error if e is none else e for e in errors])
    for i in too_large:
        errors[i] = ErrorCode.OFFSET_METADATA_TOO_LARGE
    return _store(shard, request, topics, errors)


def _count(partition_count: PartitionCount, cache: dict[str, int | None], topic: str) -> int | None:
    return cache[topic] if topic in cache else cache.setdefault(topic, partition_count(topic))


def _plain(topics: list[tuple[str, list[CommitRow]]], partition_count: PartitionCount,
           cache: dict[str, int | None], max_metadata: int) -> bool:
    """Every partition exists and no metadata needs a closer look: the usual commit, in C per topic.

    ``2 * len`` bounds metadata's UTF-16 length, so only metadata longer than half the bound
    is measured (``metadata_too_large``)."""
    half = max_metadata // 2
    for topic, rows in topics:
        if not rows:
            continue
        count = _count(partition_count, cache, topic)
        if count is None or min(map(_ROW_PARTITION, rows)) < 0 or max(map(_ROW_PARTITION, rows)) >= count:
            return False
        if max(map(len, filter(None, map(_ROW_METADATA, rows))), default=0) > half:
            return False
    return True


def _screen(topics: list[tuple[str, list[CommitRow]]], partition_count: PartitionCount,
            cache: dict[str, int | None], max_metadata: int, errors: list[ErrorCode],
            too_large: list[int]) -> list[tuple[str, list[CommitRow]]]:
    """The rows that can be written, under their topics; an unknown partition's error goes into
    ``errors`` and the index of metadata too large into ``too_large`` (the group is checked first)."""
    kept = []
    i = 0
    for topic, rows in topics:
        count = _count(partition_count, cache, topic) if rows else None
        ok = []
        for row in rows:
            metadata = row[3]
            if count is None or not 0 <= row[0] < count:
                errors[i] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata is not None and metadata_too_large(metadata, max_metadata):
                too_large.append(i)
            else:
                ok.append(row)
            i += 1
        if ok:
            kept.append((topic, ok))
    return kept


def validate_commit(shard: Shard, request: CommitRequest) -> ErrorCode:
    """Kafka's checks of a commit against its group (``GroupCoordinator.handleCommitOffsets``), in its order; resets the member's session when it accepts.

    An absent group with generation < 0 passes: the caller creates a simple
    group once it has something to write.
    """
    if shard.consumer_groups and request.group_id in shard.consumer_groups:
        return validate_consumer_commit(shard.consumer_groups[request.group_id], request.member_id,
                                        request.generation, request.version)
    if shard.share_groups and request.group_id in shard.share_groups:
        return ErrorCode.GROUP_ID_NOT_FOUND  # ShareGroup.validateOffsetCommit: no offsets for share groups
    group = shard.groups.get(request.group_id)
    generation = request.generation
    if group is None:
        if generation < 0:
            return ErrorCode.NONE
        return ErrorCode.GROUP_ID_NOT_FOUND if request.version >= 9 else ErrorCode.ILLEGAL_GENERATION
    state = group.state
    if state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and state is GroupState.EMPTY:
        return ErrorCode.NONE  # admin tools and manually assigned consumers
    if generation >= 0 or request.member_id or request.group_instance_id is not None:
        error = validate_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
    elif state is not GroupState.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS  # it has the new generation but has not synced
    if state is GroupState.STABLE or state is GroupState.PREPARING_REBALANCE:
        member = group.members.get(request.member_id)
        if member is not None:
            reset_session(shard, group, member)
    return ErrorCode.NONE


def _store(shard: Shard, request: CommitRequest, topics: list[tuple[str, list[CommitRow]]],
           errors: list[ErrorCode]) -> Promise:
    """Build the records (``GroupMetadataManager.storeOffsets``) and run them as one batch; the answer is ``errors``.

    A group the commit names that does not exist yet (a simple group) is
    created by the replay of its first offset.
    """
    now = shard.clock.now_ms()
    expire = now + request.retention_ms if request.retention_ms != -1 else -1
    group_id = request.group_id
    records = None if shard.config.emulates_value_versions else encode_commits(group_id, topics, now, expire)
    if records is None:  # written in an older release's versions, or not encodable (the write says so)
        records = [(offset_key(group_id, topic, partition),
                    offset_value(offset, epoch, metadata or "", now if timestamp == -1 else timestamp, expire))
                   for topic, rows in topics for partition, offset, epoch, metadata, timestamp in rows]
    return shard.run(CoordinatorResult(records, errors, _commit_failed), now)


def _commit_failed(errors: list[ErrorCode], error: ErrorCode) -> list[ErrorCode]:
    """The write failed: every written partition (those still without an error) answers it, mapped."""
    mapped = _COMMIT_WRITE_ERRORS.get(error, error)
    none = ErrorCode.NONE
    return [mapped if e is none else e for e in errors]


# --- OffsetFetch ----------------------------------------------------------------------------------

def fetch_offsets(coordinator: GroupShards, group_id: str | None, topics: list[tuple[str, list[int]]] | None,
                  require_stable: bool = False) -> tuple[ErrorCode, list[FetchedOffset]]:
    """OffsetFetch (``GroupMetadataManager.getOffsets``): (group-level error, partitions).  ``topics`` None: every committed partition.

    The group's state does not matter; an absent group just has no offsets.
    With ``require_stable`` a partition whose commit is still in flight
    answers UNSTABLE_OFFSET_COMMIT instead of a value that may change.
    """
    error, rows = fetch_offset_rows(coordinator, group_id, topics, require_stable, _as_tuple)
    return error, [tuple.__new__(FetchedOffset, (topic, *fields)) for topic, _n, out in rows for fields in out]


def _as_tuple(ap: Callable[[Any], None], *fields: Any) -> None:
    ap(fields)


Row = Callable[..., None]  # row(ap, partition, offset, leader_epoch, metadata, error)


def validate_consumer_fetch(coordinator: GroupShards, group_id: str, member_id: str | None, epoch: int) -> ErrorCode:
    """OffsetFetch v9 on a consumer group (``ConsumerGroup.validateOffsetFetch``): the member must
    exist (UNKNOWN_MEMBER_ID) with that epoch (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a classic
    member); other groups are not checked."""
    shard, error = coordinator.check(group_id, allow_empty=True)
    group = shard.consumer_groups.get(group_id) if error is ErrorCode.NONE else None
    if group is None:
        return ErrorCode.NONE
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member.member_epoch == epoch:
        return ErrorCode.NONE
    return ErrorCode.STALE_MEMBER_EPOCH if member.classic is None else ErrorCode.ILLEGAL_GENERATION


def fetch_offset_rows(coordinator: GroupShards, group_id: str | None,
                      topics: list[tuple[str, list[int]]] | None, require_stable: bool,
                      row: Row) -> tuple[ErrorCode, list[tuple[str, int, list]]]:
    """:func:`fetch_offsets` as ``(error, [(topic, count, parts)])``: each partition handed to
    ``row(parts.append, partition, offset, leader_epoch, metadata, error)`` under its topic, in
    first-seen order.  With the response's generated row writer as ``row`` the parts are its
    bytes: a fetch of 10,000 partitions makes no object per partition.
    """
    shard, error = coordinator.check(group_id, allow_empty=True)
    if error is not ErrorCode.NONE:
        return error, []
    if shard.share_groups and group_id in shard.share_groups:
        return ErrorCode.GROUP_ID_NOT_FOUND, []  # ShareGroup.validateOffsetFetch
    committed = shard.offsets.get(group_id) or {}
    pending = shard.pending_offsets(group_id) if require_stable else None
    if topics is None:
        every: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            every.setdefault(topic, []).append(partition)
        topics = list(every.items())
    by_topic: dict[str, tuple[list[int], list]] = {}
    none, unstable = ErrorCode.NONE, ErrorCode.UNSTABLE_OFFSET_COMMIT
    get = committed.get
    for topic, indexes in topics:  # 10,000 partitions is a real request: keep this loop lean
        entry = by_topic.get(topic)
        if entry is None:
            entry = by_topic[topic] = ([0], [])
        entry[0][0] += len(indexes)
        ap = entry[1].append
        for partition in indexes:
            if pending and (topic, partition) in pending:
                row(ap, partition, -1, -1, "", unstable)
                continue
            value = get((topic, partition))
            if value is None:
                row(ap, partition, -1, -1, "", none)
            else:
                row(ap, partition, value.offset, value.leader_epoch, value.metadata, none)
    return ErrorCode.NONE, [(topic, n[0], parts) for topic, (n, parts) in by_topic.items()]


# --- OffsetDelete -----------------------------------------------------------------------------------

def delete_offsets(coordinator: GroupShards, group_id: str | None, topics: list[tuple[str, list[int]]],
                   partition_count: PartitionCount) -> Promise:
    """OffsetDelete (KIP-496, ``handleDeleteOffsets``): yields (group error, [(topic, partition, error)]) once tombstones are durable.

    With a group error the partition list is empty, as Kafka answers.
    """
    cache: dict[str, int | None] = {}
    errors: dict[TopicPartition, ErrorCode] = {}
    candidates: list[TopicPartition] = []
    for name, indexes in topics:
        for p in indexes:
            if partition_exists(partition_count, cache, name, p):
                candidates.append((name, p))
            else:
                errors[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    shard, error = coordinator.check(group_id, allow_empty=False)
    group = None
    if error is ErrorCode.NONE and group_id in shard.share_groups:
        error = ErrorCode.GROUP_ID_NOT_FOUND  # ShareGroup.validateOffsetDelete
    if error is ErrorCode.NONE and group_id in shard.consumer_groups:
        return delete_consumer_offsets(shard, shard.consumer_groups[group_id], topics, candidates, errors)
    if error is ErrorCode.NONE:
        group = shard.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            error = ErrorCode.GROUP_ID_NOT_FOUND
    if error is not ErrorCode.NONE:
        return Promise.resolved((error, []))
    eligible = candidates
    if not group.is_in(GroupState.EMPTY):
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return Promise.resolved((ErrorCode.NON_EMPTY_GROUP, []))
        eligible = []
        for tp in candidates:
            if group.is_subscribed_to(tp[0]):
                errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                eligible.append(tp)
    for tp in eligible:
        errors[tp] = ErrorCode.NONE
    answer = [(name, p, errors[(name, p)]) for name, indexes in topics for p in indexes]
    if not eligible:
        return Promise.resolved((ErrorCode.NONE, answer))
    removed = remove_offsets(shard, {group_id: eligible})
    if removed.offsets:
        log.info("offsets.deleted", group=group_id, offsets=removed.offsets,
                 group_removed=bool(removed.groups))
    return shard.run(CoordinatorResult(removed.records, (ErrorCode.NONE, answer),
                                       lambda _answer, error: (_COMMIT_WRITE_ERRORS.get(error, error), [])))


# --- removal: OffsetDelete, expiry, deleted topics ------------------------------------------------

class Removal(NamedTuple):
    """What ``remove_offsets`` selected: the tombstones to write, the offsets and groups they remove."""

    records: list[Record]
    offsets: int
    groups: list[str]


def remove_offsets(shard: Shard, selection: dict[str, Iterable[TopicPartition]]) -> Removal:
    """The tombstones for the selected offsets of each group, in one batch for the shard.

    Kafka's ``cleanupGroupMetadata``.  A partition gets its tombstone when it
    has a committed offset or a pending transactional one (whose replay then
    drops it, so the transaction's COMMIT cannot bring it back: Kafka's
    ``OffsetMetadataManager.deleteOffsets``).  Each selected group that is then Empty
    with no offsets and nothing pending dies: its GroupMetadata tombstone
    joins the batch when its generation is > 0 (a commit-only group never
    had a group record), and the replay of its last tombstone removes it
    (``Shard.reconcile``).  A group with nothing on the log at all is live
    state only, removed here.  Nothing else changes until the records are
    replayed, so a batch that cannot be written leaves the group as it was.
    """
    records: list[Record] = []
    dead: list[str] = []
    for group_id, tps in selection.items():
        committed = shard.offsets.get(group_id) or {}
        txn = shard.txn
        removed = {tp for tp in tps if tp in committed or txn.has_pending(group_id, tp)}
        records.extend((OffsetKey(group_id, t, p), None) for t, p in sorted(removed))
        group = shard.groups.get(group_id)
        if group is None or not _dies(shard, group, len(committed) - len(removed & committed.keys()), removed):
            continue
        dead.append(group_id)
        if group.generation > 0:
            records.append((GroupKey(group_id), None))
        elif not removed:  # nothing on the log: live state only
            shard.remove_group(group_id)
    offsets = len(records) - sum(1 for k, _ in records if type(k) is GroupKey)
    return Removal(records, offsets, dead)


def run_removal(shard: Shard, removal: Removal, reason: str) -> Promise:
    """Write a removal's tombstones (expiry, deleted topics); a failure is logged, nothing to undo."""
    def failed(_response: None, error: ErrorCode) -> ErrorCode:
        log.warning("offsets.remove_failed", partition=shard.partition, reason=reason, error=error.name)
        return error

    return shard.run(CoordinatorResult(removal.records, None, failed))


def _dies(shard: Shard, group: ClassicGroup, remaining: int, removed: set[TopicPartition]) -> bool:
    """Empty, no offset left, nothing in flight, no pending transactional offset but those removed now."""
    group_id = group.group_id
    if group.state is not GroupState.EMPTY or remaining:
        return False
    if group_id in shard.txn.groups and shard.txn.pending_partitions(group_id) - removed:
        return False
    return not shard.in_flight_offsets(group_id)


def delete_topic_offsets(coordinator: GroupShards, topics: Iterable[str]) -> list[Promise]:
    """DeleteTopics: every group's offsets of those topics get tombstones (one batch per shard).

    Returns one promise per shard that wrote something.  Shards still loading
    are skipped (as in Kafka, their offsets of the deleted topics survive
    until the next deletion or expiry).
    """
    gone = set(topics)
    promises = []
    for shard in coordinator.shards:
        if shard.status is not ShardStatus.ACTIVE:
            continue
        selection = {g: [tp for tp in offs if tp[0] in gone] for g, offs in shard.offsets.items()}
        for g in shard.txn.groups:  # pending transactional offsets of those topics go too
            selection.setdefault(g, []).extend(
                tp for tp in sorted(shard.txn.pending_partitions(g)) if tp[0] in gone and tp not in selection[g])
        selection = {g: tps for g, tps in selection.items() if tps}
        if not selection:
            continue
        removed = remove_offsets(shard, selection)
        log.info("offsets.topics_deleted", partition=shard.partition, topics=sorted(gone),
                 offsets=removed.offsets, groups_removed=len(removed.groups))
        promises.append(run_removal(shard, removed, "topics-deleted"))
    return promises
