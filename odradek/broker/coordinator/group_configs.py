"""Per-group configs (Kafka's ``GroupConfig``, resource type GROUP = 32) over the broker defaults.

Kafka lets an operator override a few broker-wide group settings for one group through
IncrementalAlterConfigs / AlterConfigs on a GROUP resource (``consumer.session.timeout.ms``,
``share.record.lock.duration.ms``, ``share.auto.offset.reset``, ...).  Every coordinator reads
the value in force through ``GroupConfigs.effective(group_id)``, so the consumer-protocol and
share-group code never look at broker settings directly.

The names, checks and messages are Kafka 4.2's ``GroupConfig`` (``validateNames``, the
``ConfigDef`` parse, ``validateValues`` against the broker's ``group.*.min/max.*`` bounds).
The overrides live in ``group-configs.json`` in the first data directory, written whole (temp
file, fsync, rename) before a change takes effect, like the dynamic broker configs; a test-control
reset empties them.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...protocol.lean_dataclass import dataclass
from ...storage.files import atomic_write_text

FILE = "group-configs.json"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The settings in force for one group (field = Kafka's GroupConfig name, dots as underscores)."""

    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_record_lock_duration_ms: int = 30000
    share_delivery_count_limit: int = 5  # broker-wide only in 4.2 (a group config from 4.3)
    share_partition_max_record_locks: int = 2000  # broker-wide only in 4.2
    share_auto_offset_reset: str = "latest"  # latest | earliest | by_duration:<ISO-8601 duration>
    share_isolation_level: str = "read_uncommitted"  # or read_committed
    # KIP-1071 streams groups are not served: stored and checked so admin tools that set them work
    streams_session_timeout_ms: int = 45000
    streams_heartbeat_interval_ms: int = 5000
    streams_num_standby_replicas: int = 0
    streams_initial_rebalance_delay_ms: int = 3000

    @classmethod
    def from_config(cls, config: Any) -> GroupConfig:
        """The broker's ``group.consumer.*`` / ``group.share.*`` settings as every group's defaults."""
        return cls(
            consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
            consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            share_session_timeout_ms=config["group.share.session.timeout.ms"],
            share_heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
            share_record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
            share_delivery_count_limit=config["group.share.delivery.count.limit"],
            share_partition_max_record_locks=config["group.share.partition.max.record.locks"],
            streams_session_timeout_ms=config["group.streams.session.timeout.ms"],
            streams_heartbeat_interval_ms=config["group.streams.heartbeat.interval.ms"],
            streams_num_standby_replicas=config["group.streams.num.standby.replicas"],
            streams_initial_rebalance_delay_ms=config["group.streams.initial.rebalance.delay.ms"],
        )


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One name a GROUP resource may set (Kafka's ``GroupConfig`` ConfigDef entry)."""

    name: str
    kind: str  # "int" | "string"
    at_least: int | None
    doc: str

    @property
    def field(self) -> str:
        return self.name.replace(".", "_")


# Kafka 4.2's GroupConfig.CONFIG, in its definition order
KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    ConfigKey("consumer.session.timeout.ms", "int", 1,
              "The timeout to detect client failures when using the consumer group protocol."),
    ConfigKey("consumer.heartbeat.interval.ms", "int", 1,
              "The heartbeat interval given to the members of a consumer group."),
    ConfigKey("share.session.timeout.ms", "int", 1,
              "The timeout to detect client failures when using the share group protocol."),
    ConfigKey("share.heartbeat.interval.ms", "int", 1,
              "The heartbeat interval given to the members of a share group."),
    ConfigKey("share.record.lock.duration.ms", "int", 1000,
              "The record acquisition lock duration in milliseconds for share groups."),
    ConfigKey("share.auto.offset.reset", "string", None,
              "The strategy to initialize the share-partition start offset: earliest, latest or "
              "by_duration:<duration> (ISO-8601, PnDTnHnMn.nS, not negative)."),
    ConfigKey("share.isolation.level", "string", None,
              "Controls how to read records written transactionally: read_committed or read_uncommitted."),
    ConfigKey("streams.session.timeout.ms", "int", 1,
              "The timeout to detect client failures when using the streams group protocol."),
    ConfigKey("streams.heartbeat.interval.ms", "int", 1,
              "The heartbeat interval given to the members of a streams group."),
    ConfigKey("streams.num.standby.replicas", "int", 0,
              "The number of standby replicas for each task of a streams group."),
    ConfigKey("streams.initial.rebalance.delay.ms", "int", 0,
              "The delay before the first rebalance of a streams group."),
)}
_FIELD_NAMES = {k.field: k.name for k in KEYS.values()}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# java.time.Duration.parse: PnDTnHnMn.nS, case-insensitive, signs allowed on the whole and each part
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


class GroupConfigError(ValueError):
    """A GROUP resource's configs refused (Kafka's InvalidConfigurationException / ConfigException:
    INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class GroupConfigBounds:
    """The broker settings Kafka's ``GroupConfig.validateValues`` checks a group's values against."""

    consumer_session_timeout_ms: tuple[int, int] = (45000, 60000)
    consumer_heartbeat_interval_ms: tuple[int, int] = (5000, 15000)
    share_session_timeout_ms: tuple[int, int] = (45000, 60000)
    share_heartbeat_interval_ms: tuple[int, int] = (5000, 15000)
    share_record_lock_duration_ms: tuple[int, int] = (15000, 60000)
    streams_session_timeout_ms: tuple[int, int] = (45000, 60000)
    streams_heartbeat_interval_ms: tuple[int, int] = (5000, 15000)
    streams_max_standby_replicas: int = 2

    @classmethod
    def from_config(cls, config: Any) -> GroupConfigBounds:
        def pair(prefix: str, what: str) -> tuple[int, int]:
            return config[f"group.{prefix}.min.{what}"], config[f"group.{prefix}.max.{what}"]
        return cls(pair("consumer", "session.timeout.ms"), pair("consumer", "heartbeat.interval.ms"),
                   pair("share", "session.timeout.ms"), pair("share", "heartbeat.interval.ms"),
                   pair("share", "record.lock.duration.ms"), pair("streams", "session.timeout.ms"),
                   pair("streams", "heartbeat.interval.ms"), config["group.streams.max.standby.replicas"])


def _parse(key: ConfigKey, raw: str) -> int | str:
    """Kafka's ``ConfigDef.parse`` of one value (trimmed), with its validator."""
    if key.kind == "string":
        value = raw.strip()
        if key.name == "share.isolation.level" and value not in _ISOLATION_LEVELS:
            raise GroupConfigError(f"Invalid value {value} for configuration {key.name}: String must be one "
                                   f"of: {', '.join(_ISOLATION_LEVELS)}")
        if key.name == "share.auto.offset.reset" and not _valid_offset_reset(value):
            raise GroupConfigError(f"Invalid value {value} for configuration {key.name}: Invalid value "
                                   f"`{value}` for configuration {key.name}. The value must be either "
                                   "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
        return value
    try:
        value = int(raw.strip())
    except ValueError:
        raise GroupConfigError(f"Invalid value {raw} for configuration {key.name}: "
                               "Not a number of type INT") from None
    if not -(2**31) <= value < 2**31:
        raise GroupConfigError(f"Invalid value {raw} for configuration {key.name}: Not a number of type INT")
    if key.at_least is not None and value < key.at_least:
        raise GroupConfigError(f"Invalid value {value} for configuration {key.name}: "
                               f"Value must be at least {key.at_least}")
    return value


def _valid_offset_reset(value: str) -> bool:
    """``ShareGroupAutoOffsetResetStrategy.fromString``: earliest, latest, or a non-negative
    ``by_duration:`` ISO-8601 duration (``none`` is a consumer's, not a share group's)."""
    if value in ("earliest", "latest"):
        return True
    if not value.startswith("by_duration:"):
        return False
    m = _DURATION.fullmatch(value[len("by_duration:"):])
    if m is None or not any(m.group(i) is not None for i in (2, 3, 4, 5)):
        return False
    sign = -1 if m.group(1) == "-" else 1
    d, h, mi, s = (int(m.group(i) or 0) for i in (2, 3, 4, 5))
    seconds = d * 86400 + h * 3600 + mi * 60 + s
    frac = m.group(6) or ""
    nanos = int(frac.ljust(9, "0")) if frac else 0
    total_ns = seconds * 10**9 + (-nanos if (m.group(5) or "").startswith("-") else nanos)
    return sign * total_ns >= 0


def _check_bounds(config: GroupConfig, bounds: GroupConfigBounds) -> None:
    """``GroupConfig.validateValues``: each interval and timeout within the broker's bounds, and a
    session timeout longer than its heartbeat interval (Kafka's messages)."""
    for kind, what in (("consumer", "heartbeat_interval_ms"), ("consumer", "session_timeout_ms"),
                       ("share", "heartbeat_interval_ms"), ("share", "session_timeout_ms"),
                       ("share", "record_lock_duration_ms"), ("streams", "heartbeat_interval_ms"),
                       ("streams", "session_timeout_ms")):
        field = f"{kind}_{what}"
        low, high = getattr(bounds, field)
        value, name = getattr(config, field), _FIELD_NAMES[field]
        setting = f"group.{kind}.%s.{what.replace('_', '.')}"
        if value < low:
            raise GroupConfigError(f"{name} must be greater than or equal to {setting % 'min'}")
        if value > high:
            raise GroupConfigError(f"{name} must be less than or equal to {setting % 'max'}")
    if config.streams_num_standby_replicas > bounds.streams_max_standby_replicas:
        raise GroupConfigError("streams.num.standby.replicas must be less than or equal to "
                               "group.streams.max.standby.replicas")
    for kind in ("consumer", "share", "streams"):
        if getattr(config, f"{kind}_session_timeout_ms") <= getattr(config, f"{kind}_heartbeat_interval_ms"):
            raise GroupConfigError(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")


def validate(raw: Mapping[str, str], defaults: GroupConfig, bounds: GroupConfigBounds | None) -> dict[str, Any]:
    """A GROUP resource's new configs (Kafka names, string values) checked as Kafka's
    ``GroupConfigManager.validate`` does; the typed overrides (``GroupConfig`` field names).
    ``bounds`` None: names and types only (a stored value was checked when it was set; the
    broker's bounds may have changed since, and Kafka keeps such a value too)."""
    for name in raw:
        if name not in KEYS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    overrides = {KEYS[n].field: _parse(KEYS[n], v) for n, v in raw.items()}
    if bounds is not None:
        _check_bounds(replace(defaults, **overrides), bounds)
    return overrides


def value_string(value: Any) -> str:
    return str(value)


class GroupConfigs:
    """The broker defaults plus each group's overrides (``effective`` is on hot paths: a dict hit)."""

    def __init__(self, defaults: GroupConfig, *, bounds: GroupConfigBounds | None = None,
                 path: Path | None = None) -> None:
        self.defaults = defaults
        self.bounds = bounds if bounds is not None else GroupConfigBounds()
        self.path = path
        self._overrides: dict[str, dict[str, Any]] = {}
        self._effective: dict[str, GroupConfig] = {}
        self._lock = asyncio.Lock()
        # a new object on every change of overrides: what a value computed from them (a steady
        # consumer heartbeat's interval and session timeout) was computed at
        self.version = object()

    @classmethod
    def from_config(cls, config: Any, data_dir: Path | None = None) -> GroupConfigs:
        """The broker's defaults and bounds; stored in ``data_dir`` (none: in memory only)."""
        return cls(GroupConfig.from_config(config), bounds=GroupConfigBounds.from_config(config),
                   path=None if data_dir is None else data_dir / FILE)

    def effective(self, group_id: str) -> GroupConfig:
        """The settings in force for ``group_id``: its overrides over the broker defaults."""
        found = self._effective.get(group_id)
        if found is not None:
            return found
        overrides = self._overrides.get(group_id)
        return self.defaults if not overrides else self._effective.setdefault(
            group_id, replace(self.defaults, **overrides))

    def overrides(self, group_id: str) -> dict[str, Any]:
        """The fields ``group_id`` overrides (a copy; empty when none)."""
        return dict(self._overrides.get(group_id, {}))

    def groups(self) -> list[str]:
        """The groups with overrides (what ListConfigResources lists as GROUP resources)."""
        return sorted(self._overrides)

    def set_overrides(self, group_id: str, overrides: dict[str, Any]) -> None:
        """Replace ``group_id``'s overrides (field names of ``GroupConfig``); empty removes them.
        In memory only: ``change`` is the checked and durable path admin requests take."""
        self._effective.pop(group_id, None)
        self.version = object()
        if overrides:
            self._overrides[group_id] = dict(overrides)
        else:
            self._overrides.pop(group_id, None)

    def clear(self) -> None:
        """Forget every override in memory (``forget_all`` also empties the stored file)."""
        self._overrides.clear()
        self._effective.clear()
        self.version = object()

    def raw(self, group_id: str) -> dict[str, str]:
        """``group_id``'s overrides by Kafka name, as strings (what AlterConfigs starts from)."""
        return {_FIELD_NAMES[f]: value_string(v) for f, v in self._overrides.get(group_id, {}).items()
                if f in _FIELD_NAMES}

    def load(self) -> None:
        """Read the stored overrides (at start, before the coordinator serves)."""
        path = self.path
        if path is None or not path.exists():
            return
        try:
            data = json.loads(path.read_text())
            loaded = {g: validate(raw, self.defaults, None) for g, raw in data.items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise GroupConfigError(f"{path}: {exc}") from None
        self.clear()
        for group_id, overrides in loaded.items():
            self.set_overrides(group_id, overrides)

    async def change(self, group_id: str, compute: Callable[[dict[str, str]], dict[str, str]], *,
                     validate_only: bool = False) -> None:
        """Apply ``compute`` to ``group_id``'s configs (Kafka names), check them and store the whole
        set durably before it takes effect (no configs left: the group has none)."""
        async with self._lock:
            new = compute(self.raw(group_id))
            overrides = validate(new, self.defaults, self.bounds)
            if validate_only:
                return
            stored = {g: self.raw(g) for g in self._overrides if g != group_id}
            if new:
                stored[group_id] = {n: value_string(overrides[KEYS[n].field]) for n in new}
            await self._write(stored)
            self.set_overrides(group_id, overrides)

    async def forget_all(self) -> int:
        """Forget every group's overrides in one durable write (the test-control reset); how many."""
        async with self._lock:
            n = len(self._overrides)
            if self.path is not None and (n or self.path.exists()):
                await self._write({})
            self.clear()
            return n

    async def _write(self, stored: dict[str, dict[str, str]]) -> None:
        if self.path is not None:
            text = json.dumps(stored, indent=1, sort_keys=True) + "\n"
            await asyncio.to_thread(atomic_write_text, self.path, text)


def describe(configs: GroupConfigs, group_id: str) -> list[tuple[ConfigKey, str, bool]]:
    """Every group config of ``group_id``: (key, value in force, set for this group)."""
    config, set_here = configs.effective(group_id), configs.overrides(group_id)
    return [(k, value_string(getattr(config, k.field)), k.field in set_here) for k in KEYS.values()]

