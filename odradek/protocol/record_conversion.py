"""Message-format conversion for the old Produce (v0-2) and Fetch (v0-3) versions.

Kafka 3.x stores every batch as magic 2 and converts at the edges, as its
``LogValidator`` (up-conversion on append) and ``RecordsUtil.downConvert``
(on fetch) do:

- up: the magic 0/1 entries of one partition's message set become one
  magic-2 batch with the same keys, values and (magic 1) timestamps, the
  source compression codec, no producer id; magic 0 has no timestamp (-1).
- down: each magic-2 batch becomes one magic 0/1 entry (uncompressed: one
  message a record; compressed: a wrapper of the same codec).  Headers are
  dropped ("Ignore headers when down-converting to V0 and V1 since they are
  not supported", ``RecordsUtil.convertRecordBatch``), control batches are
  skipped, records of an uncompressed batch below the fetch offset are
  dropped, and zstd cannot be down-converted (UNSUPPORTED_COMPRESSION_TYPE).
"""

from __future__ import annotations

import struct
import zlib

from .compression import LZ4, LZ4_MAGIC, NONE, ZSTD, compress, xxh32_short
from .records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    Record,
    encode_batch,
    iter_batches,
)

_INT32 = struct.Struct(">i")
_ENTRY_HEAD = struct.Struct(">qi")  # offset, size


class ConversionError(ValueError):
    """A batch the older format cannot carry (zstd below magic 2)."""


def is_legacy(records: bytes | memoryview | None) -> bool:
    """Whether a produced message set starts with a magic 0/1 entry."""
    return records is not None and len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] in (0, 1)


def up_convert(records: bytes | memoryview) -> bytes:
    """A magic 0/1 message set -> one magic-2 batch (offsets from 0, assigned on append).

    Raises CorruptRecordError for a set that does not decode (bad CRC,
    truncated, mixed magic), which the broker answers CORRUPT_MESSAGE.
    """
    items: list[Record] = []
    codec = NONE
    for header, batch_records in iter_batches(bytes(records)):
        if header.magic == 2:
            raise CorruptRecordError("a magic-2 batch mixed into a legacy message set")
        if codec == NONE:
            codec = header.attributes & COMPRESSION_MASK
        items.extend(batch_records)
    if not items:
        raise CorruptRecordError("an empty legacy message set")
    converted = [Record(i, r.timestamp, r.key, r.value) for i, r in enumerate(items)]
    return encode_batch(converted, compression=codec, timestamp_type=0)


def down_convert(records: bytes | memoryview, magic: int, fetch_offset: int) -> bytes:
    """Stored magic-2 batches -> magic ``magic`` (0 or 1) entries, as RecordsUtil.downConvert.

    A batch cut short at the end (the fetch size limit) is left out.
    Raises ConversionError for a zstd batch.
    """
    out: list[bytes] = []
    for header, batch_records in iter_batches(records, verify_crc=False):
        if header.attributes & CONTROL_MASK:
            continue
        codec = header.attributes & COMPRESSION_MASK
        if codec == ZSTD:
            raise ConversionError("down-conversion of zstandard-compressed batches is not supported")
        if header.magic <= magic:  # stored in an old enough format: its magic is kept
            out.append(encode_entries(batch_records, header.magic, codec,
                                       bool(header.attributes & TIMESTAMP_TYPE_MASK)))
            continue
        kept = batch_records if codec != NONE else [r for r in batch_records if r.offset >= fetch_offset]
        if kept:
            out.append(encode_entries(kept, magic, codec,
                                       bool(header.attributes & TIMESTAMP_TYPE_MASK)))
    return b"".join(out)


def encode_entries(records: list[Record], magic: int, codec: int, log_append: bool) -> bytes:
    """``records`` as magic 0/1 entries: one message each, or one ``codec`` wrapper around them."""
    ts_attr = TIMESTAMP_TYPE_MASK if (log_append and magic == 1) else 0
    if codec == NONE:
        return b"".join(encode_entry(r.offset, magic, ts_attr, r.timestamp, r.key, r.value)
                        for r in records)
    if magic == 1:  # inner offsets relative, the wrapper carries the last absolute one
        base = records[0].offset
        inner = b"".join(encode_entry(r.offset - base, 1, 0, r.timestamp, r.key, r.value)
                         for r in records)
    else:
        inner = b"".join(encode_entry(r.offset, 0, 0, NO_TIMESTAMP, r.key, r.value) for r in records)
    value = compress(codec, inner)
    if codec == LZ4 and magic == 0:
        value = _lz4_broken_descriptor_checksum(value)
    wrapper_ts = max(r.timestamp for r in records)
    return encode_entry(records[-1].offset, magic, codec | ts_attr, wrapper_ts, None, value)


def encode_entry(offset: int, magic: int, attributes: int, timestamp: int,
                 key: bytes | None, value: bytes | None) -> bytes:
    """One legacy log entry: offset, size, then the message with its CRC-32."""
    body = bytearray([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field))
            body += field
    message = struct.pack(">I", zlib.crc32(body)) + bytes(body)
    return _ENTRY_HEAD.pack(offset, len(message)) + message


def _lz4_broken_descriptor_checksum(frame: bytes) -> bytes:
    """Magic 0's lz4 frames carry Kafka's old descriptor checksum (over the magic too, KAFKA-3160)."""
    if frame[:4] != LZ4_MAGIC:
        return frame
    flg = frame[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    fixed = bytearray(frame)
    fixed[hc_pos] = (xxh32_short(bytes(frame[:hc_pos])) >> 8) & 0xFF
    return bytes(fixed)
