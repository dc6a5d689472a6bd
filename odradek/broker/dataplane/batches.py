"""What a broker checks on a Produce partition's records before appending them.

Kafka's order (``ProduceRequest.validateRecords``, then ``UnifiedLog`` /
``LogValidator``): exactly one magic-2 batch, zstd only from Produce v7, then
size against max.message.bytes, then the CRC, then the batch's own
consistency, then its records, walked as ``LogValidator`` does (decompressed
first; keyless records are refused on compacted topics).  Records are
checked, not built: the batch is stored as it came.

Errors per case, as Kafka answers them: records that do not parse, too few
or too many for the header's count are INVALID_RECORD
(``InvalidRecordException`` from ``DefaultRecordBatch``'s iterator); a
records area that does not decompress, or decompresses past the cap
(``compression.MAX_DECOMPRESSED_BYTES``), is CORRUPT_MESSAGE.  Kafka answers
the latter UNKNOWN_SERVER_ERROR (a plain ``KafkaException`` escapes
``LogValidator``) and logs it as a broker error; CORRUPT_MESSAGE is the code
Kafka documents for a message that is "otherwise corrupt", and tells the
client the fault is in its data.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ...protocol.compression import CompressionError, decompress, size_hint
from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ...protocol.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptRecordError,
    compute_crc,
    scan_records,
)

ZSTD = 4
HEAVY_RECORDS = 10_000  # a walk of more records than this costs milliseconds of the event loop
HEAVY_AREA_BYTES = 1 << 20  # ... and so does decompressing more than this
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")


@dataclass
class RecordError:
    batch_index: int  # index of the record inside the batch (Kafka's name)
    message: str


class BatchRejected(Exception):
    """A Produce partition refused with ``code`` (and, v8+, per-record errors)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[RecordError] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


def validate_batch(data: bytes | None, *, api_version: int, max_bytes: int, compacted: bool,
                   records: list[int] | BatchRejected | None = None) -> BatchHeader:
    """The header of the single valid batch in ``data``; raises BatchRejected.

    ``records``: the outcome of :func:`check_records` already run off the
    event loop (``precheck``, after the header's checks, CRC included), so a
    big batch is decompressed and walked once, in a worker thread; its
    verdict still comes after the header's, in Kafka's order.
    """
    h = check_header(data, api_version=api_version, max_bytes=max_bytes, crc_checked=records is not None)
    if records is None:
        records = check_records(data, h)
    elif isinstance(records, BatchRejected):
        raise records
    if compacted and records:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            "Compacted topic cannot accept message without key in topic partition.",
                            [RecordError(i, "Compacted topic cannot accept message without key.")
                             for i in records])
    return h


def check_header(data: bytes | None, *, api_version: int, max_bytes: int, crc_checked: bool = False) -> BatchHeader:
    """Everything but the records: framing, size (from the header alone), CRC (unless a worker
    thread already checked it, ``crc_checked``), header fields."""
    if not data:
        raise BatchRejected(ErrorCode.INVALID_RECORD, "Produce v3+ needs exactly one record batch per partition")
    n = len(data)
    if n < MAGIC_OFFSET + 1:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"{n} bytes cannot hold a record batch")
    if data[MAGIC_OFFSET] != 2:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"Produce v{api_version} accepts only magic 2 batches, got magic {data[MAGIC_OFFSET]}")
    if n < HEADER_SIZE:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"truncated batch header ({n} bytes)")
    h = BatchHeader(*_HEADER.unpack_from(data, 0))
    codec = h.attributes & COMPRESSION_MASK
    if codec == ZSTD and api_version < 7:
        raise BatchRejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                            f"zstd needs Produce v7 or later (got v{api_version})")
    size = h.size
    if size < HEADER_SIZE or size > n:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"batch length {h.batch_length} does not match {n} bytes")
    if size < n:
        _reject_trailing(data, size)
    if size > max_bytes:
        raise BatchRejected(ErrorCode.MESSAGE_TOO_LARGE,
                            f"batch of {size} bytes is larger than max.message.bytes={max_bytes}")
    if not crc_checked and compute_crc(data, 0, size) != h.crc:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, "record batch CRC does not match its contents")
    if codec > ZSTD:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    _check_fields(h)
    return h


def _reject_trailing(data: bytes, size: int) -> None:
    rest = len(data) - size
    if rest >= LOG_OVERHEAD and size + _LENGTH.unpack_from(data, size + 8)[0] + LOG_OVERHEAD <= len(data):
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            "Produce v3+ allows exactly one record batch per partition")
    raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"{rest} stray bytes after the record batch")


def _check_fields(h: BatchHeader) -> None:
    if h.attributes & CONTROL_MASK:
        raise BatchRejected(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    if h.attributes & TRANSACTIONAL_MASK and h.producer_id < 0:
        raise BatchRejected(ErrorCode.INVALID_RECORD, "transactional batch without a producer id")
    if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"batch claims {h.records_count} records but lastOffsetDelta {h.last_offset_delta}")
    if h.producer_id >= 0 and (h.base_sequence < 0 or h.producer_epoch < 0):
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"idempotent batch of producer {h.producer_id} without a sequence or epoch")


@dataclass(slots=True)
class Prechecked:
    """A Produce partition's batch whose records were checked off the event loop (``precheck``)."""

    data: bytes
    records: list[int] | BatchRejected | None  # ``validate_batch``'s ``records``; None: check on append
    stored: Any = None  # (batch, header, codec) in the topic's ``compression.type``, recompressed here too


def precheck(data: bytes, *, api_version: int, max_bytes: int,
             recompress: Callable[[bytes, Any, Any], Any] | None = None) -> Prechecked:
    """Run in a worker thread: decompress and walk the records once, keeping the verdict for
    ``validate_batch`` on append.  A batch its header refuses (too large for
    ``max_bytes``, bad CRC) is neither decompressed nor walked.  ``recompress`` (a topic whose
    ``compression.type`` differs from the producer's codec): the stored form is made here as
    well, so a big batch is not recompressed on the event loop either."""
    try:
        h = check_header(data, api_version=api_version, max_bytes=max_bytes)
    except BatchRejected:
        return Prechecked(data, None)  # refused again, from the header, on append
    try:
        records, area = check_records_area(data, h)
        checked = Prechecked(data, records)
        if recompress is not None:  # from the area decompressed for the check: once, not twice
            checked.stored = recompress(data, h, area)
        return checked
    except BatchRejected as exc:
        return Prechecked(data, exc)


def is_heavy(data: bytes | bytearray | memoryview) -> bool:
    """True when checking this batch's records is big work, to be done off the event loop.

    Read from the header and the compression framing, never by
    decompressing: many records (the walk is Python), or a compressed area
    announcing more than ``HEAVY_AREA_BYTES`` (or not saying how much).
    """
    if len(data) < HEADER_SIZE or data[MAGIC_OFFSET] != 2:
        return False
    h = BatchHeader(*_HEADER.unpack_from(data, 0))
    if h.records_count > HEAVY_RECORDS:
        return True
    codec = h.attributes & COMPRESSION_MASK
    if not codec or codec > ZSTD or h.size > len(data):
        return False
    hint = size_hint(codec, memoryview(data)[HEADER_SIZE:h.size], stop_above=HEAVY_AREA_BYTES)
    return hint is None or hint > HEAVY_AREA_BYTES


def check_records(data: bytes, h: BatchHeader) -> list[int]:
    """The records area holds exactly ``records_count`` well-formed records: the indexes of keyless ones."""
    return check_records_area(data, h)[0]


def check_records_area(data: bytes, h: BatchHeader) -> tuple[list[int], Any]:
    """``check_records``, and the records area it decompressed (None if the batch is not
    compressed), for a recompression that would otherwise decompress it again."""
    codec = h.attributes & COMPRESSION_MASK
    if codec:
        try:
            area = decompress(codec, memoryview(data)[HEADER_SIZE:h.size], copy=False)
        except CompressionError as exc:
            raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"records do not decompress: {exc}") from None
        start, end = 0, len(area)
    else:
        area, start, end = data, HEADER_SIZE, h.size
    try:
        return scan_records(area, start, end, h.records_count), area if codec else None
    except CorruptRecordError as exc:
        raise BatchRejected(ErrorCode.INVALID_RECORD, f"invalid records in the batch: {exc}") from None
