"""Keys and values of ``__transaction_state``, in Kafka's exact format (``TransactionLog``).

Declared once, as Kafka's ``TransactionLogKey.json`` / ``TransactionLogValue.json``:

- key: ``int16 version (0)`` + ``string transactional_id``; only version 0
  exists (Kafka 4 calls the int16 the coordinator record type, also 0).
- value: ``int16 version`` + struct.  v0 (classic, non-flexible): producer
  id, epoch, timeout, the state byte, the partitions (nullable
  int32-counted array of ``topic`` + ``[]int32``), last update and start
  timestamps.  v1 is the same, flexible, with tagged fields; Kafka writes it
  once the cluster's ``transaction.version`` is 1 or more
  (``TransactionVersion.transactionLogValueVersion``), and so do we.  Of the
  tags Kafka's writer (``TransactionLog.valueToBytes``) only ever sets the
  client's transaction version (tag 2: 2 for a transactions-v2 client,
  written when not 0); the previous and next producer ids (tags 0, 1) are
  read and never written.  A null value is a tombstone (the id expired).

Empty records carry a null partition list, every other state a list
(Complete* an empty one), as Kafka writes them.  Partitions are kept as a
sorted tuple of (topic, partition) and written grouped by topic in that
order, so the same state always gives the same bytes.
"""

from __future__ import annotations

import struct
from itertools import groupby

from ..protocol.lean_dataclass import dataclass
from ..protocol.primitives import ProtocolError
from ..protocol.schema import F, Message
from .state import TxnState

TopicPartition = tuple[str, int]

TRANSACTION_LOG_KEY = Message("TransactionLogKey", [
    F("transactional_id", "string", "0"),
], valid="0")

TRANSACTION_LOG_VALUE = Message("TransactionLogValue", [
    F("producer_id", "int64", "0+"),
    F("previous_producer_id", "int64", "1+", tag=0, default=-1),
    F("next_producer_id", "int64", "1+", tag=1, default=-1),
    F("producer_epoch", "int16", "0+"),
    F("transaction_timeout_ms", "int32", "0+"),
    F("transaction_status", "int8", "0+"),
    F("transaction_partitions", "[]", "0+", nullable="0+", fields=[
        F("topic", "string", "0+"),
        F("partition_ids", "[]int32", "0+"),
    ]),
    F("transaction_last_update_timestamp_ms", "int64", "0+"),
    F("transaction_start_timestamp_ms", "int64", "0+"),
    F("client_transaction_version", "int16", "1+", tag=2, default=0),
], valid="0-1", flexible="1+")

KEY_VERSION = 0
VALUE_VERSION = 0  # written while the cluster's transaction.version is 0; 1 from level 1 on
_INT16 = struct.Struct(">h")


class TxnRecordError(ValueError):
    """A ``__transaction_state`` record that cannot be parsed (loading stops, as in Kafka)."""


@dataclass(frozen=True, slots=True)
class TxnKey:
    transactional_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnValue:
    """One transactional id's persisted state (Kafka's ``TxnTransitMetadata`` as logged)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: tuple[TopicPartition, ...] | None  # None: Empty's null list
    last_update_ms: int
    start_ms: int
    client_tv: int = 0  # the transaction version of the client that last changed it (tag 2, v1 only)


def encode_key(key: TxnKey) -> bytes:
    return _INT16.pack(KEY_VERSION) + TRANSACTION_LOG_KEY.build({"transactional_id": key.transactional_id},
                                                                KEY_VERSION)


def decode_key(data: bytes) -> TxnKey | None:
    """The key, or None for a key version we do not know (Kafka skips those with a warning)."""
    if len(data) < 2:
        raise TxnRecordError("transaction log key shorter than its version")
    (version,) = _INT16.unpack_from(data)
    if version != KEY_VERSION:
        return None
    try:
        body = TRANSACTION_LOG_KEY.parse(memoryview(data)[2:], KEY_VERSION)
    except (ProtocolError, ValueError, IndexError) as exc:
        raise TxnRecordError(f"bad transaction log key: {exc}") from exc
    return TxnKey(body.transactional_id)


def value_version(transaction_version: int) -> int:
    """The value version Kafka writes at a finalized ``transaction.version``."""
    return 1 if transaction_version >= 1 else 0


def encode_value(value: TxnValue | None, version: int = VALUE_VERSION) -> bytes | None:
    if value is None:
        return None
    partitions = None
    if value.partitions is not None:
        partitions = [{"topic": topic, "partition_ids": [p for _t, p in group]}
                      for topic, group in groupby(sorted(value.partitions), key=lambda tp: tp[0])]
    body = {
        "producer_id": value.producer_id,
        "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.timeout_ms,
        "transaction_status": int(value.state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_ms,
        "transaction_start_timestamp_ms": value.start_ms,
        "client_transaction_version": value.client_tv,
    }
    return _INT16.pack(version) + TRANSACTION_LOG_VALUE.build(body, version)


def decode_value(data: bytes | None) -> TxnValue | None:
    """The value (None for a tombstone); a version other than 0/1 or bad bytes raise TxnRecordError."""
    if data is None:
        return None
    if len(data) < 2:
        raise TxnRecordError("transaction log value shorter than its version")
    (version,) = _INT16.unpack_from(data)
    if version not in (0, 1):
        raise TxnRecordError(f"unknown transaction log value version {version}")
    try:
        body = TRANSACTION_LOG_VALUE.parse(memoryview(data)[2:], version)
        state = TxnState(body.transaction_status)
    except (ProtocolError, ValueError, IndexError) as exc:
        raise TxnRecordError(f"bad transaction log value: {exc}") from exc
    parts = body.transaction_partitions
    partitions = None if parts is None else tuple(sorted(
        (t.topic, p) for t in parts for p in t.partition_ids))
    return TxnValue(producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                    timeout_ms=body.transaction_timeout_ms, state=state, partitions=partitions,
                    last_update_ms=body.transaction_last_update_timestamp_ms,
                    start_ms=body.transaction_start_timestamp_ms,
                    client_tv=body.client_transaction_version if version >= 1 else 0)
