"""A topic's ``compression.type`` on append: Kafka's ``LogValidator`` recompression.

The target codec is the topic's (``BrokerCompressionType.targetCompression``):
the batch's own codec under ``producer``, else the configured one
(``uncompressed`` = none).  A batch already in it is stored as sent; any other
is rebuilt in the target codec (``buildRecordsAndAssignOffsets``): the same
records (keys, values, headers, timestamps) at consecutive offsets from the
batch's base, and the batch's producer id, epoch, base sequence and
transactional flag kept, so idempotence and transactions see the batch the
producer sent.  Control batches never come from clients, and the broker's own
markers are written as they are.
"""

from __future__ import annotations

from ...protocol.records import (
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
)
from ...storage.config import PRODUCER

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def target_codec(compression_type: str, source: int) -> int:
    """The codec a batch compressed with ``source`` is stored in under ``compression_type``."""
    return source if compression_type == PRODUCER else CODECS[compression_type]


def recompress(data: bytes, codec: int) -> tuple[bytes, BatchHeader]:
    """The one batch in ``data`` rebuilt in ``codec``, and its header (its CRC was checked)."""
    h, records = decode_batch(data, verify_crc=False)
    rebuilt = encode_batch(
        [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)],
        base_offset=0, compression=codec, timestamp_type=1 if h.attributes & TIMESTAMP_TYPE_MASK else 0,
        producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch, transactional=h.is_transactional)
    return rebuilt, read_batch_header(rebuilt, 0)
