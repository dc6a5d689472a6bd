"""RecordBatch v2 (magic 2): the bytes of Produce, Fetch and segment files.

Batch *headers* are read with ``struct`` at fixed positions: storage and the
data plane move batches without decoding records, and only patch fields the
CRC does not cover (base offset, partition leader epoch).  Layout:
``shared/reference/record-batch-v2.md`` §1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


class CorruptRecordError(ValueError):
    """A batch failed validation (length, magic or CRC)."""


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire / on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte header at ``pos``; raises CorruptRecordError if short or not magic 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError("truncated batch header")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != 2:
        raise CorruptRecordError(f"unsupported magic {magic}")
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def batch_size_at(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """Size of the batch starting at ``pos`` or None if fewer than 12 bytes remain."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C over attributes .. end of batch (what the stored CRC covers)."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET: pos + size])


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets on append: baseOffset is outside the CRC."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def iter_batch_headers(buf: bytes | bytearray | memoryview, pos: int = 0, validate: bool = False):
    """Yield ``(position, header)`` for each whole batch; stops at a partial tail.

    With ``validate`` a bad length, magic or CRC raises CorruptRecordError.
    """
    end = len(buf)
    while True:
        size = batch_size_at(buf, pos)
        if size is None or pos + size > end:
            return
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"batch length {size} below header size at {pos}")
        header = read_batch_header(buf, pos)
        if validate and not crc_ok(buf, pos, header):
            raise CorruptRecordError(f"CRC mismatch in batch at {pos}")
        yield pos, header
        pos += size
