"""Storage errors, each mapping to one Kafka error code at the broker."""

from __future__ import annotations


class StorageError(Exception):
    """Base of the storage errors."""


class OffsetOutOfRangeError(StorageError):
    """Offset below the log start or past the log end (Kafka: OFFSET_OUT_OF_RANGE)."""


class RecordBatchTooLargeError(StorageError):
    """A batch bigger than max.message.bytes (Kafka: MESSAGE_TOO_LARGE)."""


class LogClosedError(StorageError):
    """The log was closed or deleted (Kafka: NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION)."""


class CleaningAborted(Exception):
    """The log was closed or deleted while a cleaner pass was running."""
