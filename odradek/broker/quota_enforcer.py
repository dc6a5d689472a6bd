"""Enforcing client quotas as Kafka's ``ClientQuotaManager`` does, on the broker clock.

Each (quota key, entity whose quota applies) has a rate sensor: Kafka's
``Rate`` over ``SampledStat``, ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1 s), the rate being the retained total over
the time since the oldest sample but at least ``samples - 1`` full windows.
Recording a value that takes the rate over the bound gives a throttle time
``(rate - bound) / bound * window`` (``QuotaUtils.throttleTime``); the
request quota's is capped at one window (``ClientRequestQuotaManager``).

The connection asks ``throttle`` only while some quota is set
(``KafkaServer.quotas`` is None otherwise: one attribute test per request).
Produce records its request size before the handler, Fetch its answer's
record bytes after (a throttled fetch answers no data and un-records them,
as ``KafkaApis.handleFetchRequest``), every request its handler time for
``request_percentage``; the largest throttle goes into ``throttle_time_ms``
and the connection is muted for it (KIP-219: answered at once, then nothing
more is read until the throttle ends).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from .dispatch import NO_RESPONSE, ON_THROTTLE, after, decoded

if TYPE_CHECKING:
    from .client_quotas import Entity, QuotaStore
    from .dispatch import RequestContext

PRODUCE, FETCH = 0, 1
NO_THROTTLE_APIS = frozenset({17, 18, 36})  # SASL and ApiVersions: exempt, as Kafka's
PERCENT_PER_SECOND = 100.0  # a request handler busy one second is 100 % (``nanosToPercentage``)


class Rate:
    """Kafka's ``Rate`` with ``SampledStat``'s samples: [(window start ms, total)]."""

    __slots__ = ("samples", "num", "window_ms")

    def __init__(self, num: int, window_ms: int) -> None:
        self.samples: list[list[float]] = []
        self.num = num
        self.window_ms = window_ms

    def record(self, value: float, now: int) -> None:
        if not self.samples or now - self.samples[-1][0] >= self.window_ms:
            self.samples.append([now, 0.0])
            del self.samples[:-self.num]
        self.samples[-1][1] += value

    def _purge(self, now: int) -> None:
        expire = self.num * self.window_ms
        self.samples = [s for s in self.samples if now - s[0] < expire]

    def window(self, now: int) -> int:
        """``Rate.windowSize``: the elapsed time since the oldest sample, at least num - 1 windows."""
        self._purge(now)
        elapsed = now - (self.samples[0][0] if self.samples else now)
        full = elapsed // self.window_ms
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now: int) -> float:
        """Per second."""
        window = self.window(now)
        return sum(s[1] for s in self.samples) / (window / 1000.0)


class QuotaEnforcer:
    """The sensors and the throttle computation; ``store`` says the bounds."""

    def __init__(self, store: QuotaStore, now_ms: Any, samples: int = 11, window_seconds: int = 1) -> None:
        self.store = store
        self.now_ms = now_ms
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.sensors: dict[tuple[str, Entity], Rate] = {}
        self._keys: frozenset[str] = frozenset()

    def refresh(self) -> bool:
        """After a change of the store: which keys are set anywhere; False when none (off)."""
        self._keys = frozenset(k for v in self.store.quotas.values() for k in v) & \
            {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE}
        self.sensors = {k: r for k, r in self.sensors.items() if k[0] in self._keys}
        return bool(self._keys)

    def record(self, key: str, user: str, client_id: str, value: float, cap_ms: int | None = None) -> int:
        """Record ``value`` on the sensor of the quota that applies; the throttle time (0: none)."""
        if key not in self._keys:
            return 0
        found = self.store.quota_for(user, client_id, key)
        if found is None:
            return 0
        entity, bound = found
        rate = self.sensors.get((key, entity))
        if rate is None:
            rate = self.sensors[(key, entity)] = Rate(self.samples, self.window_ms)
        now = self.now_ms()
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        ms = round((observed - bound) / bound * rate.window(now))
        return ms if cap_ms is None else min(ms, cap_ms)

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        found = self.store.quota_for(user, client_id, key)
        rate = None if found is None else self.sensors.get((key, found[0]))
        if rate is not None and rate.samples:
            rate.samples[-1][1] -= value

    def throttle(self, mute: Any, ctx: RequestContext, request_size: int, result: Any, started: float) -> Any:
        """``result`` with Kafka's throttle time; ``mute(ms)`` silences the connection for it."""
        if ctx.api_key in NO_THROTTLE_APIS:
            return result
        user = _user(ctx.principal)
        client = ctx.client_id or ""
        produced = self.record(PRODUCER_BYTE_RATE, user, client, request_size) if ctx.api_key == PRODUCE else 0

        def finish(body: Any) -> Any:
            busy = (time.perf_counter() - started) * PERCENT_PER_SECOND
            ms = max(produced, self.record(REQUEST_PERCENTAGE, user, client, busy, cap_ms=self.window_ms))
            if ctx.api_key == FETCH and body is not NO_RESPONSE:
                ms = max(ms, self._fetched(body, user, client))
            if ms > 0:
                mute(ms)
                if body is not NO_RESPONSE:
                    body = decoded(ctx, body)
                    body["throttle_time_ms"] = max(body.get("throttle_time_ms") or 0, ms)
            return body
        if result is NO_RESPONSE:  # acks=0: muted, nothing to answer
            return finish(result)
        return after(result, finish)

    def _fetched(self, body: dict, user: str, client: str) -> int:
        size = sum(len(p.get("records") or b"") for t in body.get("responses") or [] for p in t["partitions"])
        if size == 0:
            return self.record(CONSUMER_BYTE_RATE, user, client, 0)
        ms = self.record(CONSUMER_BYTE_RATE, user, client, size)
        if ms > 0:  # Kafka's getThrottledResponse: no data, the bytes not counted
            self.unrecord(CONSUMER_BYTE_RATE, user, client, size)
            throttled = body.pop(ON_THROTTLE, None)  # the fetch session's answer (no new session)
            if throttled is not None:
                throttled(body)
            body["responses"] = []
        return ms


def _user(principal: str) -> str:
    """The quota user: the principal's name (``User:alice`` -> ``alice``), ANONYMOUS unauthenticated."""
    return principal.split(":", 1)[1] if principal.startswith("User:") else principal


