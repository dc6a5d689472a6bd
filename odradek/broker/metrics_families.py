"""The Prometheus families of a broker's metrics, built at scrape time (see ``metrics``).

Imported only when something reads the metrics, so a broker without ``metrics.port`` never
loads prometheus-client.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter as Tally
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ..protocol.registry import APIS

if TYPE_CHECKING:
    from ..storage.log_manager import LogManager
    from .client_metrics import ClientMetricsManager
    from .coordinator.service import Coordinator
    from .fetch_sessions import FetchSessionCache
    from .server import KafkaServer


class MetricServices(Protocol):
    """What a scrape reads of the broker (``BrokerApp`` wires it), on the broker's loop."""

    loop: asyncio.AbstractEventLoop | None
    loop_thread: threading.Thread | None
    server: KafkaServer
    listeners: list[Any]
    logs: LogManager
    coordinator: Coordinator | None
    client_metrics: ClientMetricsManager
    fetch_sessions: FetchSessionCache


class Figures(Protocol):
    """What the families read of ``metrics.Metrics``: the request figures, and the broker once attached."""

    stats: dict[tuple[int, int], Any]
    buckets: tuple[float, ...]
    app: MetricServices | None


def build_registry(metrics: Figures) -> CollectorRegistry:
    """A registry holding the broker's collector (request figures only before ``attach``)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_StateCollector(metrics))
    return registry


def request_families(metrics: Figures) -> list:
    requests = CounterMetricFamily("odradek_requests", "Requests handled, by API and version",
                                   labels=["api", "version"])
    latency = HistogramMetricFamily("odradek_request_latency_seconds",
                                    "Time from decoding a request to its encoded response",
                                    labels=["api", "version"])
    for (key, version), stats in sorted(metrics.stats.items()):
        labels = [APIS[key].name, str(version)]
        requests.add_metric(labels, stats.count)
        cumulative, buckets = 0, []
        for bound, n in zip((*metrics.buckets, float("inf")), stats.buckets, strict=True):
            cumulative += n
            buckets.append((_bucket_label(bound), cumulative))
        latency.add_metric(labels, buckets, stats.total)
    return [requests, latency]


_EVENT_HELP = {
    "rebalances": "Rebalances started (groups entering PreparingRebalance)",
    "offset_commits": "Committed offsets written (one per partition)",
    "compactions": "Compaction runs that rewrote a log",
}


class _StateCollector:
    """Reads broker state at scrape time, on the broker's loop when called from another thread."""

    def __init__(self, metrics: Figures):
        self.metrics = metrics

    def collect(self):
        app = self.metrics.app
        if app is None:  # read before the broker started: its request figures only
            yield from request_families(self.metrics)
            return
        yield from _on_loop(app, lambda: _families(app, self.metrics))


def _on_loop(app: MetricServices, families: Any) -> list:
    """``families()`` run on the broker's loop (a scrape comes from prometheus-client's thread)."""
    if app.loop is not None and app.loop.is_running() and threading.current_thread() is not app.loop_thread:
        return asyncio.run_coroutine_threadsafe(_call(families), app.loop).result(timeout=10)
    return families()


def _families(app: MetricServices, metrics: Figures) -> list:
    out = request_families(metrics)
    connections = GaugeMetricFamily("odradek_connections", "Open client connections")
    connections.add_metric([], app.server.open_connections)
    out.append(connections)
    out.extend(_security_families(app))
    events = _event_counts(app)
    for name, help_text in _EVENT_HELP.items():
        c = CounterMetricFamily(f"odradek_{name}", help_text)
        c.add_metric([], events[name])
        out.append(c)
    out.extend(_log_families(app))
    out.extend(_fetch_session_families(app.fetch_sessions))
    out.extend(_telemetry_families(app))
    if app.coordinator is not None:
        out.extend(_coordinator_families(app))
    return out


async def _call(fn):
    return fn()


def _event_counts(app: MetricServices) -> Tally[str]:
    counts: Tally[str] = Tally()
    if app.coordinator is not None:
        for shard in app.coordinator.shards:
            counts.update(shard.stats)
    counts["compactions"] += app.logs.compactions
    return counts


def _security_families(app: MetricServices) -> list:
    """Connections per listener and authentication outcomes (Kafka's per-listener
    successful/failed-authentication-total, expired-connections-killed-count)."""
    by_listener = GaugeMetricFamily("odradek_listener_connections", "Open client connections per listener",
                                    labels=["listener"])
    open_by: Tally[str] = Tally({listener.name: 0 for listener in app.listeners})
    open_by.update(conn.listener_name for conn in app.server._connections)
    for name, n in sorted(open_by.items()):
        by_listener.add_metric([name], n)
    auth = CounterMetricFamily("odradek_sasl_authentications", "SASL authentications (re-authentications too)",
                               labels=["listener", "mechanism", "result"])
    expired = CounterMetricFamily("odradek_expired_connections_killed",
                                  "Connections closed on a request after their SASL session ended (KIP-368)",
                                  labels=["listener"])
    tls = CounterMetricFamily("odradek_tls_handshake_failures", "TLS handshakes that failed (a plaintext "
                              "client, a missing or untrusted certificate)", labels=["listener"])
    for (event, listener, mechanism), n in sorted(app.server.security_events.items()):
        if event in ("succeeded", "failed"):
            auth.add_metric([listener, mechanism, event], n)
        elif event == "expired_connection_killed":
            expired.add_metric([listener], n)
        else:
            tls.add_metric([listener], n)
    return [by_listener, auth, expired, tls]


def _log_families(app: MetricServices) -> list:
    size = GaugeMetricFamily("odradek_log_size_bytes", "Bytes on disk per partition",
                             labels=["topic", "partition"])
    end = GaugeMetricFamily("odradek_log_end_offset", "Next offset per partition",
                            labels=["topic", "partition"])
    for (topic, partition), log in sorted(app.logs.logs().items()):
        labels = [topic, str(partition)]
        size.add_metric(labels, log.size_bytes)
        end.add_metric(labels, log.log_end_offset)
    return [size, end]


def _fetch_session_families(cache: FetchSessionCache) -> list:
    """Kafka's FetchSessionCache gauges and eviction meter (NumIncrementalFetchSessions,
    NumIncrementalFetchPartitionsCached, IncrementalFetchSessionEvictionsPerSec)."""
    sessions = GaugeMetricFamily("odradek_incremental_fetch_sessions", "Incremental fetch sessions cached (KIP-227)")
    sessions.add_metric([], len(cache))
    cached = GaugeMetricFamily("odradek_incremental_fetch_partitions_cached",
                               "Partitions held by the incremental fetch sessions")
    cached.add_metric([], cache.partitions_cached())
    evictions = CounterMetricFamily("odradek_incremental_fetch_session_evictions",
                                    "Fetch sessions evicted to make room for a new one")
    evictions.add_metric([], cache.evictions)
    return [sessions, cached, evictions]


def _telemetry_families(app: MetricServices) -> list:
    """The numbers clients last pushed with PushTelemetry (KIP-714), one sample per metric and
    attribute set; nothing unless telemetry is on and clients pushed."""
    rows = app.client_metrics.numbers()
    if not rows:
        return []
    family = GaugeMetricFamily("odradek_client_telemetry", "The last value a client pushed of each of "
                               "its metrics (KIP-714)",
                               labels=["client_instance_id", "client_id", "metric", "attributes"])
    for instance_id, client_id, name, attrs, value in rows:
        family.add_metric([instance_id, client_id, name, attrs], value)
    return [family]


def _coordinator_families(app: MetricServices) -> list:
    from .coordinator.state import GroupState

    coordinator = app.coordinator
    states = GaugeMetricFamily("odradek_groups", "Groups by state", labels=["state"])
    members = GaugeMetricFamily("odradek_group_members", "Members per group", labels=["group"])
    committed = GaugeMetricFamily("odradek_committed_offsets", "Committed offsets held",
                                  labels=["group"])
    lag = GaugeMetricFamily("odradek_consumer_lag",
                            "Log end offset minus committed offset, for local topics",
                            labels=["group", "topic", "partition"])
    load = GaugeMetricFamily("odradek_offsets_load_seconds",
                             "Time to replay each __consumer_offsets partition",
                             labels=["partition"])
    by_state: Tally[str] = Tally({s.value: 0 for s in GroupState if s is not GroupState.DEAD})
    for shard in coordinator.shards:
        load.add_metric([str(shard.partition)], shard.load_time_ms / 1000.0)
        for group_id, group in shard.groups.items():
            if group.state is GroupState.DEAD:
                continue
            by_state[group.state.value] += 1
            members.add_metric([group_id], len(group.members))
        for group_id, offsets in shard.offsets.items():
            committed.add_metric([group_id], len(offsets))
            for (topic, partition), value in offsets.items():
                log = app.logs.get(topic, partition)
                if log is not None:
                    lag.add_metric([group_id, topic, str(partition)],
                                   max(0, log.log_end_offset - value.offset))
    for state, n in sorted(by_state.items()):
        states.add_metric([state], n)
    return [states, members, committed, lag, load]


def _bucket_label(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
