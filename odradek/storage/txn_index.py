"""The aborted-transaction index: one ``<base>.txnindex`` beside each segment, Kafka's bytes.

Kafka's ``TransactionIndex`` / ``AbortedTxn``: a sequence of 34-byte
big-endian entries ``int16 version (0) | int64 producer id | int64 first
offset | int64 last offset (the ABORT marker's) | int64 last stable offset``,
appended to the index of the segment that received the marker, with strictly
increasing last offsets.  Only aborted transactions are indexed.

The file is derived data: the data plane rewrites it from the log for every
segment it replays when it loads a partition's producer state (all of them
without a producer snapshot, those after the snapshot otherwise), so it is
fsynced only before a snapshot vouches for it.  The cleaner reads it to find
the data it must drop.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from odradek.storage.files import txn_index_path

VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(ENTRY.pack(VERSION, *e) for e in entries)


def decode(data: bytes) -> list[AbortedTxn]:
    """Whole entries of ``data`` (a torn last entry is ignored; an unknown version ends the read)."""
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != VERSION:
            break
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def read_entries(directory: Path, base_offset: int) -> list[AbortedTxn]:
    try:
        return decode(txn_index_path(directory, base_offset).read_bytes())
    except FileNotFoundError:
        return []


def append_entry(directory: Path, base_offset: int, entry: AbortedTxn) -> None:
    """Add one entry at the end of the segment's index (blocking, small: one write)."""
    fd = os.open(txn_index_path(directory, base_offset), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, encode([entry]))
    finally:
        os.close(fd)


def sync(directory: Path, base_offset: int) -> None:
    """fsync the segment's index if it has one: before a producer snapshot vouches for the
    segment (a snapshot past an ABORT marker means its entry is not replayed again)."""
    try:
        fd = os.open(txn_index_path(directory, base_offset), os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_entries(directory: Path, base_offset: int, entries: list[AbortedTxn]) -> None:
    """Make the segment's index hold exactly ``entries`` (no file when there are none);
    left alone when it already does, so a rebuild of a clean log writes nothing."""
    path = txn_index_path(directory, base_offset)
    data = encode(entries)
    try:
        current = path.read_bytes()
    except FileNotFoundError:
        current = None
    if current == data or (current is None and not data):
        return
    if not data:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def truncate_entries(directory: Path, base_offset: int, end_offset: int) -> None:
    """Drop the entries whose marker is at or past ``end_offset`` (the log was cut there)."""
    entries = read_entries(directory, base_offset)
    kept = [e for e in entries if e.last_offset < end_offset]
    if len(kept) != len(entries):
        write_entries(directory, base_offset, kept)
