"""Per-log settings under Kafka's own topic-config names.

Kafka's names are the interface (``segment.bytes``, ``retention.ms``, ...):
topic configs from CreateTopics/DescribeConfigs and broker ``log.*`` defaults
map onto one frozen dataclass, so a Log never parses strings.  The only
Odradek extension is ``fsync.mode`` (broker: ``log.fsync.mode``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from ..protocol import compression
from ..protocol.lean_dataclass import dataclass

LONG_MAX = (1 << 63) - 1


class FsyncMode(enum.Enum):
    """When appended bytes reach the disk (``fsync.mode``)."""

    NEVER = "never"  # page cache only; fsync on roll and close (default)
    INTERVAL = "interval"  # a background fsync every flush.ms (1 s if flush.ms is unset)
    ALWAYS = "always"  # append_async resolves once fsynced; concurrent appends share one fsync


COMPACT = "compact"
DELETE = "delete"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
PRODUCER = "producer"
# Kafka's BrokerCompressionType names of a codec batches are stored in, with the codec's id
TOPIC_CODECS = {"uncompressed": compression.NONE, "zstd": compression.ZSTD, "lz4": compression.LZ4,
                "snappy": compression.SNAPPY, "gzip": compression.GZIP}
# ... or ``producer`` (each batch as sent): the values of a topic's compression.type
COMPRESSION_TYPES = (*TOPIC_CODECS, PRODUCER)
# KIP-390 (Kafka 3.8): the level a batch is recompressed at, per codec: (lowest, highest,
# default) of Kafka's GzipCompression (-1: Deflater.DEFAULT_COMPRESSION), Lz4Compression and
# ZstdCompression (ZSTD_minCLevel .. ZSTD_maxCLevel)
GZIP_LEVELS = (1, 9, -1)
LZ4_LEVELS = (1, 17, 9)
ZSTD_LEVELS = (-131072, 22, 3)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Kafka's per-topic log settings (defaults are Kafka's)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: unlimited
    retention_bytes: int = -1  # -1: unlimited
    cleanup_policy: frozenset[str] = frozenset({DELETE})
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    max_message_bytes: int = 1024 * 1024 + 12
    index_interval_bytes: int = 4096
    fsync: FsyncMode = FsyncMode.NEVER
    compression_type: str = PRODUCER  # the broker recompresses batches to it on append
    compression_gzip_level: int = GZIP_LEVELS[2]  # ... at these levels
    compression_lz4_level: int = LZ4_LEVELS[2]
    compression_zstd_level: int = ZSTD_LEVELS[2]

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"invalid value for {name}: {why}")

        if self.segment_bytes < 14 or self.segment_bytes > 0x7FFFFFFF:
            raise bad("segment.bytes", f"{self.segment_bytes} is outside 14..2147483647")
        if self.segment_ms < 1:
            raise bad("segment.ms", f"{self.segment_ms} < 1")
        if self.retention_ms < -1:
            raise bad("retention.ms", f"{self.retention_ms} < -1")
        if self.retention_bytes < -1:
            raise bad("retention.bytes", f"{self.retention_bytes} < -1")
        if not self.cleanup_policy or not self.cleanup_policy <= {COMPACT, DELETE}:
            raise bad("cleanup.policy", f"{sorted(self.cleanup_policy)} (use compact and/or delete)")
        if self.delete_retention_ms < 0:
            raise bad("delete.retention.ms", f"{self.delete_retention_ms} < 0")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise bad("min.cleanable.dirty.ratio", f"{self.min_cleanable_dirty_ratio} is outside 0..1")
        if self.min_compaction_lag_ms < 0:
            raise bad("min.compaction.lag.ms", f"{self.min_compaction_lag_ms} < 0")
        if self.flush_messages < 1:
            raise bad("flush.messages", f"{self.flush_messages} < 1")
        if self.flush_ms < 0:
            raise bad("flush.ms", f"{self.flush_ms} < 0")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise bad("message.timestamp.type", repr(self.message_timestamp_type))
        if self.max_message_bytes < 0:
            raise bad("max.message.bytes", f"{self.max_message_bytes} < 0")
        if self.index_interval_bytes < 0:
            raise bad("index.interval.bytes", f"{self.index_interval_bytes} < 0")
        if self.compression_type not in COMPRESSION_TYPES:
            raise bad("compression.type", f"{self.compression_type!r} is not one of {', '.join(COMPRESSION_TYPES)}")
        for name, level, (low, high, default) in (
                ("compression.gzip.level", self.compression_gzip_level, GZIP_LEVELS),
                ("compression.lz4.level", self.compression_lz4_level, LZ4_LEVELS),
                ("compression.zstd.level", self.compression_zstd_level, ZSTD_LEVELS)):
            if not low <= level <= high and level != default:  # gzip's -1 lies outside its range
                raise bad(name, f"{level} is outside {low}..{high}")

    def compression_level(self, codec: int) -> int | None:
        """The level batches recompressed into ``codec`` are compressed at (None: no levels)."""
        return {compression.GZIP: self.compression_gzip_level, compression.LZ4: self.compression_lz4_level,
                compression.ZSTD: self.compression_zstd_level}.get(codec)

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def with_topic_config(self, props: Mapping[str, object]) -> LogConfig:
        """Apply topic-level overrides given by Kafka name (``retention.ms`` ...)."""
        changes = {}
        for name, raw in props.items():
            field = _TOPIC_NAMES.get(name)
            if field is None:
                continue  # other topic configs (e.g. min.insync.replicas) are not the log's business
            changes[field] = _parse(name, field, raw)
        return dataclasses.replace(self, **changes) if changes else self

    @classmethod
    def from_topic_config(cls, props: Mapping[str, object]) -> LogConfig:
        return cls().with_topic_config(props)

    @classmethod
    def from_broker_config(cls, props: Mapping[str, object]) -> LogConfig:
        """Broker-wide defaults from ``log.*`` names, with Kafka's hours/minutes/ms precedence."""
        topic: dict[str, object] = {}
        for broker_name, topic_name in _BROKER_NAMES.items():
            if broker_name in props:
                topic[topic_name] = props[broker_name]
        for unit, factor in (("hours", 3600_000), ("minutes", 60_000), ("ms", 1)):
            key = f"log.retention.{unit}"
            if key in props:
                v = int(str(props[key]))
                topic["retention.ms"] = v * factor if v >= 0 else -1
        for unit, factor in (("hours", 3600_000), ("ms", 1)):
            key = f"log.roll.{unit}"
            if key in props:
                topic["segment.ms"] = int(str(props[key])) * factor
        return cls.from_topic_config(topic)

    def to_topic_config(self) -> dict[str, str]:
        """Kafka names and string values, e.g. for DescribeConfigs."""
        out = {}
        for name, field in _TOPIC_NAMES.items():
            v = getattr(self, field)
            if isinstance(v, frozenset):
                v = ",".join(sorted(v))
            elif isinstance(v, FsyncMode):
                v = v.value
            out[name] = str(v)
        return out


_TOPIC_NAMES = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "message.timestamp.type": "message_timestamp_type",
    "max.message.bytes": "max_message_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "fsync.mode": "fsync",
    "compression.type": "compression_type",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
}

_BROKER_NAMES = {
    "log.segment.bytes": "segment.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.fsync.mode": "fsync.mode",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
}


def _parse(name: str, field: str, raw: object) -> object:
    try:
        if field == "cleanup_policy":
            if isinstance(raw, (set, frozenset, list, tuple)):
                return frozenset(str(p).strip() for p in raw)
            return frozenset(p.strip() for p in str(raw).split(",") if p.strip())
        if field == "fsync":
            return raw if isinstance(raw, FsyncMode) else FsyncMode(str(raw).strip().lower())
        if field == "min_cleanable_dirty_ratio":
            return float(str(raw))
        if field in ("message_timestamp_type", "compression_type"):
            return str(raw).strip()
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"invalid value for {name}: {raw!r}") from None
