"""One segment: a ``<base>.log`` of RecordBatch v2 bytes and its sparse ``.index``.

A segment is appended to only while it is the active (last) one; once rolled
its bytes never change in place (the cleaner replaces whole segments by new
files and new Segment objects).  That is what lets readers and the cleaner
thread use a closed segment without locks.  File descriptors are closed when
the last reference goes (``weakref.finalize``), so a reader still holding a
segment that retention or the cleaner just unlinked keeps reading valid bytes.
"""

from __future__ import annotations

import os
import struct
import weakref
from collections.abc import Iterator
from pathlib import Path

from odradek.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    read_batch_header,
)
from odradek.storage.files import index_path, log_path, pread_exact, txn_index_path, write_all
from odradek.storage.index import OffsetIndex

CHUNK = 1 << 20
_INT32 = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")


class ScanError(Exception):
    """Invalid bytes at ``pos`` in a segment file (why in ``reason``)."""

    def __init__(self, pos: int, reason: str) -> None:
        super().__init__(f"{reason} at position {pos}")
        self.pos = pos
        self.reason = reason


def iter_file_batches(fd: int, start: int, end: int, chunk: int = CHUNK
                      ) -> Iterator[tuple[int, bytes, int, BatchHeader]]:
    """Yield ``(file position, buffer, offset in buffer, header)`` per batch in [start, end).

    Checks length and magic only (CRC is the caller's choice); raises
    ScanError at the first batch that is cut short or malformed.
    """
    pos = start
    buf = b""
    buf_start = start
    while pos < end:
        off = pos - buf_start
        if len(buf) - off < HEADER_SIZE:
            buf = pread_exact(fd, min(chunk, end - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < LOG_OVERHEAD:
                raise ScanError(pos, "partial batch header")
        size = _INT32.unpack_from(buf, off + 8)[0] + LOG_OVERHEAD
        if size < HEADER_SIZE:
            raise ScanError(pos, f"batch length {size - LOG_OVERHEAD} below the header size")
        if pos + size > end:
            raise ScanError(pos, f"batch of {size} bytes runs past the end of the file")
        if len(buf) - off < size:
            buf = pread_exact(fd, min(max(size, chunk), end - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < size:
                raise ScanError(pos, "file shorter than expected")
        if buf[off + MAGIC_OFFSET] != 2:
            raise ScanError(pos, f"unsupported magic {buf[off + MAGIC_OFFSET]}")
        yield pos, buf, off, read_batch_header(buf, off)
        pos += size


def whole_batches(buf: bytes, pos: int = 0, max_bytes: int | None = None) -> tuple[list[int], int]:
    """Offsets of the whole magic-2 batches that follow each other from ``pos``, and where they end.

    Only lengths and magic are looked at.  Stops before the first batch that
    is cut short or malformed, or once ``max_bytes`` are covered.
    """
    end = len(buf)
    start = pos
    offsets: list[int] = []
    while end - pos >= HEADER_SIZE:
        size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > end or buf[pos + MAGIC_OFFSET] != 2:
            break
        offsets.append(pos)
        pos += size
        if max_bytes is not None and pos - start >= max_bytes:
            break
    return offsets, pos


def iter_file_runs(fd: int, start: int, end: int, chunk: int = 4 * CHUNK
                   ) -> Iterator[tuple[bytes, list[int]]]:
    """Yield ``(buffer, offsets in it)`` of the batches in [start, end), many per buffer.

    For readers that decode many batches at once (the pipeline): no header
    object per batch, only lengths and magic are looked at.  Where a fresh
    buffer does not start with a whole valid batch (one bigger than
    ``chunk``, or bad bytes), :func:`iter_file_batches` reads that batch or
    raises the ScanError it raises.
    """
    pos = start
    while pos < end:
        buf = pread_exact(fd, min(chunk, end - pos), pos)
        offsets, off = whole_batches(buf)
        if offsets:
            yield buf, offsets
            pos += off
            continue
        for _pos, one, o, header in iter_file_batches(fd, pos, end, chunk):
            yield one, [o]
            pos += header.size
            break
        else:
            return


class Segment:
    """A ``.log`` file (one fd, O_APPEND while active) plus its OffsetIndex."""

    __slots__ = ("base_offset", "directory", "fd", "index", "size", "next_offset", "max_timestamp",
                 "first_timestamp", "created_ms", "bytes_since_index", "_finalizer", "__weakref__")

    def __init__(self, directory: Path, base_offset: int, fd: int, index: OffsetIndex, size: int,
                 *, next_offset: int | None, max_timestamp: int | None, created_ms: int,
                 first_timestamp: int | None = None) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.fd = fd
        self.index = index
        self.size = size  # bytes readers may see: always a whole-batch boundary
        self.next_offset = next_offset  # last offset + 1; None = not computed (trusted segment)
        self.max_timestamp = max_timestamp  # None = not computed yet
        self.first_timestamp = first_timestamp  # first batch's maxTimestamp, drives segment.ms
        self.created_ms = created_ms
        self.bytes_since_index = 0
        self._finalizer = weakref.finalize(self, _close_fd, fd)

    @classmethod
    def create(cls, directory: Path, base_offset: int, now_ms: int) -> Segment:
        """A fresh, empty active segment (an existing file of that name is emptied)."""
        fd = os.open(log_path(directory, base_offset), os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        txn_index_path(directory, base_offset).unlink(missing_ok=True)  # a stale one would mislead
        index = OffsetIndex.write_new(index_path(directory, base_offset), base_offset, [])
        return cls(directory, base_offset, fd, index, 0, next_offset=base_offset, max_timestamp=-1,
                   created_ms=now_ms)

    @property
    def path(self) -> Path:
        return log_path(self.directory, self.base_offset)

    @property
    def last_offset(self) -> int | None:
        return None if self.next_offset is None else self.next_offset - 1

    # --- writing (active segment, event-loop thread only) -------------------------

    def append(self, data: bytes | bytearray, batches: list[tuple[int, int, int, int]],
               index_interval: int) -> None:
        """Write a patched record set; ``batches`` = (position in data, size, last offset, max ts).

        All or nothing: if the log or the index write fails (a full disk),
        both files are cut back to where they were, so the next append's
        positions are still the file's.
        """
        start = self.size
        since_index = self.bytes_since_index
        try:
            write_all(self.fd, data)
            for rel_pos, size, last_offset, _ts in batches:
                if since_index > index_interval:
                    self.index.append(last_offset, start + rel_pos)
                    since_index = 0
                since_index += size
        except BaseException:
            self.index.truncate_to_position(start)
            os.ftruncate(self.fd, start)  # never leave a partial batch behind a live log
            raise
        self.bytes_since_index = since_index
        for _pos, _size, _last, max_ts in batches:
            if self.first_timestamp is None and max_ts >= 0:
                self.first_timestamp = max_ts
            if self.max_timestamp is not None and max_ts > self.max_timestamp:
                self.max_timestamp = max_ts
        self.next_offset = batches[-1][2] + 1
        self.size = start + len(data)

    def truncate_to_position(self, position: int, next_offset: int) -> None:
        self.index.truncate_to_position(position)
        os.ftruncate(self.fd, position)
        self.size = position
        self.next_offset = next_offset
        self.max_timestamp = None
        self.bytes_since_index = 0
        if position == 0:
            self.first_timestamp = None

    def flush(self) -> None:
        os.fsync(self.fd)
        self.index.flush()

    # --- reading (any thread) -------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self.size)
        if end <= position:
            return b""
        return pread_exact(self.fd, end - position, position)

    def find(self, offset: int, end: int | None = None) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset >= ``offset``."""
        _idx_offset, start = self.index.lookup(offset)
        limit = self.size if end is None else end
        for pos, _buf, _off, header in iter_file_batches(self.fd, start, limit, 64 * 1024):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    def iter_batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, bytes, int, BatchHeader]]:
        return iter_file_batches(self.fd, start, self.size if end is None else end)

    def last_modified_ms(self) -> int:
        """The file's mtime, through the descriptor: a pinned reader gets it even after
        retention or a delete unlinked the file (Kafka's ``LogSegment.lastModified``)."""
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def compute_max_timestamp(self) -> int:
        """Largest batch maxTimestamp (header scan, cached); -1 for an empty segment."""
        if self.max_timestamp is None:
            best = -1
            for _pos, buf, off, _header in self.iter_batches():
                ts = _MAX_TS.unpack_from(buf, off + 35)[0]
                if ts > best:
                    best = ts
            self.max_timestamp = best
        return self.max_timestamp

    def compute_next_offset(self) -> int:
        """Last offset + 1 (scans from the last index entry), or the base for an empty segment."""
        if self.next_offset is None:
            _o, start = self.index.lookup(1 << 62)
            nxt = self.base_offset
            for _pos, _buf, _off, header in self.iter_batches(start):
                nxt = header.base_offset + header.last_offset_delta + 1
            self.next_offset = nxt
        return self.next_offset

    def read_first_timestamp(self) -> int | None:
        if self.size >= HEADER_SIZE:
            head = pread_exact(self.fd, HEADER_SIZE, 0)
            if len(head) == HEADER_SIZE:
                ts = _MAX_TS.unpack_from(head, 35)[0]
                return ts if ts >= 0 else None
        return None

    def close(self) -> None:
        self._finalizer()
        self.index.close()


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
