"""Log compaction (cleanup.policy=compact): keep the newest record per key.

One pass, in a worker thread holding the log's ``_maint`` lock:

1. Cleanable range = closed segments (never the active one), cut at the first
   segment younger than ``min.compaction.lag.ms``.  Dirty part = segments at
   or past the cleaner checkpoint.
2. Key map = {key bytes: newest offset} over the dirty part (exact byte keys,
   in memory: about 100 bytes per distinct key plus the key).
3. Cleanable segments are grouped (consecutive, input bytes <= segment.bytes,
   offsets fit the 32-bit relative index) and each group is rewritten into one
   segment with the first one's base offset.  A record survives if it has a
   key, no newer offset for that key is in the map, and it is not a tombstone
   whose delete horizon has passed.  Batches keep baseOffset, lastOffsetDelta,
   producer fields, compression and timestamp type; an untouched batch is
   copied byte for byte; a batch left empty is dropped.  A group whose single
   segment would come out unchanged is left alone.
4. Tombstones use KIP-534's delete horizon: the first pass that keeps a batch
   with a tombstone rewrites it with attribute bit 6 set and baseTimestamp =
   now + delete.retention.ms; a pass at or after that time drops its
   tombstones.
5. Transactions (Kafka's ``LogCleaner`` with ``CleanedTransactionMetadata``):
   the cleanable range ends below the last stable offset (the caller's
   ``stable_offset``), so every transaction in it is decided.  Aborted
   transactions come from the ``.txnindex`` files (and, beyond Kafka, from
   ABORT markers of the range that no entry names); their data batches are
   dropped whole and never enter the key map.  An ABORT marker is kept, with
   its index entry carried to the cleaned segment, while data of its
   transaction was still seen in this pass; a COMMIT marker while any batch
   of its transaction was seen.  Once a marker may go it is treated like a
   tombstone: the first pass sets its delete horizon, a pass after it drops
   it.  Simplified: the last batch of a producer is not kept back for its
   sequence (a producer whose batches are all compacted away starts afresh,
   as after retention).

Swap protocol per group (every step through FileOps, crash-safe at each):
write ``B.log.cleaned`` + ``B.index.cleaned`` and fsync them; rename the index
then the log to ``.swap`` and fsync the directory -- the ``.log.swap`` rename
is the commit point; rename the old segments' files to ``.deleted``; rename
the swap files to ``B.index`` / ``B.log``; fsync the directory; swap the live
segment list; unlink the ``.deleted`` files.  Recovery removes ``.cleaned``
and ``.deleted`` files and completes any ``.log.swap`` (recovery.py), so a
crash before the commit keeps the old segments and one after it keeps the new
one; either holds the newest value of every key.

Concurrency: the group's old Segment objects stay valid for readers that
hold them (their fds outlive the unlink); the live list is swapped under the
log's short ``_lock``; appends go to the active segment, which the cleaner
never touches.  The pass checks ``log.stop_cleaning`` between batches.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import structlog

from odradek.protocol.records import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    decode_batch,
    encode_batch,
    parse_control_key,
)
from odradek.storage import txn_index
from odradek.storage.errors import CleaningAborted
from odradek.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    FileOps,
    SimulatedCrash,
    index_path,
    log_path,
    segment_name,
    txn_index_path,
    write_all,
)
from odradek.storage.index import OffsetIndex, encode_entries
from odradek.storage.segment import Segment
from odradek.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    import threading
    from contextlib import AbstractContextManager

    from odradek.storage.config import LogConfig


class CleanableLog(Protocol):
    """What the cleaner uses of a ``log.Log``: the log hands itself in (``Log.clean``), so this
    module never imports the log it cleans."""

    directory: Path
    config: LogConfig
    closed: bool
    cleaner_checkpoint: int
    stop_cleaning: threading.Event
    _maint: threading.Lock  # the log's maintenance lock: one pass, roll or truncation at a time

    @property
    def segments(self) -> tuple[Segment, ...]: ...

    @property
    def log_end_offset(self) -> int: ...

    def reading(self) -> AbstractContextManager[tuple[Segment, ...]]: ...

    def replace_segments(self, old: list[Segment], new: Segment | None) -> None: ...


logger = structlog.get_logger("odradek.storage")

_MAX_REL = 0x7FFFFFFF
_WRITE_CHUNK = 1 << 20


@dataclass
class CleanStats:
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    keys: int = 0
    end_offset: int = 0  # first offset not cleaned (the active segment's base)
    seconds: float = 0.0


def clean_log(log: CleanableLog, now_ms: int, *, ops: FileOps, stable_offset: int | None = None) -> CleanStats | None:
    """One compaction pass over ``log``; None when there is nothing to clean.

    ``stable_offset``: the partition's last stable offset; no segment reaching it is cleaned
    (Kafka's uncleanable boundary), so open transactions are never touched.
    """
    if not log.config.compact:
        return None
    with log._maint:
        if log.closed:
            return None
        started = time.perf_counter()
        segs = log.segments
        cleanable = list(segs[:-1])
        lag = log.config.min_compaction_lag_ms
        for i, seg in enumerate(cleanable):
            if (lag > 0 and seg.compute_max_timestamp() > now_ms - lag) or (
                    stable_offset is not None and segs[i + 1].base_offset > stable_offset):
                cleanable = cleanable[:i]
                break
        if not cleanable:
            return None
        following = segs[len(cleanable)].base_offset
        first_dirty = max(log.cleaner_checkpoint, cleanable[0].base_offset)
        stats = CleanStats(end_offset=following)
        aborted = _aborted_txns(log, cleanable, list(segs[len(cleanable):]))
        dirty = [s for s in cleanable if s.base_offset >= first_dirty]
        key_map = _build_key_map(log, dirty, _TxnTracker(aborted, dirty[0].base_offset if dirty else following))
        stats.keys = len(key_map)
        _rewrite(log, cleanable, following, key_map, now_ms, ops, stats,
                 _TxnTracker(aborted, cleanable[0].base_offset))
        log.cleaner_checkpoint = max(log.cleaner_checkpoint, following)
        stats.seconds = time.perf_counter() - started
        logger.info("log.cleaner.pass", dir=log.directory.name, segments_in=stats.segments_in,
                    segments_out=stats.segments_out, bytes_in=stats.bytes_in, bytes_out=stats.bytes_out,
                    records_in=stats.records_in, records_kept=stats.records_kept, keys=stats.keys,
                    seconds=round(stats.seconds, 3))
        return stats


class _TxnTracker:
    """Which transactional batches of a pass are aborted, and which markers may go (Kafka's
    ``CleanedTransactionMetadata``); fed every batch of the pass in offset order."""

    def __init__(self, aborted: list[AbortedTxn], start: int) -> None:
        self.pending = deque(sorted((e for e in aborted if e.last_offset >= start), key=lambda e: e.first_offset))
        self.aborted: dict[int, list] = {}  # producer id -> [entry, data seen in this pass]
        self.committed: set[int] = set()  # producers whose committed data was seen
        self.carried: list[AbortedTxn] = []  # entries of ABORT markers kept, for the cleaned index

    def _reach(self, offset: int) -> None:
        while self.pending and self.pending[0].first_offset <= offset:
            e = self.pending.popleft()
            self.aborted[e.producer_id] = [e, False]

    def on_data(self, h: BatchHeader) -> bool:
        """True when the batch belongs to an aborted transaction (drop it)."""
        last = h.base_offset + h.last_offset_delta
        self._reach(last)
        if not h.attributes & TRANSACTIONAL_MASK:
            return False
        ongoing = self.aborted.get(h.producer_id)
        if ongoing is not None and ongoing[0].last_offset > last:
            ongoing[1] = True
            return True
        self.committed.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, commit: bool) -> bool:
        """True when the marker may be removed (as a tombstone, after its delete horizon)."""
        self._reach(h.base_offset)
        if commit:
            if h.producer_id in self.committed:
                self.committed.discard(h.producer_id)
                return False
            return True
        ongoing = self.aborted.pop(h.producer_id, None)
        if ongoing is not None and ongoing[1]:
            self.carried.append(ongoing[0])
            return False
        if h.producer_id in self.committed:  # data the index does not call aborted: keep its marker
            self.committed.discard(h.producer_id)
            return False
        return True


def first_unstable_offset(log: CleanableLog) -> int:
    """The last stable offset read from the log alone: the first offset of the oldest
    transaction without its marker, else the log end (a header scan of the whole log, plus the
    one record of each marker; for cleaning without a running broker's producer state)."""
    opened: dict[int, int] = {}
    with log.reading() as segments:
        for seg in segments:
            for _pos, _buf, _off, h in seg.iter_batches():
                if h.producer_id < 0 or not h.attributes & TRANSACTIONAL_MASK:
                    continue
                if h.attributes & CONTROL_MASK:
                    opened.pop(h.producer_id, None)
                else:
                    opened.setdefault(h.producer_id, h.base_offset)
    return min(opened.values(), default=log.log_end_offset)


def _aborted_txns(log: CleanableLog, cleanable: list[Segment], later: list[Segment]) -> list[AbortedTxn]:
    """The aborted transactions of the range: the ``.txnindex`` entries, plus any ABORT marker of
    the range closing data of the range that no entry names (a log whose writer kept no index,
    or one lost): without them that data would count as committed and could hide, in the key
    map, a committed value that replay then finds gone."""
    indexed = [e for seg in cleanable for e in txn_index.read_entries(log.directory, seg.base_offset)]
    # a transaction with data in the range may have its ABORT marker (so its entry) in a later
    # segment, as Kafka's ``collectAbortedTransactions`` also reads the segments past the range
    following = later[0].base_offset
    indexed += [e for seg in later
                for e in txn_index.read_entries(log.directory, seg.base_offset) if e.first_offset < following]
    known = {(e.producer_id, e.last_offset) for e in indexed}
    opened: dict[int, int] = {}  # producer id -> first transactional offset seen in the range
    found = []
    stop = log.stop_cleaning
    for seg in cleanable:
        for _pos, buf, off, h in seg.iter_batches():
            if stop.is_set():
                raise CleaningAborted(log.directory.name)
            if h.producer_id < 0 or not h.attributes & TRANSACTIONAL_MASK:
                continue
            if not h.attributes & CONTROL_MASK:
                opened.setdefault(h.producer_id, h.base_offset)
                continue
            first = opened.pop(h.producer_id, None)
            if first is not None and _marker_type(buf, off) is False and (h.producer_id, h.base_offset) not in known:
                stable = min(opened.values(), default=h.base_offset + 1)
                found.append(AbortedTxn(h.producer_id, first, h.base_offset, stable))
    return sorted(indexed + found, key=lambda e: e.last_offset)


def _marker_type(buf: bytes, off: int) -> bool | None:
    """True for a COMMIT marker, False for ABORT, None for any other control batch."""
    try:
        records = decode_batch(buf, off, verify_crc=False)[1]
        kind = parse_control_key(records[0].key).type if records else None
    except (CorruptRecordError, IndexError):
        return None
    if kind == ControlRecordType.COMMIT:
        return True
    if kind == ControlRecordType.ABORT:
        return False
    return None


def _build_key_map(log: CleanableLog, dirty: list[Segment], txns: _TxnTracker) -> dict[bytes, int]:
    key_map: dict[bytes, int] = {}
    stop = log.stop_cleaning
    for seg in dirty:
        for _pos, buf, off, h in seg.iter_batches():
            if stop.is_set():
                raise CleaningAborted(log.directory.name)
            if h.attributes & CONTROL_MASK:
                commit = _marker_type(buf, off)
                if commit is not None:
                    txns.on_marker(h, commit)
                continue
            if txns.on_data(h):
                continue
            for r in decode_batch(buf, off, verify_crc=False)[1]:
                if r.key is not None:
                    key_map[r.key] = r.offset
    return key_map


def _rewrite(log: CleanableLog, cleanable: list[Segment], following: int, key_map: dict[bytes, int], now_ms: int,
             ops: FileOps, stats: CleanStats, txns: _TxnTracker) -> None:
    """Filter segment after segment, starting a new output segment when the next input might
    not fit (output so far + next input > segment.bytes) or offsets would overflow the index."""
    max_bytes = log.config.segment_bytes
    writer: _GroupWriter | None = None
    try:
        for i, seg in enumerate(cleanable):
            upper = cleanable[i + 1].base_offset if i + 1 < len(cleanable) else following
            if writer is not None and (writer.size + seg.size > max_bytes
                                       or upper - 1 - writer.base > _MAX_REL):
                writer.finish()
                writer = None
            if writer is None:
                writer = _GroupWriter(log, seg.base_offset, key_map, now_ms, ops, stats, txns)
            writer.add(seg)
        if writer is not None:
            writer.finish()
    except BaseException as exc:
        if writer is not None:
            writer.abort(exc)
        raise


def _filter_batch(buf: bytes, off: int, h: BatchHeader, key_map: dict[bytes, int], now_ms: int,
                  delete_retention_ms: int, stats: CleanStats,
                  txns: _TxnTracker) -> tuple[bytes | memoryview | None, bool]:
    """The bytes to keep for one batch (None: drop it) and whether they differ from the input."""
    size = h.batch_length + LOG_OVERHEAD
    raw = memoryview(buf)[off:off + size]
    horizon_set = bool(h.attributes & DELETE_HORIZON_MASK)
    horizon_passed = horizon_set and now_ms >= h.base_timestamp
    records = decode_batch(buf, off, verify_crc=False)[1]
    stats.records_in += len(records)
    if h.attributes & CONTROL_MASK:
        commit = _marker_type(buf, off)
        if commit is not None and not txns.on_marker(h, commit):
            stats.records_kept += len(records)
            return raw, False  # its transaction still has data here: kept as it is
        if horizon_passed:
            return None, True
        if horizon_set:
            stats.records_kept += len(records)
            return raw, False
        kept = records
        tombstones = True
    elif txns.on_data(h):
        return None, True  # aborted transactional data
    else:
        kept = []
        for r in records:
            k = r.key
            if k is None or key_map.get(k, -1) > r.offset:
                continue
            if r.value is None and horizon_passed:
                stats.tombstones_dropped += 1
                continue
            kept.append(r)
        tombstones = any(r.value is None for r in kept)
        if len(kept) == len(records) and (horizon_set or not tombstones):
            stats.records_kept += len(kept)
            return raw, False
        if not kept:
            return None, True
    stats.records_kept += len(kept)
    if horizon_set and tombstones:
        horizon: int | None = h.base_timestamp
    elif tombstones:
        horizon = now_ms + delete_retention_ms
    else:
        horizon = None
    append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    new = encode_batch(
        kept, base_offset=h.base_offset, compression=h.compression, timestamp_type=1 if append_time else 0,
        producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch, transactional=h.is_transactional,
        control=h.is_control, delete_horizon=horizon, last_offset_delta=h.last_offset_delta,
        max_timestamp=h.max_timestamp if append_time else None)
    return new, True


class _GroupWriter:
    """Filters consecutive segments into one ``B.log.cleaned`` and swaps it in (module docstring)."""

    def __init__(self, log: CleanableLog, base: int, key_map: dict[bytes, int], now_ms: int, ops: FileOps,
                 stats: CleanStats, txns: _TxnTracker) -> None:
        self.log = log
        self.txns = txns
        self.carried_from = len(txns.carried)
        self.base = base
        self.key_map = key_map
        self.now_ms = now_ms
        self.ops = ops
        self.stats = stats
        self.group: list[Segment] = []
        self.stem = segment_name(base)
        directory = log.directory
        self.log_cleaned = directory / (self.stem + LOG_SUFFIX + CLEANED_SUFFIX)
        self.idx_cleaned = directory / (self.stem + INDEX_SUFFIX + CLEANED_SUFFIX)
        self.fd = os.open(self.log_cleaned, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.out = bytearray()
        self.written = 0
        self.entries: list[tuple[int, int]] = []
        self.since = 0
        self.changed = False
        self.max_ts = -1
        self.next_offset = base
        self.committed = False

    @property
    def size(self) -> int:
        return self.written + len(self.out)

    def add(self, seg: Segment) -> None:
        stats = self.stats
        self.group.append(seg)
        self.changed |= len(self.group) > 1
        stats.segments_in += 1
        stats.bytes_in += seg.size
        stop = self.log.stop_cleaning
        interval = self.log.config.index_interval_bytes
        retention = self.log.config.delete_retention_ms
        for _pos, buf, off, h in seg.iter_batches():
            if stop.is_set():
                raise CleaningAborted(self.log.directory.name)
            kept, diff = _filter_batch(buf, off, h, self.key_map, self.now_ms, retention, stats, self.txns)
            self.changed |= diff
            if kept is None:
                continue
            last = h.base_offset + h.last_offset_delta
            if self.since > interval:
                self.entries.append((last - self.base, self.size))
                self.since = 0
            self.since += len(kept)
            self.out += kept
            self.next_offset = last + 1
            if h.max_timestamp > self.max_ts:
                self.max_ts = h.max_timestamp
            if len(self.out) >= _WRITE_CHUNK:
                write_all(self.fd, self.out)
                self.written += len(self.out)
                self.out.clear()

    def abort(self, exc: BaseException) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if not self.committed and not isinstance(exc, SimulatedCrash):  # a crash leaves them to recovery
            for p in (self.log_cleaned, self.idx_cleaned):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass

    def finish(self) -> None:
        """Swap the cleaned file in (or drop it when a lone segment came out unchanged)."""
        log, ops, stats = self.log, self.ops, self.stats
        directory = log.directory
        if not self.changed:
            stats.segments_in -= 1
            stats.bytes_in -= self.group[0].size
            os.close(self.fd)
            self.fd = -1
            os.unlink(self.log_cleaned)
            return
        write_all(self.fd, self.out)
        self.written += len(self.out)
        self.out = bytearray()
        ops.fsync_fd(self.fd, self.log_cleaned.name)
        ops.write_file(self.idx_cleaned, encode_entries(self.entries))
        idx_fd = os.open(self.idx_cleaned, os.O_RDWR | os.O_APPEND)
        new_seg = Segment(directory, self.base, self.fd,
                          OffsetIndex(index_path(directory, self.base), self.base, self.entries, idx_fd),
                          self.written, next_offset=self.next_offset, max_timestamp=self.max_ts,
                          created_ms=self.now_ms)
        self.fd = -1  # owned by new_seg now
        log_swap = directory / (self.stem + LOG_SUFFIX + SWAP_SUFFIX)
        idx_swap = directory / (self.stem + INDEX_SUFFIX + SWAP_SUFFIX)
        ops.rename(self.idx_cleaned, idx_swap)
        ops.rename(self.log_cleaned, log_swap)
        ops.fsync_dir(directory)  # commit point: recovery completes the swap from here on
        self.committed = True
        deleted: list[Path] = []
        for old in sorted(self.group, key=lambda s: -s.base_offset):
            for p in (log_path(directory, old.base_offset), index_path(directory, old.base_offset),
                      txn_index_path(directory, old.base_offset)):
                if p.exists():
                    target = p.with_name(p.name + DELETED_SUFFIX)
                    ops.rename(p, target)
                    deleted.append(target)
        ops.rename(idx_swap, index_path(directory, self.base))
        ops.rename(log_swap, log_path(directory, self.base))
        # derived data (the data plane rewrites it from the log on load): no swap step of its own
        txn_index.write_entries(directory, self.base, self.txns.carried[self.carried_from:])
        ops.fsync_dir(directory)
        log.replace_segments(self.group, new_seg)
        stats.segments_out += 1
        stats.bytes_out += self.written
        for p in deleted:
            ops.unlink(p)
