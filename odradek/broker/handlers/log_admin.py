"""Log-level APIs: DeleteRecords, OffsetForLeaderEpoch, DescribeLogDirs.

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
"""

from __future__ import annotations

import asyncio
import os
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ...storage.errors import LogClosedError, OffsetOutOfRangeError
from ...storage.log import Log
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
    if current != UNDEFINED_EPOCH and current < LEADER_EPOCH:
        out["error_code"] = ErrorCode.FENCED_LEADER_EPOCH
        return out
    if current > LEADER_EPOCH:
        out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
        return out
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
    """One result per configured log dir, with the requested partitions (null = all) it holds."""
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    logs = app.logs.logs()
    results = []
    for d in app.logs.log_dirs:
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), lg in sorted(logs.items()):
            if lg.directory.parent != d or (wanted is not None and (topic, p) not in wanted):
                continue
            by_topic.setdefault(topic, []).append({"partition_index": p, "partition_size": lg.size_bytes,
                                                   "offset_lag": 0, "is_future_key": False})
        total, usable = await asyncio.to_thread(_volume, d)
        results.append({"error_code": ErrorCode.NONE, "log_dir": str(d.resolve()),
                        "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()],
                        "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def _volume(directory) -> tuple[int, int]:
    """Total and usable bytes of the volume (Kafka's FileStore getTotalSpace/getUsableSpace)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
