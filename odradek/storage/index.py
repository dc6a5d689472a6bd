"""Sparse offset index: Kafka's ``.index`` layout, kept in memory and appended to disk.

File format (same bytes as Kafka): 8-byte big-endian entries
``{int32 offset - segment base, int32 byte position in the .log}``, offsets and
positions strictly increasing.  An entry is added for a batch when more than
``index.interval.bytes`` (4096) bytes were written since the previous entry;
it maps the batch's *last* offset to the position where the batch starts, so
the first batch of a segment gets none.  Lookup takes the greatest entry whose
offset <= target and scans forward in the .log.

Unlike Kafka the file is not pre-allocated or memory-mapped: entries are
appended with ``os.write`` and mirrored in two int lists, so the file is
always exactly its used length and Kafka reads it as a trimmed index.  The
index is derived data with no checksum: whenever it fails the sanity check
(size, ordering, positions inside the .log) or its segment is recovered, it
is rebuilt from the .log.
"""

from __future__ import annotations

import bisect
import os
import struct
import weakref
from pathlib import Path

from odradek.storage.files import write_all

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = 8


def encode_entries(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(ENTRY.pack(rel, pos) for rel, pos in entries)


def decode_entries(data: bytes) -> list[tuple[int, int]]:
    usable = len(data) - len(data) % ENTRY_SIZE  # a torn last entry is dropped
    return [ENTRY.unpack_from(data, p) for p in range(0, usable, ENTRY_SIZE)]


def entries_sane(entries: list[tuple[int, int]], log_size: int) -> bool:
    prev_rel = prev_pos = -1
    for rel, pos in entries:
        if rel <= prev_rel or pos <= prev_pos or pos >= log_size or rel < 0:
            return False
        prev_rel, prev_pos = rel, pos
    return True


class OffsetIndex:
    """One segment's index: in-memory lists plus an append-only file descriptor."""

    __slots__ = ("path", "base_offset", "_rel", "_pos", "_fd", "_finalizer", "_dirty", "__weakref__")

    def __init__(self, path: Path, base_offset: int, entries: list[tuple[int, int]], fd: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._rel = [e[0] for e in entries]
        self._pos = [e[1] for e in entries]
        self._fd = fd
        self._finalizer = weakref.finalize(self, _close_fd, fd)
        self._dirty = True  # written (or of unknown state) since the last fsync

    @classmethod
    def write_new(cls, path: Path, base_offset: int, entries: list[tuple[int, int]]) -> OffsetIndex:
        """(Re)write the file from ``entries`` and keep it open for appends."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        if entries:
            write_all(fd, encode_entries(entries))
        return cls(path, base_offset, entries, fd)

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size: int) -> OffsetIndex | None:
        """Open an existing index if it passes the sanity check, else None (rebuild it)."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) % ENTRY_SIZE:
            return None
        entries = decode_entries(data)
        if not entries_sane(entries, log_size):
            return None
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        return cls(path, base_offset, entries, fd)

    @property
    def fd(self) -> int:
        return self._fd

    def __len__(self) -> int:
        return len(self._rel)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._rel, self._pos, strict=True))

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            return  # never break ordering; a missing entry only costs a longer scan
        self._dirty = True
        try:
            write_all(self._fd, ENTRY.pack(rel, position))
        except BaseException:
            os.ftruncate(self._fd, len(self._rel) * ENTRY_SIZE)  # no partial entry left behind
            raise
        self._rel.append(rel)
        self._pos.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry <= ``offset``; (base, 0) if none."""
        i = bisect.bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position`` (the .log is being cut there)."""
        i = bisect.bisect_left(self._pos, position)
        if i == len(self._pos):
            return
        del self._rel[i:]
        del self._pos[i:]
        os.ftruncate(self._fd, i * ENTRY_SIZE)
        self._dirty = True

    def flush(self) -> None:
        """fsync if anything changed since the last flush."""
        fd = self.claim_dirty()
        if fd is not None:
            try:
                os.fsync(fd)
            except BaseException:
                self.mark_dirty()
                raise

    def claim_dirty(self) -> int | None:
        """The fd to fsync if anything changed since the last claim, else None.

        An entry is added only every ``index.interval.bytes`` of log, so most
        group-commit rounds (fsync mode ``always``) need one fsync, not two.
        A caller whose fsync fails gives the claim back with ``mark_dirty``.
        """
        if not self._dirty:
            return None
        self._dirty = False
        return self._fd

    def mark_dirty(self) -> None:
        self._dirty = True

    def close(self) -> None:
        self._finalizer()


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
