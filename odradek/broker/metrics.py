"""Prometheus metrics: request counters and latencies, plus state read at scrape time.

Counters and histograms are updated on the request path (one cached child
per API and version, so an observation is a couple of attribute lookups).
Everything that is *state* -- groups by state, members, log sizes, consumer
lag, load times -- is computed when Prometheus scrapes, by a collector that
reads the broker's own structures on its event loop, so the hot paths carry
no bookkeeping for it.  Each broker has its own registry: tests run several
brokers in one process.

prometheus-client and the families (``metrics_families``) are imported only
when something reads the metrics (``metrics.port``, a test's ``render``): a
broker without them starts without that code.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .metrics_families import MetricServices


LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                   0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class _RequestStats:
    """Count, latency sum and bucket counts of one API version: plain ints on the hot path."""

    __slots__ = ("count", "total", "buckets")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)


class Metrics:
    def __init__(self) -> None:
        self._registry = None  # prometheus_client's CollectorRegistry, built when first read
        self.app: MetricServices | None = None  # set by attach(); what the families read
        self._stats: dict[tuple[int, int], _RequestStats] = {}
        self._http = None

    def observe(self, api_key: int, version: int, seconds: float) -> None:
        """Record one request (~1 µs: prometheus-client's locked children cost ~5 µs)."""
        stats = self._stats.get((api_key, version))
        if stats is None:
            stats = self._stats[(api_key, version)] = _RequestStats()
        stats.count += 1
        stats.total += seconds
        stats.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1

    buckets = LATENCY_BUCKETS  # the histogram's upper bounds (seconds), for the families

    @property
    def stats(self) -> dict[tuple[int, int], _RequestStats]:
        """(api key, version) -> counts so far."""
        return self._stats

    def attach(self, app: MetricServices) -> None:
        self.app = app

    @property
    def registry(self):
        """This broker's prometheus CollectorRegistry (imports prometheus-client on first use)."""
        if self._registry is None:
            from .metrics_families import build_registry  # noqa: PLC0415 - only when metrics are read

            self._registry = build_registry(self)
        return self._registry

    def render(self) -> bytes:
        from prometheus_client.exposition import generate_latest  # noqa: PLC0415 - see registry

        return generate_latest(self.registry)

    def serve(self, host: str, port: int) -> int:
        """Start the HTTP endpoint (a daemon thread); returns the bound port."""
        from prometheus_client.exposition import start_http_server  # noqa: PLC0415 - see registry

        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._http = server
        return server.server_address[1]

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
