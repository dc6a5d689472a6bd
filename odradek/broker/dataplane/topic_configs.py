"""Topic-level configs: which Kafka names a topic may set, how they are checked and reported.

One table drives CreateTopics validation, the CreateTopics v5+ config echo and
DescribeConfigs, so the three never disagree.  Three kinds of names:

- *log* configs are storage's ``LogConfig`` names; the values are validated
  by building a ``LogConfig`` from them (storage owns the rules).
- *checked* configs are honoured here: ``min.insync.replicas`` (acks=all
  gets NOT_ENOUGH_REPLICAS when it exceeds our single replica, as Kafka
  does).
- *accepted* configs only describe replication or file-layout details that
  have no meaning on one node; they are validated, stored and reported.

Anything else is INVALID_CONFIG, like an unknown name on Kafka.  Kafka configs
we do not enforce (timestamp bounds, max.compaction.lag.ms, ...) are refused
rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from ...storage.config import LogConfig

LONG_MAX = str((1 << 63) - 1)


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource``."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    doc: str
    kind: str  # "log" | "checked" | "accepted"
    broker_names: tuple[str, ...] = ()  # broker settings it falls back to, highest priority first
    default: str | None = None  # for names storage does not know (Kafka's default)


_T = ConfigType
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in [
    TopicConfigDef("cleanup.policy", _T.LIST, "delete, compact, or both.", "log", ("log.cleanup.policy",)),
    TopicConfigDef("compression.type", _T.STRING,
                   "uncompressed, gzip, snappy, lz4, zstd: batches in another codec are recompressed "
                   "on append; producer: stored as sent.", "log", ("compression.type",)),
    TopicConfigDef("compression.gzip.level", _T.INT, "Level of batches recompressed into gzip: 1..9, "
                   "or -1 (zlib's default, 6).", "log", ("compression.gzip.level",)),
    TopicConfigDef("compression.lz4.level", _T.INT, "Level of batches recompressed into lz4: 1..17; "
                   "accepted, every level compresses as the default 9 (lz4's fast compressor).", "log",
                   ("compression.lz4.level",)),
    TopicConfigDef("compression.zstd.level", _T.INT, "Level of batches recompressed into zstd: "
                   "-131072..22.", "log", ("compression.zstd.level",)),
    TopicConfigDef("delete.retention.ms", _T.LONG, "How long compaction keeps tombstones.", "log",
                   ("log.cleaner.delete.retention.ms",)),
    TopicConfigDef("file.delete.delay.ms", _T.LONG, "Accepted; files are removed at once.", "accepted",
                   default="60000"),
    TopicConfigDef("flush.messages", _T.LONG, "fsync after this many messages.", "log",
                   ("log.flush.interval.messages",)),
    TopicConfigDef("flush.ms", _T.LONG, "fsync at least this often.", "log", ("log.flush.interval.ms",)),
    TopicConfigDef("follower.replication.throttled.replicas", _T.LIST, "Accepted; no followers.",
                   "accepted", default=""),
    TopicConfigDef("fsync.mode", _T.STRING, "Odradek: never, interval or always.", "log",
                   ("log.fsync.mode",)),
    TopicConfigDef("index.interval.bytes", _T.INT, "Bytes between offset-index entries.", "log",
                   ("log.index.interval.bytes",)),
    TopicConfigDef("leader.replication.throttled.replicas", _T.LIST, "Accepted; no followers.",
                   "accepted", default=""),
    TopicConfigDef("max.message.bytes", _T.INT, "Largest record batch accepted.", "log",
                   ("message.max.bytes",)),
    TopicConfigDef("message.timestamp.type", _T.STRING, "CreateTime or LogAppendTime.", "log",
                   ("log.message.timestamp.type",)),
    TopicConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "Compact once this share is dirty.", "log",
                   ("log.cleaner.min.cleanable.ratio",)),
    TopicConfigDef("min.compaction.lag.ms", _T.LONG, "Records younger than this are not compacted.",
                   "log", ("log.cleaner.min.compaction.lag.ms",)),
    TopicConfigDef("min.insync.replicas", _T.INT,
                   "acks=all needs this many in-sync replicas; there is one.", "checked", default="1"),
    TopicConfigDef("preallocate", _T.BOOLEAN, "Accepted; segments are not preallocated.", "accepted",
                   default="false"),
    TopicConfigDef("retention.bytes", _T.LONG, "Delete oldest segments above this size.", "log",
                   ("log.retention.bytes",)),
    TopicConfigDef("retention.ms", _T.LONG, "Delete closed segments older than this.", "log",
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    TopicConfigDef("segment.bytes", _T.INT, "Roll a segment at this size.", "log", ("log.segment.bytes",)),
    TopicConfigDef("segment.index.bytes", _T.INT, "Accepted; the index grows as needed.", "accepted",
                   default="10485760"),
    TopicConfigDef("segment.jitter.ms", _T.LONG, "Accepted; no jitter.", "accepted", default="0"),
    TopicConfigDef("segment.ms", _T.LONG, "Roll a segment this old.", "log", ("log.roll.ms", "log.roll.hours")),
    TopicConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "Accepted; one replica.", "accepted",
                   default="false"),
]}


class TopicConfigError(ValueError):
    """A topic config name or value is not acceptable (Kafka: INVALID_CONFIG)."""


def _check_int(name: str, value: str, low: int) -> None:
    try:
        v = int(value.strip())
    except ValueError:
        raise TopicConfigError(f"invalid value {value!r} for {name}: not an integer") from None
    if v < low:
        raise TopicConfigError(f"invalid value {value!r} for {name}: below {low}")


def _check_extra(name: str, value: str) -> None:
    """Values of the names storage does not know."""
    d = TOPIC_CONFIGS[name]
    if d.type is ConfigType.BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            raise TopicConfigError(f"invalid value {value!r} for {name}: not a boolean")
    elif d.type in (ConfigType.INT, ConfigType.LONG):
        _check_int(name, value, 1 if name == "min.insync.replicas" else 0)


def validate(overrides: Mapping[str, str | None], base: LogConfig) -> LogConfig:
    """The LogConfig these overrides give on top of ``base``; raises TopicConfigError."""
    log_props = {}
    for name, value in overrides.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise TopicConfigError(f"unknown or unsupported topic config {name!r}")
        if value is None:
            raise TopicConfigError(f"null value for topic config {name!r}")
        if d.kind == "log":
            log_props[name] = value
        else:
            _check_extra(name, value)
    try:
        return base.with_topic_config(log_props)
    except (ValueError, TypeError) as exc:
        raise TopicConfigError(str(exc)) from None


def min_insync_replicas(overrides: Mapping[str, str]) -> int:
    return int(overrides.get("min.insync.replicas", "1"))


@dataclass(frozen=True)
class ConfigEntry:
    """One topic config as DescribeConfigs/CreateTopics report it."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str | None
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


class BrokerSynonyms(Protocol):
    """Where the broker settings a topic config falls back to have values (``DynamicBrokerConfig``)."""

    def synonyms_of(self, names: tuple[str, ...], primary: str | None = None
                    ) -> list[tuple[str, str | None, ConfigSource]]: ...


def describe(overrides: Mapping[str, str], broker_level: LogConfig, broker: BrokerSynonyms) -> list[ConfigEntry]:
    """Every topic config with the value in force and where it comes from.

    ``broker_level`` is the LogConfig built from the broker's ``log.*``
    settings (dynamic ones included).  Synonyms run from the highest
    priority down, as in Kafka's ``ConfigHelper``: the topic override, then
    each broker synonym by source (this node's dynamic value, the cluster
    default, the static setting, the built-in default), cut before the
    primary broker name's first entry; the entry's source is the first
    synonym's, DEFAULT_CONFIG if none is left.
    """
    base = broker_level.to_topic_config()
    out = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if d.broker_names:
            synonyms.extend(broker.synonyms_of(d.broker_names))
        value = overrides[name] if name in overrides else base.get(name, d.default)
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, source, d.type, d.doc, tuple(synonyms)))
    return out
