"""Legacy message sets (magic 0 and 1), read-only, as Kafka's ``LegacyRecord`` lays them out.

Old clients (Produce v0-v2) and old captures still carry them, so the broker
and the tools must be able to read them; the writer for Fetch v0-3's
down-conversion is in ``record_conversion.py``.  One *entry* (offset, size, message) is
decoded at a time, and presented like a magic-2 batch: a synthesised
:class:`BatchHeader` plus absolute-offset :class:`Record` objects, so callers
need no second code path.
"""

from __future__ import annotations

import struct
import zlib

from odradek.protocol.compression import CompressionError, decompress
from odradek.protocol.record_types import (
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CorruptRecordError,
    Record,
)

_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
CRC_POS = 12  # within an entry: the message starts after offset + size
MAGIC_POS = 16
MESSAGE_OVERHEAD = {0: 14, 1: 22}  # crc .. value length: smallest message per magic


def _read_message(data: bytes, pos: int, end: int, verify_crc: bool):
    """One entry at ``pos`` -> (offset, size, crc, magic, attributes, timestamp, key, value)."""
    if end - pos < LOG_OVERHEAD + 6:
        raise CorruptRecordError("truncated legacy message")
    offset, size, crc, magic, attributes = _ENTRY.unpack_from(data, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(f"unsupported magic {magic}")
    if size < MESSAGE_OVERHEAD[magic]:
        raise CorruptRecordError(f"legacy message size {size} below the magic-{magic} minimum")
    msg_end = pos + LOG_OVERHEAD + size
    if msg_end > end:
        raise CorruptRecordError("truncated legacy message")
    if verify_crc and zlib.crc32(memoryview(data)[pos + MAGIC_POS:msg_end]) != crc:
        raise CorruptRecordError(f"CRC mismatch in legacy message at offset {offset}")
    p = pos + MAGIC_POS + 2
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(data, p)
        p += 8
    else:
        timestamp = NO_TIMESTAMP
    fields = []
    for _ in range(2):  # key, then value; sizes fit by the overhead check, lengths are checked here
        (n,) = _INT32.unpack_from(data, p)
        p += 4
        if n < 0:
            if n != -1:
                raise CorruptRecordError(f"negative legacy field length {n}")
            fields.append(None)
        else:
            if p + n > msg_end - (4 if not fields else 0):
                raise CorruptRecordError("legacy message field runs past the message")
            fields.append(bytes(data[p:p + n]))
            p += n
    if p != msg_end:
        raise CorruptRecordError("legacy message size does not match its fields")
    return offset, size, crc, magic, attributes, timestamp, fields[0], fields[1]


def _header(base_offset: int, size: int, magic: int, crc: int, attributes: int,
            records: list[Record], max_timestamp: int) -> BatchHeader:
    return BatchHeader(base_offset, size, -1, magic, crc, attributes,
                       records[-1].offset - base_offset, records[0].timestamp, max_timestamp,
                       -1, -1, -1, len(records))


def decode_legacy_entry(buf: bytes | bytearray | memoryview, pos: int = 0, *,
                        verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode one magic 0/1 entry; a compressed wrapper yields all its inner messages."""
    offset, size, crc, magic, attributes, timestamp, key, value = _read_message(
        buf, pos, len(buf), verify_crc)
    codec = attributes & COMPRESSION_MASK
    if not codec:
        record = Record(offset, timestamp, key, value)
        return _header(offset, size, magic, crc, attributes, [record], timestamp), [record]

    if value is None:
        raise CorruptRecordError("compressed legacy wrapper with a null value")
    try:
        inner = decompress(codec, value, magic=magic)
    except CompressionError as exc:
        raise CorruptRecordError(str(exc)) from None
    records = []
    p, end = 0, len(inner)
    while p < end:
        i_offset, i_size, _crc, i_magic, i_attributes, i_ts, i_key, i_value = _read_message(
            inner, p, end, verify_crc)
        if i_magic != magic:
            raise CorruptRecordError(f"inner message magic {i_magic} differs from wrapper magic {magic}")
        if i_attributes & COMPRESSION_MASK:
            raise CorruptRecordError("compressed message inside a compressed wrapper")
        records.append(Record(i_offset, i_ts, i_key, i_value))
        p += LOG_OVERHEAD + i_size
    if not records:
        raise CorruptRecordError("compressed legacy wrapper without inner messages")
    if magic == 1:
        # Inner offsets are relative; the wrapper holds the last absolute offset
        # (0 from some producers, meaning "relative from 0").
        shift = offset - records[-1].offset if offset else 0
        log_append_time = attributes & TIMESTAMP_TYPE_MASK
        for r in records:
            r.offset += shift
            if log_append_time:
                r.timestamp = timestamp
        max_ts = timestamp if log_append_time else max(r.timestamp for r in records)
    else:
        max_ts = NO_TIMESTAMP
    return _header(records[0].offset, size, magic, crc, attributes, records, max_ts), records
