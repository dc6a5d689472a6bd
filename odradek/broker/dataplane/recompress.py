"""A topic's ``compression.type`` on append: Kafka's ``LogValidator`` recompression.

The target codec is the topic's (``BrokerCompressionType.targetCompression``):
the batch's own codec under ``producer``, else the configured one
(``uncompressed`` = none).  A batch already in it is stored as sent; any other
is rebuilt in the target codec (``buildRecordsAndAssignOffsets``): the same
records at consecutive offsets from the batch's base, with the batch's
producer id, epoch, base sequence and transactional flag, so idempotence and
transactions see the batch the producer sent.  Control batches never come
from clients, and the broker's own markers are written as they are.

When the records' offset deltas already run 0, 1, 2, ... (every v2 producer
writes them so) the records area is carried over byte for byte and only
re-framed: decompressed, compressed in the target codec, the header's codec
bits, length and CRC rewritten.  That is what Kafka's rebuild produces for
such records, without a Python object per record.  Otherwise the records are
decoded and re-encoded at consecutive offsets, as Kafka rebuilds batches of
clients that number inner offsets wrongly.

The target codec is compressed at the topic's ``compression.<codec>.level``
(KIP-390, Kafka 3.8: gzip and zstd; lz4's levels are accepted, compressed as its
default, see ``protocol.compression.lz4_compress``).
"""

from __future__ import annotations

import struct

from ...protocol.compression import CompressionError, compress, decompress
from ...protocol.errors import ErrorCode
from ...protocol.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CorruptRecordError,
    Record,
    compute_crc,
    decode_batch,
    decode_varint,
    encode_batch,
    read_batch_header,
)
from ...storage.config import PRODUCER, TOPIC_CODECS
from .batches import BatchRejected

_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")


def target_codec(compression_type: str, source: int) -> int:
    """The codec a batch compressed with ``source`` is stored in under ``compression_type``."""
    return source if compression_type == PRODUCER else TOPIC_CODECS[compression_type]


def recompress(data: bytes, codec: int, level: int | None = None,
               area: bytes | bytearray | memoryview | None = None) -> tuple[bytes, BatchHeader]:
    """The one (validated) batch in ``data`` in ``codec`` at ``level`` (the topic's
    ``compression.<codec>.level``; None: Kafka's default), and its header.  ``area``: the
    records area already decompressed (by the check in the worker thread), not done again."""
    h = read_batch_header(data, 0)
    try:
        if area is None:
            area = data[HEADER_SIZE:h.size]
            if h.compression:
                area = decompress(h.compression, area)
        if not _offsets_in_order(area, h.records_count):
            data = _rebuild(data)
            area = data[HEADER_SIZE:]
        return _reframe(data, h, area, codec, level)
    except (CompressionError, CorruptRecordError) as exc:  # validated before: not expected
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"records cannot be recompressed: {exc}") from None


def _offsets_in_order(area: bytes | bytearray, count: int) -> bool:
    """Whether record i carries offset delta i, for every record of the area."""
    p = 0
    for i in range(count):
        length, body = decode_varint(area, p)
        q = body + 1  # attributes
        _ts_delta, q = decode_varint(area, q)
        delta, _q = decode_varint(area, q)
        if delta != i:
            return False
        p = body + length
    return True


def _reframe(data: bytes, h: BatchHeader, area: bytes | bytearray, codec: int,
             level: int | None) -> tuple[bytes, BatchHeader]:
    body = compress(codec, bytes(area), level) if codec else area
    out = bytearray(data[:HEADER_SIZE])
    out += body
    _LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _ATTRIBUTES.pack_into(out, ATTRIBUTES_OFFSET, (h.attributes & ~COMPRESSION_MASK) | codec)
    _CRC.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out), read_batch_header(out, 0)


def _rebuild(data: bytes) -> bytes:
    """The batch's records at consecutive offsets, uncompressed (``_reframe`` compresses them)."""
    h, records = decode_batch(data, verify_crc=False)
    return encode_batch(
        [Record(h.base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)],
        base_offset=h.base_offset, compression=0,
        timestamp_type=1 if h.attributes & TIMESTAMP_TYPE_MASK else 0, producer_id=h.producer_id,
        producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch, transactional=h.is_transactional)
