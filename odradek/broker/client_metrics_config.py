"""Client-metrics subscriptions (KIP-714): the ``CLIENT_METRICS`` config resources
(resource type 16) and which client instances each applies to.

Kafka's ``ClientMetricsConfigs``: a resource has ``metrics`` (metric-name prefixes, ``*``
for all), ``interval.ms`` (100 to 3600000, default 300000) and ``match`` (``selector=regex``
entries, all of which must match the whole value; empty: every client).  A client instance
gets the union of the metrics of the resources that match it and the least of their
intervals (``ClientMetricsManager.createSubscriptionInfo``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..protocol.lean_dataclass import dataclass
from ..storage.files import atomic_write_text

DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
KEYS = ("metrics", "interval.ms", "match")
LIST_KEYS = frozenset(("metrics", "match"))
ALL_METRICS = "*"
# the selectors Odradek can evaluate; Kafka also has client_software_name/_version (from
# ApiVersions v3) and client_source_port, which this broker does not keep per connection
SELECTORS = ("client_instance_id", "client_id", "client_source_address")
KAFKA_ONLY_SELECTORS = ("client_software_name", "client_software_version", "client_source_port")


class ClientMetricsConfigError(ValueError):
    """A resource's configs refused: ``invalid_request`` for an unknown key (Kafka's
    InvalidRequestException), else a bad value (InvalidConfigurationException)."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


@dataclass(frozen=True)
class ClientInfo:
    """What a subscription's ``match`` can select on."""

    client_instance_id: str
    client_id: str
    client_source_address: str


@dataclass(frozen=True)
class Subscription:
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    match: tuple[tuple[str, re.Pattern], ...] = ()

    @classmethod
    def from_configs(cls, configs: Mapping[str, str]) -> Subscription:
        """Check and read a resource's configs (``ClientMetricsConfigs.validate``)."""
        unknown = sorted(set(configs) - set(KEYS))
        if unknown:
            raise ClientMetricsConfigError(f"Unknown client metrics configuration: {unknown}",
                                           invalid_request=True)
        metrics = _items(configs.get("metrics", ""))
        try:
            interval = int(configs.get("interval.ms", DEFAULT_INTERVAL_MS))
        except ValueError:
            raise ClientMetricsConfigError(f"interval.ms must be an integer: {configs['interval.ms']!r}") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                f"Invalid value {interval} for interval.ms, interval must be between 100 and 3600000 (1 hour)")
        return cls(tuple(metrics), interval, tuple(_selector(m) for m in _items(configs.get("match", ""))))

    def matches(self, client: ClientInfo) -> bool:
        return all(pattern.fullmatch(getattr(client, name)) for name, pattern in self.match)


def combine(subscriptions: Iterable[Subscription]) -> Subscription:
    """One instance's subscription: the union of the metrics (``*`` if any asks for all), the
    least interval; the default interval when nothing matches."""
    subs = list(subscriptions)
    metrics: list[str] = []
    for sub in subs:
        metrics.extend(m for m in sub.metrics if m not in metrics)
    if ALL_METRICS in metrics:
        metrics = [ALL_METRICS]
    interval = min((s.interval_ms for s in subs), default=DEFAULT_INTERVAL_MS)
    return Subscription(tuple(metrics), interval)


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _selector(entry: str) -> tuple[str, re.Pattern]:
    name, sep, regex = entry.partition("=")
    name = name.strip()
    if not sep or not regex.strip():
        raise ClientMetricsConfigError(f"Illegal client matching pattern: {entry}")
    if name in KAFKA_ONLY_SELECTORS:
        raise ClientMetricsConfigError(f"match selector {name} is not supported by Odradek "
                                       f"(supported: {', '.join(SELECTORS)})")
    if name not in SELECTORS:
        raise ClientMetricsConfigError(f"Illegal client matching pattern: {entry}")
    try:
        return name, re.compile(regex.strip())
    except re.error as exc:
        raise ClientMetricsConfigError(f"Illegal regex pattern {regex!r} for {name}: {exc}") from None


class SubscriptionStore:
    """The ``CLIENT_METRICS`` resources by name, and the settings' default subscription.

    Stored as JSON (``{name: {key: value}}``) written atomically before a change takes effect;
    ``version`` grows with every change so client instances know to re-evaluate."""

    def __init__(self, default: Subscription | None, path: Path | None) -> None:
        self.default = default
        self.path = path
        self.resources: dict[str, dict[str, str]] = {}
        self._subs: dict[str, Subscription] = {}
        self.version = 0
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Read the stored resources (at start, with the other stores: not when wired)."""
        path = self.path
        if path is None or not path.exists():
            return
        try:
            data = json.loads(path.read_text())
            subs = {name: Subscription.from_configs(configs) for name, configs in data.items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise ClientMetricsConfigError(f"{path}: {exc}") from None
        self.resources, self._subs = {n: dict(c) for n, c in data.items()}, subs

    def for_client(self, client: ClientInfo) -> Subscription:
        matching = [s for s in self._subs.values() if s.matches(client)]
        if self.default is not None:
            matching.append(self.default)
        return combine(matching)

    async def change(self, name: str, compute: Callable[[dict[str, str]], dict[str, str]], *,
                     validate_only: bool = False) -> None:
        """Apply ``compute`` to resource ``name``'s configs, check them and store them durably
        (no configs left: the resource is gone)."""
        async with self._lock:
            new = compute(dict(self.resources.get(name, {})))
            sub = Subscription.from_configs(new)
            if validate_only:
                return
            resources = {**self.resources, name: new}
            if not new:
                del resources[name]
            if self.path is not None:
                text = json.dumps(resources, indent=1, sort_keys=True) + "\n"
                await asyncio.to_thread(atomic_write_text, self.path, text)
            self.resources = resources
            self._subs = {n: s for n, s in self._subs.items() if n != name}
            if new:
                self._subs[name] = sub
            self.version += 1

    async def clear(self) -> int:
        """Forget every resource in one durable write; returns how many there were."""
        async with self._lock:
            n = len(self.resources)
            if not n:
                return 0
            if self.path is not None:
                await asyncio.to_thread(atomic_write_text, self.path, "{}\n")
            self.resources, self._subs = {}, {}
            self.version += 1
            return n
