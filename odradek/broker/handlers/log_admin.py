"""Log-level APIs: DeleteRecords, OffsetForLeaderEpoch, DescribeLogDirs, AlterReplicaLogDirs.

DeleteRecords moves log start offsets (Kafka's ``ReplicaManager.deleteRecords``
and ``UnifiedLog.maybeIncrementLogStartOffset``): the new starts are written
to each log dir's ``log-start-offset-checkpoint`` before the answer goes out
(Kafka writes that file every minute and may lose an advance in a crash; an
answered deletion here survives one), then the segments wholly below them
are deleted.  Fetch below a start gets OFFSET_OUT_OF_RANGE and ListOffsets
EARLIEST answers the start, both by reading ``Log.log_start_offset``.

OffsetForLeaderEpoch answers from the leader-epoch cache Kafka would hold on
one node whose leader epoch never changed: a single entry (epoch 0 -> the
log start offset), ``LeaderEpochFileCache.endOffsetFor`` over it.

AlterReplicaLogDirs moves partitions between ``log.dirs`` in the background
(``LogManager.move``, Kafka's future replica); DescribeLogDirs lists a
partition being moved in its target dir too, as Kafka lists a future log.
"""

from __future__ import annotations

import asyncio
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ...storage.errors import LogClosedError, OffsetOutOfRangeError
from ...storage.log import Log
from ...storage.log_move import future_name_fits
from ..dataplane.topics import INTERNAL_TOPICS
from ..dispatch import HandlerTable, RequestContext
from .fetch import LEADER_EPOCH

if TYPE_CHECKING:
    from ...storage.log_manager import LogManager
    from ..dataplane import DataPlane, TopicRegistry


class LogAdminServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the topics' logs."""

    topics: TopicRegistry
    logs: LogManager
    dataplane: DataPlane


log = structlog.get_logger("odradek.topics")

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def register(table: HandlerTable, app: LogAdminServices) -> None:
    table.register(21, partial(delete_records, app))
    table.register(23, partial(offset_for_leader_epoch, app))
    table.register(35, partial(describe_log_dirs, app))
    table.register(34, partial(alter_replica_log_dirs, app))


# --- DeleteRecords ------------------------------------------------------------------------

class _Refused(Exception):
    def __init__(self, code: ErrorCode, why: str):
        super().__init__(why)
        self.code = code


async def delete_records(app: LogAdminServices, ctx: RequestContext, req) -> dict:
    await app.dataplane.barrier(ctx.connection_id)  # a Produce sent before on this connection counts
    answers: list[tuple[str, list[dict]]] = []
    moved: list[Log] = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                lg = _advance(app, t.name, p.partition_index, p.offset)
            except _Refused as exc:
                log.info("log.delete_records_refused", topic=t.name, partition=p.partition_index,
                         offset=p.offset, error=exc.code.name, reason=str(exc))
                parts.append({"partition_index": p.partition_index, "low_watermark": -1, "error_code": exc.code})
                continue
            moved.append(lg)
            parts.append({"partition_index": p.partition_index, "low_watermark": lg, "error_code": ErrorCode.NONE})
        answers.append((t.name, parts))
    failed = await _persist(app, moved)
    for _name, parts in answers:
        for part in parts:
            lg = part["low_watermark"]
            if isinstance(lg, Log):
                part["low_watermark"] = -1 if failed else lg.log_start_offset
                part["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR if failed else ErrorCode.NONE
    return {"throttle_time_ms": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in answers]}


def _advance(app: LogAdminServices, topic: str, partition: int, offset: int) -> Log:
    """Move one partition's start (Kafka's checks in Kafka's order); the log, to persist."""
    if topic in INTERNAL_TOPICS:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"cannot delete records of internal topic {topic}")
    lg = app.topics.log(topic, partition)
    if lg is None or lg.closed:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist")
    if not lg.config.delete:
        raise _Refused(ErrorCode.POLICY_VIOLATION,
                       f"records of {topic}-{partition} cannot be deleted: its cleanup.policy has no 'delete'")
    target = lg.log_end_offset if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise _Refused(ErrorCode.OFFSET_OUT_OF_RANGE, f"The offset {target} for partition {topic}-{partition} "
                       "is not valid")
    try:
        lg.advance_start(target)
    except (OffsetOutOfRangeError, LogClosedError) as exc:
        code = ErrorCode.OFFSET_OUT_OF_RANGE if isinstance(exc, OffsetOutOfRangeError) \
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        raise _Refused(code, str(exc)) from None
    return lg


async def _persist(app: LogAdminServices, moved: list[Log]) -> bool:
    """Checkpoint the new starts durably, then free the segments below them; True if the
    checkpoint could not be written (the starts hold in memory, the next write retries)."""
    if not moved:
        return False
    try:
        await app.logs.checkpoint()
    except OSError as exc:
        log.error("log.start_checkpoint_failed", error=str(exc))
        return True
    for lg in dict.fromkeys(moved):
        try:
            await lg.delete_segments_below_start()
        except (OSError, LogClosedError) as exc:  # the retention pass retries
            log.warning("log.delete_below_start_failed", dir=lg.directory.name, error=str(exc))
    return False


# --- OffsetForLeaderEpoch -----------------------------------------------------------------

async def offset_for_leader_epoch(app: LogAdminServices, ctx: RequestContext, req) -> dict:
    await app.dataplane.barrier(ctx.connection_id)
    topics = []
    for t in req.topics:
        topics.append({"topic": t.topic, "partitions": [_epoch_end(app, t.topic, p) for p in t.partitions]})
    return {"throttle_time_ms": 0, "topics": topics}


def _epoch_end(app: LogAdminServices, topic: str, p) -> dict:
    out = {"error_code": ErrorCode.NONE, "partition": p.partition, "leader_epoch": UNDEFINED_EPOCH,
           "end_offset": UNDEFINED_EPOCH_OFFSET}
    lg = app.topics.log(topic, p.partition)
    if lg is None or lg.closed:
        out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    current = p.current_leader_epoch
    if current != UNDEFINED_EPOCH and current < lg.leader_epoch:
        out["error_code"] = ErrorCode.FENCED_LEADER_EPOCH
        return out
    if current > lg.leader_epoch:
        out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
        return out
    if lg.leader_epoch:  # a cluster's leader moved: the partition's epoch history answers
        epoch, end = lg.epochs.end_offset_for(p.leader_epoch, lg.log_start_offset, lg.log_end_offset)
    else:
        epoch, end = end_offset_for(p.leader_epoch, lg.log_start_offset, lg.log_end_offset)
    if end != UNDEFINED_EPOCH_OFFSET:  # UnifiedLog.endOffsetForEpoch: an undefined offset is "none"
        out["leader_epoch"], out["end_offset"] = epoch, end
    return out


def end_offset_for(requested: int, start_offset: int, log_end: int) -> tuple[int, int]:
    """``LeaderEpochFileCache.endOffsetFor`` over the one-entry cache {LEADER_EPOCH: start_offset}."""
    if requested == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if requested == LEADER_EPOCH:  # the latest epoch: still being written, so the log end
        return requested, log_end
    if requested > LEADER_EPOCH:  # above every known epoch
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    return requested, start_offset  # below every known epoch: where the first one starts


# --- DescribeLogDirs ----------------------------------------------------------------------

async def describe_log_dirs(app: LogAdminServices, ctx: RequestContext, req) -> dict:
    """One result per configured log dir, with the requested partitions (null = all) it holds,
    a partition on its way there as a future entry (``ReplicaManager.describeLogDirs``)."""
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    logs = app.logs.logs()
    entries: dict[Path, list[tuple[str, dict]]] = {d: [] for d in app.logs.log_dirs}
    for (topic, p), lg in sorted(logs.items()):
        if wanted is None or (topic, p) in wanted:
            entries.setdefault(lg.directory.parent, []).append(
                (topic, {"partition_index": p, "partition_size": lg.size_bytes, "offset_lag": 0,
                         "is_future_key": False}))
    for (topic, p), m in sorted(app.logs.moves().items()):
        lg = logs.get((topic, p))
        if lg is not None and (wanted is None or (topic, p) in wanted):
            entries.setdefault(m.dest, []).append(
                (topic, {"partition_index": p, "partition_size": m.copied_bytes,
                         "offset_lag": max(lg.log_end_offset - m.copied_offset, 0), "is_future_key": True}))
    results = []
    for d in app.logs.log_dirs:
        by_topic: dict[str, list[dict]] = {}
        for topic, part in entries.get(d, []):
            by_topic.setdefault(topic, []).append(part)
        total, usable = await asyncio.to_thread(_volume, d)
        results.append({"error_code": ErrorCode.NONE, "log_dir": str(d.resolve()),
                        "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()],
                        "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


# --- AlterReplicaLogDirs -------------------------------------------------------------------

async def alter_replica_log_dirs(app: LogAdminServices, ctx: RequestContext, req) -> dict:
    """``ReplicaManager.alterReplicaLogDirs``: each partition to its dir (the last one named
    wins, as Kafka's map of partition to dir); errors per partition, grouped by topic."""
    target: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                target[(t.name, p)] = d.path
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), path in target.items():
        code = await _move(app, topic, p, path)
        if code != ErrorCode.NONE:
            log.info("log.move_refused", topic=topic, partition=p, dir=path, error=code.name, client=ctx.client_id)
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": n, "partitions": ps} for n, ps in by_topic.items()]}


async def _move(app: LogAdminServices, topic: str, partition: int, path: str) -> ErrorCode:
    if not future_name_fits(topic, partition):
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    dest = _configured_dir(app, path)
    if dest is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    lg = app.topics.log(topic, partition)
    if lg is None or lg.closed:
        if app.topics.partition_count(topic) is not None:  # a partition created later goes there
            app.logs.prefer(topic, partition, dest)
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if lg.directory.parent != dest and topic in INTERNAL_TOPICS:
        # their coordinators write through the partition's log object: not moved here
        return ErrorCode.KAFKA_STORAGE_ERROR
    try:
        await app.logs.move(topic, partition, dest)
    except OSError as exc:  # the target dir cannot take the future log
        log.error("log.move_failed", topic=topic, partition=partition, dir=str(dest), error=str(exc))
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE


def _configured_dir(app: LogAdminServices, path: str) -> Path | None:
    """The log dir named by its absolute path (as DescribeLogDirs reports it, or as configured)."""
    for d in app.logs.log_dirs:
        if path in (str(d.resolve()), str(d.absolute())):
            return d
    return None


def _volume(directory) -> tuple[int, int]:
    """Total and usable bytes of the volume (Kafka's FileStore getTotalSpace/getUsableSpace)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
