"""A partition's log: ordered segments, offsets assigned on append, reads by offset.

Threading model (why the event loop never waits on the disk or the cleaner):

- Appends, rolls and truncation happen on one thread (the event loop); an
  append is an ``os.write`` of a patched copy of the batch to the active
  segment's fd, so it never blocks on another thread.
- The segment list is copy-on-write: readers (any thread) take the current
  ``(segments, bases)`` tuple without a lock and read whole batches below
  each segment's published ``size``.  ``_lock`` only serialises the short
  in-memory list replacements (roll, retention, cleaner swap).
- ``_maint`` makes retention, compaction, truncation and deletion mutually
  exclusive.  Worker threads hold it for long; the loop never blocks on it
  (the async wrappers acquire it in a thread).
- fsync runs in worker threads (flush.py).
- Readers pin the segment files (``reading``): a close or a delete closes the
  file descriptors only once the last read in flight is done, never under a
  ``pread`` (which would fail with EBADF, or read another file once the
  descriptor number is reused).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from odradek.protocol.records import (
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    compute_crc,
    decode_batch,
    encode_pairs_batch,
)
from odradek.storage import producer_snapshot, txn_index
from odradek.storage.config import FsyncMode, LogConfig
from odradek.storage.errors import LogClosedError, OffsetOutOfRangeError, RecordBatchTooLargeError
from odradek.storage.files import (
    DEFAULT_OPS,
    DELETED_SUFFIX,
    FileOps,
    delete_dir_name,
    parse_partition_dir,
    remove_tree,
    txn_index_path,
)
from odradek.storage.flush import Durability
from odradek.storage.leader_epochs import LeaderEpochCache
from odradek.storage.recovery import load_segments
from odradek.storage.segment import Segment
from odradek.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from odradek.storage.cleaner import CleanStats

logger = structlog.get_logger("odradek.storage")

Clock = Callable[[], int]

_HEAD = struct.Struct(">qiibIhiqqqhii")  # baseOffset .. recordsCount
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_MAX_REL = 0x7FFFFFFF


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    """One partition directory (``<topic>-<partition>/``)."""

    def __init__(self, directory: Path, config: LogConfig, segments: list[Segment], *, clock: Clock,
                 recovery_point: int, cleaner_checkpoint: int, log_start_offset: int = 0) -> None:
        self.directory = directory
        self._config = config
        self._flush_interval = 0
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()
        self._maint = threading.Lock()
        self._view: tuple[tuple[Segment, ...], list[int]] = ((), [])
        self._set_segments(segments)
        self._next_offset = segments[-1].compute_next_offset()
        # DeleteRecords moves it above the first segment's base (Kafka's logStartOffset); on
        # load the checkpoint's value or the first base, whichever is higher
        self._log_start = max(log_start_offset, segments[0].base_offset)
        self.durability = Durability(directory, min(recovery_point, self._next_offset), clock())
        self.cleaner_checkpoint = max(cleaner_checkpoint, self.log_start_offset)
        self.closed = False  # no read or append starts any more
        self.frozen = False  # appends refused (LogClosedError) while a move switches dirs
        self._readers = 0  # reads in flight (``reading``), under _lock
        self._release_files = False  # closed: the last reader out closes the files
        self._files_open = True
        self.stop_cleaning = threading.Event()
        self.on_truncate: Callable[[Log], None] | None = None
        # stamped into every appended batch (Kafka's ``appendAsLeader(records, leaderEpoch)``); a
        # cluster's layout sets it on a leader change, one broker keeps 0
        self.leader_epoch = 0
        self._epochs: LeaderEpochCache | None = None  # leader-epoch-checkpoint, read on first use
        parsed = parse_partition_dir(directory.name)
        self.topic, self.partition = parsed if parsed else (directory.name, -1)

    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig | None = None, *,
             recovery_point: int = 0, log_start_offset: int = 0, cleaner_checkpoint: int = 0,
             clock: Clock | None = None, ops: FileOps = DEFAULT_OPS, gapped: bool = False) -> Log:
        """Open (creating if needed) and recover a partition directory; blocking I/O.

        ``gapped``: the log was compacted once (it may have offset gaps) even if its config
        no longer says so; recovery then only checks ordering, as for a compacted log.
        """
        config = config or LogConfig()
        clock = clock or wall_clock_ms
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        segments = load_segments(path, recovery_point=recovery_point, log_start_offset=log_start_offset,
                                 now_ms=clock(), index_interval=config.index_interval_bytes, ops=ops,
                                 contiguous=not (config.compact or gapped))
        log = cls(path, config, segments, clock=clock, recovery_point=recovery_point,
                  cleaner_checkpoint=cleaner_checkpoint, log_start_offset=log_start_offset)
        if log._log_start > log._next_offset:
            # records up to the start were deleted and recovery lost the tail above them:
            # the log restarts empty at its start (Kafka's truncateFullyAndStartAt)
            with log._maint:
                log._truncate_locked(log._next_offset, ops, start_at=log._log_start)
        return log

    # --- state ---------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def epochs(self) -> LeaderEpochCache:
        """The partition's leader-epoch history (``leader-epoch-checkpoint``), read on first use."""
        if self._epochs is None:
            self._epochs = LeaderEpochCache.load(self.directory)
        return self._epochs

    @config.setter
    def config(self, config: LogConfig) -> None:
        """New settings (AlterConfigs) apply from the next append or maintenance pass."""
        self._config = config
        if config.fsync is FsyncMode.INTERVAL and config.flush_ms >= (1 << 62):
            self._flush_interval = 1000
        else:
            self._flush_interval = config.flush_ms

    def _set_segments(self, segments: list[Segment] | tuple[Segment, ...]) -> None:
        segs = tuple(segments)
        self._view = (segs, [s.base_offset for s in segs])

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._view[0]

    @property
    def active_segment(self) -> Segment:
        return self._view[0][-1]

    @property
    def log_start_offset(self) -> int:
        """The first offset a read may ask for (Kafka's low watermark on one node)."""
        base = self._view[0][0].base_offset
        return self._log_start if self._log_start > base else base

    def advance_start(self, offset: int) -> bool:
        """DeleteRecords: records below ``offset`` are gone for readers from now on (the caller
        persists the start, then ``delete_segments_below_start`` frees their segments).  True if
        the start moved; ``offset`` past the log end raises OffsetOutOfRangeError (Kafka's
        ``maybeIncrementLogStartOffset``; on one node the high watermark is the log end)."""
        self._check_open()
        if offset > self._next_offset:
            raise OffsetOutOfRangeError(f"cannot move the start of {self.directory.name} to {offset}: "
                                        f"past the high watermark {self._next_offset}")
        if offset <= self.log_start_offset:
            return False
        self._log_start = offset
        logger.info("log.start_advanced", dir=self.directory.name, log_start_offset=offset)
        return True

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        return self.durability.recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._view[0])

    def _check_open(self) -> None:
        if self.closed:
            raise LogClosedError(f"log {self.directory.name} is closed")

    @contextlib.contextmanager
    def reading(self) -> Iterator[tuple[Segment, ...]]:
        """Pin the segment files for one read (any thread); raises LogClosedError once closed.

        A delete or close meanwhile leaves the descriptors open until the
        last pinned read is done: reads run in worker threads, and closing a
        descriptor under a ``pread`` fails it (EBADF) or, once the number is
        reused, makes it read another file's bytes.
        """
        self._pin()
        try:
            yield self._view[0]
        finally:
            self._unpin()

    def _pin(self) -> None:
        with self._lock:
            self._check_open()
            self._readers += 1

    def _unpin(self) -> None:
        with self._lock:
            self._readers -= 1
            last = self._readers == 0 and self._release_files and self._files_open
            if last:
                self._files_open = False
        if last:
            self._close_segments()

    def __repr__(self) -> str:
        return f"<Log {self.directory.name} [{self.log_start_offset}, {self._next_offset})>"

    # --- append --------------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview, *, validate: bool = True,
               schedule: bool = True) -> tuple[int, int]:
        """Append a record set (one or more v2 batches); returns (first offset, last offset).

        Offsets are assigned by rewriting each batch's baseOffset in a copy
        (outside the CRC), the partition leader epoch becomes ``leader_epoch``, producer
        fields are kept.  With ``validate`` every batch's CRC is checked
        first; nothing is written unless the whole set is valid.  ``schedule``
        False leaves flushing to the caller (``append_async``).
        """
        self._check_open()
        if self.frozen:
            raise LogClosedError(f"log {self.directory.name} is moving to another log dir")
        if self.durability.failed is not None:
            raise self.durability.failed
        buf = bytearray(records)
        n = len(buf)
        if n == 0:
            raise CorruptRecordError("empty record set")
        config = self._config
        append_time = config.log_append_time
        now = self.clock()
        next_offset = self._next_offset
        batches: list[tuple[int, int, int, int]] = []
        messages = 0
        max_ts_in = -1
        pos = 0
        while pos < n:
            if n - pos < HEADER_SIZE:
                raise CorruptRecordError(f"truncated batch at {pos}")
            (_b, length, _e, magic, crc, attributes, last_delta, _bt, max_ts, _pid, _pe, _bs,
             count) = _HEAD.unpack_from(buf, pos)
            size = length + LOG_OVERHEAD
            if magic != 2:
                raise CorruptRecordError(f"unsupported magic {magic}")
            if size < HEADER_SIZE or pos + size > n:
                raise CorruptRecordError(f"invalid batch length {length} at {pos}")
            if size > config.max_message_bytes:
                raise RecordBatchTooLargeError(f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}")
            if last_delta < 0 or count < 0:
                raise CorruptRecordError(f"invalid lastOffsetDelta {last_delta} / count {count}")
            if validate and compute_crc(buf, pos, size) != crc:
                raise CorruptRecordError(f"CRC mismatch in batch at {pos}")
            _INT64.pack_into(buf, pos, next_offset)
            _INT32.pack_into(buf, pos + 12, self.leader_epoch)
            if append_time:
                _INT16.pack_into(buf, pos + 21, attributes | TIMESTAMP_TYPE_MASK)
                _INT64.pack_into(buf, pos + 35, now)
                _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))
                max_ts = now
            if max_ts > max_ts_in:
                max_ts_in = max_ts
            next_offset += last_delta + 1
            batches.append((pos, size, next_offset - 1, max_ts))
            messages += last_delta + 1
            pos += size
        return self._write(buf, batches, next_offset, messages, max_ts_in, now, schedule)

    def append_records(self, pairs: list[tuple[bytes | None, bytes | None]], timestamp: int, *,
                       schedule: bool = True, timestamps: Sequence[int] | None = None) -> tuple[int, int]:
        """Append ``(key, value)`` records as one new batch; returns (first offset, last offset).

        For writers that build their records here (the group coordinator):
        the batch is encoded at the log end offset with ``leader_epoch``, so
        none of ``append``'s parsing, checking and patching is needed.  The
        records are at ``timestamp``, or at ``timestamps[i]`` each.
        """
        self._check_open()
        if self.frozen:
            raise LogClosedError(f"log {self.directory.name} is moving to another log dir")
        if self.durability.failed is not None:
            raise self.durability.failed
        config = self._config
        now = self.clock()
        append_time = config.log_append_time
        if append_time:
            timestamp, timestamps = now, None
        elif timestamps is not None:
            timestamp = max(timestamps)
        first = self._next_offset
        batch = encode_pairs_batch(pairs, base_offset=first, timestamp=timestamp,
                                   timestamp_type=1 if append_time else 0, partition_leader_epoch=self.leader_epoch,
                                   timestamps=timestamps)
        size = len(batch)
        if size > config.max_message_bytes:
            raise RecordBatchTooLargeError(f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}")
        n = len(pairs)
        return self._write(batch, [(0, size, first + n - 1, timestamp)], first + n, n, timestamp, now, schedule)

    @property
    def writable(self) -> bool:
        """Whether an append can be tried (open, and no failed fsync halted the log)."""
        return not self.closed and self.durability.failed is None

    def _write(self, buf: bytes | bytearray, batches: list[tuple[int, int, int, int]], next_offset: int,
               messages: int, max_ts_in: int, now: int, schedule: bool) -> tuple[int, int]:
        """Write checked batches at the log end (rolling first if due); returns (first, last offset)."""
        config = self._config
        first = self._next_offset
        n = len(buf)
        seg = self._view[0][-1]
        # roll on size, on 32-bit relative offsets, and on segment.ms (Kafka's rule: compare
        # record timestamps when the batches carry them, else the segment's wall-clock age)
        if seg.size > 0 and (
            seg.size + n > config.segment_bytes
            or next_offset - 1 - seg.base_offset > _MAX_REL
            or (now - seg.created_ms > config.segment_ms if seg.first_timestamp is None or max_ts_in < 0
                else max_ts_in - seg.first_timestamp > config.segment_ms)
        ):
            seg = self.roll()
        seg.append(buf, batches, config.index_interval_bytes)
        self._next_offset = next_offset
        d = self.durability
        d.written(seg, messages)
        if schedule and (config.fsync is FsyncMode.ALWAYS or d.unflushed_messages >= config.flush_messages
                         or now - d.last_flush_ms >= self._flush_interval):
            d.schedule(self._end_offset, self.clock)
        return first, next_offset - 1

    async def append_async(self, records: bytes | bytearray | memoryview, *,
                           validate: bool = True) -> tuple[int, int]:
        """append(); with fsync.mode=always (or flush.messages reached) resolve once durable."""
        base, last = self.append(records, validate=validate, schedule=False)
        d = self.durability
        if self.clock() - d.last_flush_ms >= self._flush_interval:
            d.schedule(self._end_offset, self.clock)
        if self.config.fsync is FsyncMode.ALWAYS or d.unflushed_messages >= self.config.flush_messages:
            await d.sync(self._end_offset, self.clock)
        return base, last

    def _end_offset(self) -> int:
        return self._next_offset

    def roll(self) -> Segment:
        """Close the active segment and start a new one at the log end offset."""
        self._check_open()
        old = self._view[0][-1]
        if old.size == 0:
            return old
        new = Segment.create(self.directory, self._next_offset, self.clock())
        with self._lock:
            self._set_segments(self._view[0] + (new,))
        self.durability.directory_changed()
        self.durability.schedule(self._end_offset, self.clock)  # Kafka flushes a rolled segment
        return new

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index an aborted transaction whose ABORT marker was just appended (it is in the
        active segment: a roll happens before a write, never after)."""
        self._check_open()
        txn_index.append_entry(self.directory, self.active_segment.base_offset, entry)

    def aborted_txns(self) -> list[AbortedTxn]:
        """Every segment's indexed aborted transactions, oldest first (blocking reads)."""
        with self.reading() as segments:
            return [e for seg in segments for e in txn_index.read_entries(self.directory, seg.base_offset)]

    # --- durability ----------------------------------------------------------------------

    async def sync(self) -> None:
        """Resolve once everything appended before the call is fsynced (group commit)."""
        await self.durability.sync(self._end_offset, self.clock)

    def when_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        """``sync`` for callers that would rather be called back: ``callback(None)`` once
        everything appended before the call is fsynced, ``callback(exc)`` if that fails."""
        self.durability.when_durable(self._end_offset, self.clock, callback)

    def flush(self) -> None:
        """fsync all unflushed data in this thread (never call it on the event loop)."""
        self.durability.flush_blocking(self._next_offset, self.clock())

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Start a background fsync when flush.ms (or the interval mode) says so."""
        now = self.clock() if now_ms is None else now_ms
        d = self.durability
        if d.pending and now - d.last_flush_ms >= self._flush_interval:
            d.schedule(self._end_offset, self.clock)
            return True
        return False

    # --- read ----------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Whole batches from the one containing ``offset`` (or the next one after it).

        At most ``max_bytes`` unless the first batch alone is bigger: that one
        is returned whole (KIP-74).  ``max_offset`` (exclusive) stops before
        a batch starting at or past it.  Empty at the log end.
        """
        self._pin()  # ``reading`` without the generator: this is the Fetch hot path
        try:
            return self._read(offset, max_bytes, max_offset)[0]
        finally:
            self._unpin()

    def read_span(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> tuple[bytes, int]:
        """``read``, and the offset after the last batch read (``offset`` when none): the end of
        the range a read_committed Fetch lists aborted transactions for, without a second walk."""
        self._pin()
        try:
            data, last = self._read(offset, max_bytes, max_offset)
        finally:
            self._unpin()
        if last < 0:
            return data, offset
        return data, _INT64.unpack_from(data, last)[0] + _INT32.unpack_from(data, last + 23)[0] + 1

    def _read(self, offset: int, max_bytes: int, max_offset: int | None) -> tuple[bytes, int]:
        """The bytes and where their last batch starts in them (-1: no batch)."""
        segs, bases = self._view
        end_offset = self._next_offset
        if offset == end_offset:
            return b"", -1
        start = self._log_start if self._log_start > segs[0].base_offset else segs[0].base_offset
        if offset < start or offset > end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{start}, {end_offset}] of {self.directory.name}")
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        parts: list[bytes] = []
        remaining = max_bytes
        joined = 0  # bytes in parts
        tail = -1  # start of the last whole batch in the joined bytes
        for seg in segs[i:]:
            end = seg.size
            if not parts and offset > seg.base_offset:
                loc = seg.find(offset, end)
                if loc is None:
                    continue
                pos = loc[0]
            else:
                pos = 0
            if pos >= end:
                continue
            want = min(max(remaining, 0), end - pos)
            data = seg.read(pos, want) if want > 0 else b""
            cut, stop, last = _whole_batches(data, max_offset)
            if cut == 0 and not parts and not stop:
                head = seg.read(pos, LOG_OVERHEAD)
                first_size = _INT32.unpack_from(head, 8)[0] + LOG_OVERHEAD
                data = seg.read(pos, first_size)
                cut, stop, last = _whole_batches(data, max_offset)
            if cut:
                parts.append(data[:cut] if cut < len(data) else data)
                remaining -= cut
                tail = joined + last
                joined += cut
            if stop or remaining <= 0 or pos + cut < end:
                break
        return (parts[0] if len(parts) == 1 else b"".join(parts)), tail

    async def read_async(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """read() in a worker thread, for big fetches."""
        return await asyncio.to_thread(self.read, offset, max_bytes, max_offset=max_offset)

    async def read_span_async(self, offset: int, max_bytes: int, *,
                              max_offset: int | None = None) -> tuple[bytes, int]:
        return await asyncio.to_thread(partial(self.read_span, offset, max_bytes, max_offset=max_offset))

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``; None if none.

        A scan of batch headers (segments whose max timestamp is too small are
        skipped); blocking I/O, call it in a worker thread for big logs.
        """
        with self.reading() as segments:
            return self._offset_for_timestamp(segments, timestamp)

    @staticmethod
    def _offset_for_timestamp(segments: tuple[Segment, ...], timestamp: int) -> tuple[int, int] | None:
        for seg in segments:
            if seg.compute_max_timestamp() < timestamp:
                continue
            for _pos, buf, off, h in seg.iter_batches(0, seg.size):
                if h.max_timestamp >= timestamp:
                    records = _records_or_none(buf, off)
                    if records is None:  # undecodable: its first offset is the earliest it can hold
                        return h.base_offset, h.max_timestamp
                    for r in records:
                        if r.timestamp >= timestamp:
                            return r.offset, r.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the earliest record carrying the largest timestamp."""
        with self.reading() as segments:
            return self._max_timestamp_offset(segments)

    @staticmethod
    def _max_timestamp_offset(segments: tuple[Segment, ...]) -> tuple[int, int] | None:
        best_ts = -1
        best_seg: Segment | None = None
        for seg in segments:
            ts = seg.compute_max_timestamp()
            if ts > best_ts:
                best_ts, best_seg = ts, seg
        if best_seg is None:
            return None
        for _pos, buf, off, h in best_seg.iter_batches(0, best_seg.size):
            if h.max_timestamp == best_ts:
                records = _records_or_none(buf, off)
                if records is None:  # undecodable: the batch is the answer, at its first offset
                    return best_ts, h.base_offset
                for r in records:
                    if r.timestamp == best_ts:
                        return best_ts, r.offset
        return None

    # --- retention -----------------------------------------------------------------------

    def roll_if_past_retention(self, now_ms: int | None = None) -> bool:
        """Roll an active segment whose every record is past ``retention.ms``, so the retention
        round that follows deletes it (event loop only, like every roll).

        Kafka's ``UnifiedLog.deletableSegments`` counts the active segment too
        when it breaches retention, rolling first (``deleteSegments``: a log
        always keeps one segment); without this a quiet topic whose records all
        sit in one segment would keep them forever.  Only with the segment's
        largest timestamp known without a scan (tracked since it was created
        here); a recovered active segment waits for its first roll.
        """
        config = self.config
        if self.closed or not config.delete or config.retention_ms < 0:
            return False
        seg = self.active_segment
        if seg.size == 0 or seg.max_timestamp is None or seg.max_timestamp < 0:
            return False
        now = self.clock() if now_ms is None else now_ms
        if now - seg.max_timestamp <= config.retention_ms:
            return False
        self.roll()
        return True

    def delete_old_segments(self, now_ms: int | None = None, *, ops: FileOps = DEFAULT_OPS) -> int:
        """Apply retention.ms / retention.bytes to closed segments, and drop segments wholly below
        the log start offset (whatever the cleanup policy, as Kafka's ``deleteOldSegments``);
        blocking, returns bytes freed."""
        now = self.clock() if now_ms is None else now_ms
        with self._maint:
            if self.closed:
                return 0
            segs = self._view[0]
            closed = segs[:-1]
            doomed: list[Segment] = self._below_start(segs)
            if not self.config.delete:
                return self._drop_segments(doomed, ops)
            if self.config.retention_ms >= 0 and len(doomed) < len(closed):
                for seg in closed[len(doomed):]:
                    if now - seg.compute_max_timestamp() > self.config.retention_ms:
                        doomed.append(seg)
                    else:
                        break
            if self.config.retention_bytes >= 0:
                total = sum(s.size for s in segs) - sum(s.size for s in doomed)
                for seg in closed[len(doomed):]:
                    if total - seg.size >= self.config.retention_bytes:
                        doomed.append(seg)
                        total -= seg.size
                    else:
                        break
            return self._drop_segments(doomed, ops)

    def _below_start(self, segs: tuple[Segment, ...]) -> list[Segment]:
        """Leading segments whose next segment starts at or below the log start offset."""
        start = self._log_start
        return [seg for seg, nxt in zip(segs, segs[1:], strict=False) if nxt.base_offset <= start]

    def _drop_segments(self, doomed: list[Segment], ops: FileOps) -> int:
        """Remove leading segments from the view, then their files (under _maint); bytes freed."""
        if not doomed:
            return 0
        gone = set(doomed)
        with self._lock:
            self._set_segments([s for s in self._view[0] if s not in gone])
        self.cleaner_checkpoint = max(self.cleaner_checkpoint, self.log_start_offset)
        freed = sum(s.size for s in doomed)
        self._delete_segment_files(doomed, ops)
        logger.info("log.retention.deleted", dir=self.directory.name, segments=len(doomed), bytes=freed,
                    log_start_offset=self.log_start_offset)
        return freed

    async def delete_segments_below_start(self) -> int:
        """After DeleteRecords: free every segment wholly below the log start offset now, rolling
        first when the start reached the log end (nothing in the active segment is readable)."""
        seg = self.active_segment
        if not self.closed and seg.size > 0 and self._log_start >= self._next_offset:
            self.roll()
        return await asyncio.to_thread(self._delete_below_start)

    def _delete_below_start(self) -> int:
        with self._maint:
            if self.closed:
                return 0
            return self._drop_segments(self._below_start(self._view[0]), DEFAULT_OPS)

    async def enforce_retention(self) -> int:
        return await asyncio.to_thread(self.delete_old_segments)

    def _delete_segment_files(self, segments: list[Segment], ops: FileOps) -> None:
        """Kafka's two steps: rename to .deleted (recovery removes leftovers), then unlink."""
        renamed = []
        for seg in sorted(segments, key=lambda s: -s.base_offset):
            for p in (seg.path, seg.index.path, txn_index_path(seg.directory, seg.base_offset)):
                if p.exists():
                    target = p.with_name(p.name + DELETED_SUFFIX)
                    ops.rename(p, target)
                    renamed.append(target)
        for p in renamed:
            ops.unlink(p)

    # --- compaction ----------------------------------------------------------------------

    def dirty_ratio(self) -> float:
        """Dirty bytes / cleanable bytes (closed segments only), as the cleaner sees it."""
        segs = self._view[0][:-1]
        total = sum(s.size for s in segs)
        if total == 0:
            return 0.0
        dirty = sum(s.size for s in segs if s.base_offset >= self.cleaner_checkpoint)
        return dirty / total

    def needs_cleaning(self) -> bool:
        segs = self._view[0][:-1]
        return (self.config.compact and any(s.base_offset >= self.cleaner_checkpoint and s.size for s in segs)
                and self.dirty_ratio() >= self.config.min_cleanable_dirty_ratio)

    def clean(self, now_ms: int | None = None, *, ops: FileOps = DEFAULT_OPS,
              stable_offset: int | None = None) -> CleanStats | None:
        """Compact the closed segments below ``stable_offset`` now (blocking; run it in a worker
        thread).  The cleaner's code is loaded here, when a log first needs cleaning."""
        from odradek.storage.cleaner import clean_log  # noqa: PLC0415

        return clean_log(self, self.clock() if now_ms is None else now_ms, ops=ops, stable_offset=stable_offset)

    async def compact(self, now_ms: int | None = None, *, stable_offset: int | None = None) -> CleanStats | None:
        """On-demand compaction in a worker thread; the log stays readable and appendable."""
        return await asyncio.to_thread(partial(self.clean, now_ms, stable_offset=stable_offset))

    def replace_segments(self, old: list[Segment], new: Segment | None) -> None:
        """Replace consecutive ``old`` segments by ``new`` (or by nothing) in the live view.

        For the cleaner, once the cleaned segment's files are in place: the
        caller holds the maintenance lock (``clean`` runs under it), and
        readers see either the old segments or the new one, never a mix.
        """
        with self._lock:
            segs = list(self._view[0])
            i = segs.index(old[0])
            if segs[i:i + len(old)] != old:
                raise RuntimeError("segments changed under the cleaner")
            segs[i:i + len(old)] = [new] if new is not None else []
            self._set_segments(segs)

    # --- truncation and deletion ---------------------------------------------------------

    def truncate_to(self, offset: int, *, ops: FileOps = DEFAULT_OPS) -> None:
        """Drop every batch with an offset >= ``offset`` (whole batches: a batch holding
        ``offset`` goes too).  Call it on the appending thread; it waits for any maintenance."""
        with self._maint:
            self._truncate_locked(offset, ops)

    async def truncate_to_async(self, offset: int) -> None:
        await asyncio.to_thread(self._maint.acquire)
        try:
            self._truncate_locked(offset, DEFAULT_OPS)
        finally:
            self._maint.release()

    def _truncate_locked(self, offset: int, ops: FileOps, *, start_at: int | None = None) -> None:
        self._check_open()
        if offset >= self._next_offset and start_at is None:
            return
        segs = list(self._view[0])
        if start_at is not None or offset <= segs[0].base_offset:  # Kafka's truncateFullyAndStartAt
            offset = offset if start_at is None else start_at
            self._delete_segment_files(segs, ops)
            fresh = Segment.create(self.directory, offset, self.clock())
            with self._lock:
                self._set_segments([fresh])
            self._next_offset = offset
            self._log_start = offset
            producer_snapshot.delete_above(self.directory, -1)  # they describe data that is gone
        else:
            doomed = [s for s in segs if s.base_offset >= offset]
            keep = [s for s in segs if s.base_offset < offset]
            with self._lock:
                self._set_segments(keep)
            self._delete_segment_files(doomed, ops)
            last = keep[-1]
            loc = last.find(offset)
            if loc is not None:
                pos, h = loc
                new_next = h.base_offset
                last.truncate_to_position(pos, new_next)
            else:
                new_next = last.compute_next_offset()
            txn_index.truncate_entries(self.directory, last.base_offset, new_next)
            self._next_offset = new_next
            self._log_start = min(self._log_start, new_next)
            producer_snapshot.delete_above(self.directory, new_next)
        self.durability.truncated(self._next_offset)
        self.durability.directory_changed()
        self.cleaner_checkpoint = min(self.cleaner_checkpoint, self.active_segment.base_offset)
        logger.info("log.truncated", dir=self.directory.name, log_end_offset=self._next_offset)
        if self.on_truncate is not None:
            self.on_truncate(self)

    def close(self) -> None:
        """fsync and close (blocking; the async variant is aclose)."""
        if self.closed:
            return
        self.stop_cleaning.set()
        with self._maint:
            try:
                self.flush()
            finally:
                self._close_files()

    def discard(self) -> None:
        """Close without flushing: the partition is being thrown away (blocking)."""
        self.closed = True
        self.stop_cleaning.set()
        with self._maint:
            self._close_files()

    async def aclose(self) -> None:
        if self.closed:
            return
        await self.durability.drain()
        await asyncio.to_thread(self.close)

    def _close_files(self) -> None:
        """Closed from now on; the files close now, or when the last pinned read is done."""
        with self._lock:
            self.closed = True
            self._release_files = True
            now = self._readers == 0 and self._files_open
            if now:
                self._files_open = False
        if now:
            self._close_segments()

    def _close_segments(self) -> None:
        for seg in self._view[0]:
            seg.close()

    async def delete(self) -> None:
        """Remove the partition: rename the directory to ``*-delete`` then remove it in a thread.

        Closed at once on the appending thread, so no append starts while the
        worker closes the files; reads in flight finish on their pinned files
        (unlinked files stay readable until their last descriptor closes).
        """
        self.closed = True
        self.stop_cleaning.set()
        await self.durability.drain()
        await asyncio.to_thread(self.delete_blocking)

    def delete_blocking(self) -> None:
        self.closed = True
        self.stop_cleaning.set()
        with self._maint:
            self._close_files()
            target = self.directory.with_name(delete_dir_name(self.topic, self.partition, uuid.uuid4().hex))
            if self.directory.exists():
                os.replace(self.directory, target)
                remove_tree(target, ignore_errors=True)
            logger.info("log.deleted", dir=self.directory.name)


def _whole_batches(data: bytes, max_offset: int | None) -> tuple[int, bool, int]:
    """Length of the whole-batch prefix of ``data``; True when max_offset stopped it; where the
    prefix's last batch starts (-1 when it is empty)."""
    p = 0
    last = -1
    n = len(data)
    while n - p >= LOG_OVERHEAD:
        if max_offset is not None and _INT64.unpack_from(data, p)[0] >= max_offset:
            return p, True, last
        size = _INT32.unpack_from(data, p + 8)[0] + LOG_OVERHEAD
        if p + size > n or size < HEADER_SIZE or data[p + MAGIC_OFFSET] != 2:
            break
        last = p
        p += size
    return p, False, last


def _records_or_none(buf, off: int) -> list | None:
    """The batch's records, or None when they do not decode (a batch stored before Produce
    validated records, or one imported): one bad batch must not fail a partition's lookups."""
    try:
        return decode_batch(buf, off, verify_crc=False)[1]
    except CorruptRecordError as exc:
        logger.warning("log.undecodable_batch", offset=_INT64.unpack_from(buf, off)[0], error=str(exc))
        return None
