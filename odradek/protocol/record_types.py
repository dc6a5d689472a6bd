"""What batches of every format decode into: ``BatchHeader``, ``Record``, the attribute bits.

Shared by ``records`` (magic 2, read and written) and ``legacy_records``
(magic 0/1, read only), which is why they live apart from both:
``records.decode_batch`` hands magic 0/1 entries to ``legacy_records``,
which builds these.
"""

from __future__ import annotations

from odradek.protocol.lean_dataclass import dataclass

LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
NO_TIMESTAMP = -1

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

    @property
    def delete_horizon(self) -> int | None:
        """KIP-534: when set, ``base_timestamp`` is the time tombstones may be dropped."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None


@dataclass(slots=True)
class Record:
    """One record with *absolute* offset and timestamp, whatever the batch format."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
