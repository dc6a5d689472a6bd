"""Producer-state snapshots: ``<20-digit offset>.snapshot`` in a partition directory, Kafka's bytes.

Kafka's ``ProducerStateManager`` (schema ``ProducerSnapshot.json``, version 1):
``int16 version | uint32 CRC-32C of what follows | int32 count`` then per producer
``int64 producer id | int16 epoch | int32 last sequence | int64 last offset |
int32 offset delta | int64 timestamp | int32 coordinator epoch | int64 current
txn first offset (-1 = none)``.  A snapshot named N holds the state of every
batch below offset N; a reader loads the newest one at or below the log end
and replays the batches from N on.

Snapshots are a shortcut, never the truth: one that is torn or fails its CRC
is ignored (the caller falls back to an older one or a full scan), and one
past the log end (the log was cut back in a crash or a truncation) is
deleted.  So they are written without fsync.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from odradek.protocol import crc as crc32c
from odradek.storage.files import parse_base_offset, segment_name

SUFFIX = ".snapshot"
VERSION = 1
KEEP = 2  # the newest ones kept (Kafka keeps those above the log start; one older is a spare)
_HEAD = struct.Struct(">hIi")  # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = 6


class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    txn_first_offset: int


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / (segment_name(offset) + SUFFIX)


def encode(entries: list[SnapshotEntry]) -> bytes:
    body = bytearray(_HEAD.size + _ENTRY.size * len(entries))
    _HEAD.pack_into(body, 0, VERSION, 0, len(entries))
    pos = _HEAD.size
    for e in entries:
        _ENTRY.pack_into(body, pos, *e)
        pos += _ENTRY.size
    struct.pack_into(">I", body, 2, crc32c.crc32c(memoryview(body)[_CRC_FROM:]))
    return bytes(body)


def decode(data: bytes) -> list[SnapshotEntry] | None:
    """The entries, or None when the bytes are not a whole, valid version-1 snapshot."""
    if len(data) < _HEAD.size:
        return None
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != VERSION or count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        return None
    if crc32c.crc32c(memoryview(data)[_CRC_FROM:]) != crc:
        return None
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)) for i in range(count)]


def offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(b for n in names if n.endswith(SUFFIX) and (b := parse_base_offset(n)) is not None)


def write(directory: Path, offset: int, entries: list[SnapshotEntry]) -> None:
    """Write the snapshot for ``offset`` (temp file, then rename) and drop all but the newest."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(encode(entries))
    os.replace(tmp, path)
    for old in offsets(directory)[:-KEEP]:
        snapshot_path(directory, old).unlink(missing_ok=True)


def delete_above(directory: Path, offset: int) -> None:
    """Drop snapshots that claim more than the log holds (named past ``offset``)."""
    for o in offsets(directory):
        if o > offset:
            snapshot_path(directory, o).unlink(missing_ok=True)


def latest(directory: Path, end_offset: int) -> tuple[int, list[SnapshotEntry]] | None:
    """The newest valid snapshot at or below ``end_offset`` (newer ones are deleted first)."""
    delete_above(directory, end_offset)
    for o in reversed(offsets(directory)):
        try:
            entries = decode(snapshot_path(directory, o).read_bytes())
        except FileNotFoundError:
            continue
        if entries is not None:
            return o, entries
    return None
