"""Dynamic broker settings (Kafka's KIP-226): set at runtime through AlterConfigs, kept across restarts.

Two override sets, as in Kafka: this node's (resource name = its node id,
``DYNAMIC_BROKER_CONFIG``) and the cluster-wide default (resource name "",
``DYNAMIC_DEFAULT_BROKER_CONFIG``).  A value is looked up in that order, then
in the static settings (file, environment, ``--override``:
``STATIC_BROKER_CONFIG``), then the built-in default (``DEFAULT_CONFIG``) --
Kafka's ``DynamicBrokerConfig`` order.

Only the ``log.*`` defaults topics inherit (and ``message.max.bytes``) are
dynamic here; Kafka's other dynamic settings (thread pools, listeners, SSL)
have no counterpart in Odradek and are refused rather than stored without
effect.  The overrides live in ``broker-configs.json`` in the first data
directory, written whole (temp file, fsync, rename, fsync dir), so a crash
leaves the old set or the new one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..storage.config import LogConfig
from ..storage.files import atomic_write_text
from .config import SETTINGS_BY_NAME, Config
from .dataplane.topic_configs import ConfigSource

FILE = "broker-configs.json"

# Kafka's DynamicBrokerConfig log defaults (the broker synonyms of topic configs) we honour
DYNAMIC_SETTINGS = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.hours",
    "log.retention.ms", "log.retention.minutes", "log.retention.hours", "log.retention.bytes",
    "log.cleanup.policy", "log.cleaner.delete.retention.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.message.timestamp.type", "log.index.interval.bytes", "message.max.bytes", "compression.type",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
})
LIST_SETTINGS = frozenset({"log.cleanup.policy"})  # ConfigDef.Type.LIST in Kafka: APPEND/SUBTRACT allowed

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the names one value may be given under,
# highest priority first
_SYNONYMS = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.minutes": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.retention.hours": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.hours": ("log.roll.ms", "log.roll.hours"),
}
_TIMESTAMP_TYPES = {"createtime": "CreateTime", "logappendtime": "LogAppendTime"}


class DynamicConfigError(ValueError):
    """A broker config change Kafka refuses (INVALID_REQUEST, KAFKA-13609)."""


def broker_synonyms(name: str) -> tuple[str, ...]:
    return _SYNONYMS.get(name, (name,))


def setting_string(value: Any) -> str | None:
    """A setting's value as DescribeConfigs shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _shown(name: str, value: Any) -> str | None:
    text = setting_string(value)
    return _TIMESTAMP_TYPES.get(text, text) if name == "log.message.timestamp.type" else text


class DynamicBrokerConfig:
    """This node's and the cluster-default overrides, on top of the static ``Config``."""

    def __init__(self, config: Config, data_dir: Path | None = None) -> None:
        self.static = config
        self.node_id = config["node.id"]
        self.path = None if data_dir is None else data_dir / FILE
        self.node: dict[str, str] = {}
        self.default: dict[str, str] = {}
        self._lock = asyncio.Lock()

    # --- persistence ---------------------------------------------------------------------

    def load(self) -> None:
        """Read the overrides (blocking, small); call before the logs open, they steer recovery."""
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except ValueError as exc:  # written whole, so only a hand edit gets here: start-up names it
            raise DynamicConfigError(f"{self.path} is not valid JSON: {exc}") from None
        self.node = dict(data.get("brokers", {}).get(str(self.node_id), {}))
        self.default = dict(data.get("default", {}))
        try:
            self.log_defaults()
        except ValueError as exc:  # e.g. a file edited by hand: start-up names it
            raise DynamicConfigError(f"{self.path}: {exc}") from None

    async def change(self, per_node: bool, compute: Callable[[dict[str, str]], dict[str, str]], *,
                     validate_only: bool = False) -> LogConfig:
        """Apply ``compute`` to this node's set (or the cluster default's), check the outcome, and
        unless ``validate_only`` store it durably before it takes effect; returns the new log
        defaults.  One change at a time, so concurrent changes never lose one another."""
        async with self._lock:
            new = compute(dict(self.node if per_node else self.default))
            check_names(list(new))
            try:
                config = self.log_defaults(node=new) if per_node else self.log_defaults(default=new)
            except DynamicConfigError:
                raise
            except ValueError as exc:
                raise DynamicConfigError(str(exc)) from None
            if validate_only:
                return config
            node, default = (new, self.default) if per_node else (self.node, new)
            if self.path is not None:
                data = self._file_data()
                data["brokers"][str(self.node_id)] = node
                data["default"] = default
                text = json.dumps(data, indent=1, sort_keys=True) + "\n"
                await asyncio.to_thread(atomic_write_text, self.path, text)
            self.node, self.default = node, default
            return config

    def _file_data(self) -> dict:
        """The file's content (other node ids' sets are kept, as Kafka keeps every broker's)."""
        data: dict = {"version": 1, "brokers": {}, "default": {}}
        if self.path is not None and self.path.exists():
            try:
                old = json.loads(self.path.read_text(encoding="utf-8"))
                data["brokers"] = dict(old.get("brokers", {}))
            except (OSError, ValueError):
                pass
        return data

    # --- values --------------------------------------------------------------------------

    def layers(self, name: str) -> list[tuple[str | None, ConfigSource]]:
        """Where ``name`` has a value, highest priority first (Kafka's synonym sources)."""
        out: list[tuple[str | None, ConfigSource]] = []
        if name in self.node:
            out.append((self.node[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in self.default:
            out.append((self.default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        setting = SETTINGS_BY_NAME.get(name)
        if setting is None:
            return out
        if self.static.sources.get(name, "default") != "default":
            out.append((_shown(name, self.static[name]), ConfigSource.STATIC_BROKER_CONFIG))
        if setting.default is not None:
            out.append((_shown(name, setting.default), ConfigSource.DEFAULT_CONFIG))
        return out

    def synonyms(self, name: str) -> list[tuple[str, str | None, ConfigSource]]:
        """Kafka's synonym list for a broker setting (``ConfigHelper.configSynonyms``)."""
        return self.synonyms_of(broker_synonyms(name), name)

    def synonyms_of(self, names: tuple[str, ...], primary: str | None = None
                    ) -> list[tuple[str, str | None, ConfigSource]]:
        """Every source of every synonym name, by source, then Kafka's cut: entries before the
        first one named ``primary`` (default: the first name) are dropped.  So a topic's
        ``retention.ms`` with only ``log.retention.hours`` set lists no synonym and reports
        DEFAULT_CONFIG, as Kafka does."""
        found = {n: self.layers(n) for n in names}
        out = []
        for source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                       ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG):
            out.extend((n, v, s) for n, layers in found.items() for v, s in layers if s is source)
        first = names[0] if primary is None else primary
        return list(itertools.dropwhile(lambda syn: syn[0] != first, out))

    def value(self, name: str) -> str | None:
        layers = self.layers(name)
        return layers[0][0] if layers else None

    def log_defaults(self, node: Mapping[str, str] | None = None,
                     default: Mapping[str, str] | None = None) -> LogConfig:
        """The broker-level LogConfig with the overrides (or the given candidate sets) applied."""
        props = self.static.log_defaults()
        for layer in (self.default if default is None else default, self.node if node is None else node):
            for name, raw in layer.items():
                value = parse_dynamic(name, raw)
                if value is None:  # an optional setting given as empty: as if unset
                    props.pop(name, None)
                else:
                    props[name] = value
        return LogConfig.from_broker_config(props)


def parse_dynamic(name: str, raw: str) -> Any:
    """A dynamic setting's value, typed as the static one would be; raises DynamicConfigError."""
    setting = SETTINGS_BY_NAME.get(name)
    if setting is None or name not in DYNAMIC_SETTINGS:
        raise DynamicConfigError(f"Cannot update these configs dynamically: {name}")
    try:
        value = setting.convert(raw)
    except (ValueError, TypeError) as exc:
        raise DynamicConfigError(f"Invalid value {raw} for configuration {name}: {exc}") from None
    if name == "log.message.timestamp.type":
        value = _TIMESTAMP_TYPES[value]
    return value


def check_names(names: list[str]) -> None:
    """Kafka's ``validateConfigs``: every name must be dynamically updatable."""
    bad = sorted(n for n in names if n not in DYNAMIC_SETTINGS)
    if bad:
        unknown = [n for n in bad if n not in SETTINGS_BY_NAME]
        why = f" ({', '.join(unknown)} unknown to Odradek)" if unknown else ""
        raise DynamicConfigError(f"Cannot update these configs dynamically: {', '.join(bad)}{why}")
