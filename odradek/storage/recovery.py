"""Open a partition directory after any crash: finish or undo file swaps, validate, cut.

Recovery point (Kafka's): every offset below it was fsynced together with its
index, so segments wholly below it are trusted (only their index gets the
sanity check) and the segment holding it is re-read from its last index entry
below the point.  Every batch at or past the recovery point is validated:
length, magic 2, offsets increasing and inside the segment, CRC-32C.  The
first failure cuts the log there: later segments are deleted (highest
first, so a crash mid-way leaves the same cut to find again), the segment is
truncated, and ``log.recovery.truncated`` is logged.  With no recovery point
(a Log opened on its own, or after an unclean stop with no checkpoint)
everything is validated.

Kafka ``.timeindex`` files are not maintained (ListOffsets by time scans
batch headers, Log.offset_for_timestamp); any found are removed on open, so
Kafka rebuilds them instead of trusting stale ones.

Leftovers of an interrupted clean/delete (cleaner.py has the protocol):
``*.cleaned`` and ``*.deleted`` are removed; a ``<base>.log.swap`` is a
committed replacement: old segments whose base offset lies in
``[base, max(base + 1, swap's next offset))`` are deleted and the swap files
renamed into place.
"""

from __future__ import annotations

import os
from dataclasses import field
from pathlib import Path

import structlog

from odradek.protocol.lean_dataclass import dataclass
from odradek.protocol.records import compute_crc
from odradek.storage import producer_snapshot, txn_index
from odradek.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    TXNINDEX_SUFFIX,
    FileOps,
    index_path,
    log_path,
    parse_base_offset,
    segment_name,
)
from odradek.storage.index import OffsetIndex, decode_entries, entries_sane
from odradek.storage.segment import ScanError, Segment, iter_file_batches

logger = structlog.get_logger("odradek.storage")

_MAX_REL = 0x7FFFFFFF


@dataclass
class WalkResult:
    end: int
    next_offset: int | None
    max_timestamp: int | None
    entries: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None
    batches: int = 0


def walk_segment(fd: int, base: int, start: int, size: int, *, crc_from: int,
                 next_base: int | None, index_interval: int, contiguous: bool = False) -> WalkResult:
    """Validate batches from ``start``; CRC only for batches whose last offset >= ``crc_from``.

    ``contiguous`` (logs never compacted): each batch must start right after the previous one.
    """
    res = WalkResult(end=start, next_offset=None, max_timestamp=-1 if start == 0 else None)
    prev_last = base - 1
    check_next = contiguous and start == 0
    since = 0
    try:
        for pos, buf, off, h in iter_file_batches(fd, start, size):
            last = h.base_offset + h.last_offset_delta
            if h.last_offset_delta < 0 or h.records_count < 0:
                raise ScanError(pos, "negative lastOffsetDelta or record count")
            if h.base_offset <= prev_last or h.base_offset < base:
                raise ScanError(pos, f"offset {h.base_offset} does not follow {prev_last}")
            if check_next and h.base_offset != prev_last + 1:
                raise ScanError(pos, f"offset {h.base_offset} leaves a gap after {prev_last}")
            check_next = contiguous
            if last - base > _MAX_REL or (next_base is not None and last >= next_base):
                raise ScanError(pos, f"offset {last} outside its segment")
            if last >= crc_from and compute_crc(buf, off, h.batch_length + 12) != h.crc:
                raise ScanError(pos, "CRC mismatch")
            if since > index_interval:
                res.entries.append((last - base, pos))
                since = 0
            since += h.batch_length + 12
            if res.max_timestamp is not None and h.max_timestamp > res.max_timestamp:
                res.max_timestamp = h.max_timestamp
            prev_last = last
            res.next_offset = last + 1
            res.end = pos + h.batch_length + 12
            res.batches += 1
    except ScanError as exc:
        res.error = exc.reason
        res.end = exc.pos
    return res


def _unlink_quiet(path: Path, ops: FileOps) -> None:
    if path.exists():
        ops.unlink(path)


def _segment_files(directory: Path, base: int) -> list[Path]:
    stem = segment_name(base)
    return [directory / (stem + s) for s in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)]


def clean_leftovers(directory: Path, ops: FileOps, index_interval: int) -> None:
    """Remove half-done work and complete committed swaps (see module docstring)."""
    names = sorted(os.listdir(directory))
    for name in names:
        if name.endswith(CLEANED_SUFFIX) or name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
            logger.info("log.recovery.leftover_removed", dir=str(directory), file=name)
            ops.unlink(directory / name)
    swaps = sorted(n for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX) and parse_base_offset(n) is not None)
    for name in swaps:
        base = parse_base_offset(name)
        assert base is not None
        swap = directory / name
        fd = os.open(swap, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            res = walk_segment(fd, base, 0, size, crc_from=-1, next_base=None, index_interval=index_interval)
            if res.error is not None:  # fsynced before commit, so this means the disk lied
                logger.warning("log.recovery.truncated", dir=str(directory), segment=name,
                               position=res.end, bytes_cut=size - res.end, reason=res.error)
                os.ftruncate(fd, res.end)
        finally:
            os.close(fd)
        upper = max(base + 1, res.next_offset or base)
        for other in sorted(os.listdir(directory)):
            ob = parse_base_offset(other)
            if ob is not None and other.endswith(LOG_SUFFIX) and base <= ob < upper:
                for p in _segment_files(directory, ob):
                    _unlink_quiet(p, ops)
        idx_swap = directory / (segment_name(base) + INDEX_SUFFIX + SWAP_SUFFIX)
        if idx_swap.exists():
            ops.rename(idx_swap, index_path(directory, base))
        ops.rename(swap, log_path(directory, base))
        ops.fsync_dir(directory)
        logger.info("log.recovery.swap_completed", dir=str(directory), segment=segment_name(base))
    for name in sorted(os.listdir(directory)):
        if name.endswith(INDEX_SUFFIX + SWAP_SUFFIX):  # its .log.swap was never committed
            ops.unlink(directory / name)
        elif name.endswith(TIMEINDEX_SUFFIX):
            # not maintained here; a stale one would mislead Kafka, a missing one it rebuilds
            ops.unlink(directory / name)
        elif name.endswith(INDEX_SUFFIX) or name.endswith(TXNINDEX_SUFFIX):
            b = parse_base_offset(name)
            if b is not None and not log_path(directory, b).exists():
                ops.unlink(directory / name)


def load_segments(directory: Path, *, recovery_point: int, log_start_offset: int, now_ms: int,
                  index_interval: int, ops: FileOps, contiguous: bool = False) -> list[Segment]:
    """Recover ``directory`` and return its segments, the last one open for appends.

    ``contiguous`` (a log that is not compacted): offsets must have no gaps, also
    across segments, so a lost tail of an older segment cuts the log there.
    Compacted logs have legitimate gaps; for them only ordering is checked.
    """
    clean_leftovers(directory, ops, index_interval)
    bases = sorted(b for n in os.listdir(directory)
                   if n.endswith(LOG_SUFFIX) and (b := parse_base_offset(n)) is not None)
    if not bases:
        return [Segment.create(directory, log_start_offset, now_ms)]
    segments: list[Segment] = []
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        fd = os.open(log_path(directory, base), os.O_RDWR | os.O_APPEND)
        size = os.fstat(fd).st_size
        if next_base is not None and next_base <= recovery_point:
            segments.append(_trusted(directory, base, fd, size, next_base, now_ms, index_interval))
            continue
        seg, cut = _validated(directory, base, fd, size, next_base, recovery_point, now_ms, index_interval,
                              contiguous)
        if (cut is None and contiguous and next_base is not None and seg.next_offset is not None
                and seg.next_offset != next_base):
            cut = (seg.size, f"segment ends at offset {seg.next_offset} but the next starts at {next_base}")
        if cut is not None:
            pos, reason = cut
            dropped = [segment_name(b) + LOG_SUFFIX for b in bases[i + 1:]]
            dropped_bytes = 0
            for b in reversed(bases[i + 1:]):
                lp = log_path(directory, b)
                dropped_bytes += lp.stat().st_size if lp.exists() else 0
                for p in reversed(_segment_files(directory, b)):
                    _unlink_quiet(p, ops)
            seg.truncate_to_position(pos, seg.next_offset if seg.next_offset is not None else base)
            # what indexed or snapshotted the cut-off batches goes too (the data plane's replay
            # writes them again from what is left)
            txn_index.truncate_entries(directory, base, seg.next_offset)
            producer_snapshot.delete_above(directory, seg.next_offset)
            logger.warning("log.recovery.truncated", dir=str(directory), segment=segment_name(base) + LOG_SUFFIX,
                           position=pos, bytes_cut=size - pos + dropped_bytes, reason=reason,
                           deleted_segments=dropped)
            segments.append(seg)
            break
        segments.append(seg)
    last = segments[-1]
    last.compute_next_offset()
    last.first_timestamp = last.read_first_timestamp()
    last.created_ms = now_ms
    last.bytes_since_index = 0
    return segments


def _rebuild_index(directory: Path, base: int, fd: int, size: int, index_interval: int) -> tuple[OffsetIndex, WalkResult]:
    res = walk_segment(fd, base, 0, size, crc_from=1 << 62, next_base=None, index_interval=index_interval)
    logger.info("log.recovery.index_rebuilt", dir=str(directory), segment=segment_name(base), entries=len(res.entries))
    return OffsetIndex.write_new(index_path(directory, base), base, res.entries), res


def _trusted(directory: Path, base: int, fd: int, size: int, next_base: int, now_ms: int,
             index_interval: int) -> Segment:
    index = OffsetIndex.load(index_path(directory, base), base, size)
    next_offset = None
    if index is None:
        index, res = _rebuild_index(directory, base, fd, size, index_interval)
        next_offset = res.next_offset if res.error is None else None
    return Segment(directory, base, fd, index, size, next_offset=next_offset, max_timestamp=None,
                   created_ms=now_ms)


def _validated(directory: Path, base: int, fd: int, size: int, next_base: int | None, recovery_point: int,
               now_ms: int, index_interval: int, contiguous: bool) -> tuple[Segment, tuple[int, str] | None]:
    kept: list[tuple[int, int]] = []
    if base < recovery_point:
        try:
            with open(index_path(directory, base), "rb") as f:
                entries = decode_entries(f.read())
        except FileNotFoundError:
            entries = []
        if entries_sane(entries, size):
            kept = [e for e in entries if base + e[0] < recovery_point]
    start = kept[-1][1] if kept else 0
    res = walk_segment(fd, base, start, size, crc_from=recovery_point, next_base=next_base,
                       index_interval=index_interval, contiguous=contiguous)
    if start and res.batches == 0:  # the trusted entry led nowhere: validate the whole segment
        kept, start = [], 0
        res = walk_segment(fd, base, 0, size, crc_from=recovery_point, next_base=next_base,
                           index_interval=index_interval, contiguous=contiguous)
    entries = kept + [e for e in res.entries if not kept or e[0] > kept[-1][0]]
    index = OffsetIndex.write_new(index_path(directory, base), base, entries)
    next_offset = res.next_offset
    if next_offset is None and start == 0:
        next_offset = base
    seg = Segment(directory, base, fd, index, size, next_offset=next_offset,
                  max_timestamp=res.max_timestamp, created_ms=now_ms)
    if res.error is not None:
        return seg, (res.end, res.error)
    return seg, None
