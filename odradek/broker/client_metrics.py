"""Client telemetry (KIP-714): client instances, their subscription and what they pushed.

Kafka's ``ClientMetricsManager`` (``org.apache.kafka.server``) is the model: a client
asks GetTelemetrySubscriptions (a zero id gets a new UUID), is told which metric-name
prefixes to push and how often, and pushes OTLP ``MetricsData`` with PushTelemetry.  The
checks and their order are Kafka's (``validateGetRequest``, ``validatePushRequest``,
``ClientMetricsInstance.maybeUpdate*RequestTimestamp``).  Instead of handing the payload
to an exporter plugin, the broker decodes it (``otlp.py``) and keeps the last push of each
instance for tests (``client_metrics``); an undecodable payload is what an exporter's
exception is in Kafka: INVALID_RECORD.

Subscriptions are Kafka's client-metrics config resources (``client_metrics_config.py``,
changed with IncrementalAlterConfigs, stored in ``client-metrics.json`` in the data
directory) plus, from the broker's settings, a default one for every client
(``client.metrics.default.*``).  A change re-evaluates every instance on its next request.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

import structlog

from ..protocol import compression
from ..protocol.crc import crc32c
from ..protocol.errors import ErrorCode
from ..protocol.lean_dataclass import dataclass
from ..protocol.primitives import ZERO_UUID
from .client_metrics_config import ClientInfo, Subscription, SubscriptionStore
from .dispatch import RequestContext

log = structlog.get_logger("odradek.telemetry")

# ClientMetricsManager: the compression types offered, in Kafka's order (the client takes
# the first it supports), the instance cache size and expiry
ACCEPTED_COMPRESSION_TYPES = (compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY)
SUPPORTED_COMPRESSION_TYPES = frozenset((compression.NONE, *ACCEPTED_COMPRESSION_TYPES))
CACHE_MAX_SIZE = 16384
DEFAULT_CACHE_EXPIRY_MS = 60_000
CACHE_EXPIRY_PUSH_INTERVALS = 3
FILE = "client-metrics.json"
# Uuid.RESERVED: the metadata topic id and zero; never given to a client
_RESERVED = frozenset((uuid.UUID(int=0), uuid.UUID(int=1)))
# decompress in a thread above this many bytes (never block the event loop)
_INLINE_BYTES = 64 * 1024


@dataclass
class ClientInstance:
    """``ClientMetricsInstance``: one client's subscription id, timestamps and last push."""

    instance_id: uuid.UUID
    subscription: Subscription
    subscription_id: int
    version: int  # of the subscriptions it was evaluated against
    client_id: str | None
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_error: int = ErrorCode.NONE
    terminating: bool = False
    last_seen_ms: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    pushed_at_ms: int | None = None
    pushes: int = 0


class TelemetryError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def subscription_id(sub: Subscription, instance_id: uuid.UUID) -> int:
    """``ClientMetricsManager.computeSubscriptionId``: CRC32C of Java's ``List.toString()`` of
    the metrics and the interval, XOR ``Uuid.hashCode()``, as a signed int32."""
    text = "[" + ", ".join(sub.metrics) + "]" + str(sub.interval_ms)
    hi, lo = instance_id.int >> 64, instance_id.int & (2**64 - 1)
    h = hi ^ lo
    uuid_hash = (h >> 32) ^ (h & 0xFFFFFFFF)
    (signed,) = struct.unpack(">i", struct.pack(">I", (crc32c(text.encode()) ^ uuid_hash) & 0xFFFFFFFF))
    return signed


def new_instance_id() -> uuid.UUID:
    """``Uuid.randomUuid``: random, never reserved, never starting with '-' in base64."""
    while True:
        candidate = uuid.uuid4()
        if candidate not in _RESERVED and candidate.bytes[0] >> 2 != 62:  # base64url '-' is 62
            return candidate


class ClientMetricsManager:
    """The broker's client instances (bounded LRU, expiring) and the subscriptions they get."""

    def __init__(self, default: Subscription | None, max_bytes: int, now_ms: Callable[[], int],
                 data_dir: Path | None = None) -> None:
        self.subscriptions = SubscriptionStore(default, None if data_dir is None else data_dir / FILE)
        self.max_bytes = max_bytes
        self._now_ms = now_ms
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    # --- GetTelemetrySubscriptions -------------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID, ctx: RequestContext) -> dict:
        """The answer to GetTelemetrySubscriptions (``processGetTelemetrySubscriptionRequest``)."""
        now = self._now_ms()
        if instance_id == ZERO_UUID:
            instance_id = new_instance_id()
        inst = self._instance(instance_id, ctx, now)
        sub = inst.subscription
        answer = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "client_instance_id": instance_id,
                  "subscription_id": inst.subscription_id,
                  "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
                  "push_interval_ms": sub.interval_ms, "telemetry_max_bytes": self.max_bytes,
                  "delta_temporality": True, "requested_metrics": list(sub.metrics)}
        since = now - max(inst.last_get_ms, inst.last_push_ms)
        if since < sub.interval_ms and inst.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                               ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            answer["error_code"] = ErrorCode.THROTTLING_QUOTA_EXCEEDED
            return answer
        inst.last_get_ms = now
        inst.last_error = ErrorCode.NONE
        return answer

    # --- PushTelemetry -------------------------------------------------------------------

    async def push(self, req, ctx: RequestContext) -> ErrorCode:
        """Check a PushTelemetry in Kafka's order, then decode and keep its metrics."""
        instance_id = req.client_instance_id
        if instance_id is None or instance_id in _RESERVED:
            return ErrorCode.INVALID_REQUEST
        now = self._now_ms()
        inst = self._instance(instance_id, ctx, now)
        try:
            self._validate_push(inst, req, now)
        except TelemetryError as exc:
            inst.last_error = exc.code
            return exc.code
        finally:
            inst.terminating = inst.terminating or bool(req.terminating)
        if req.metrics:
            try:
                inst.metrics, inst.resource = await _decoded(req.compression_type, req.metrics)
            except Exception as exc:  # noqa: BLE001  (Kafka: an exporter's exception is INVALID_RECORD)
                log.info("telemetry.push_refused", client_instance_id=str(instance_id), client=ctx.client_id,
                         codec=req.compression_type, bytes=len(req.metrics), reason=str(exc)[:200])
                inst.last_error = ErrorCode.INVALID_RECORD
                return ErrorCode.INVALID_RECORD
            inst.pushed_at_ms, inst.pushes = now, inst.pushes + 1
        inst.last_error = ErrorCode.NONE
        return ErrorCode.NONE

    def _validate_push(self, inst: ClientInstance, req, now: int) -> None:
        if inst.terminating:
            raise TelemetryError(ErrorCode.INVALID_REQUEST, "a push after a terminating push")
        # a push right after a Get is always on time (the client jitters its first push)
        if inst.last_get_ms > inst.last_push_ms or now - inst.last_push_ms >= inst.subscription.interval_ms:
            inst.last_push_ms = now
        elif not req.terminating:
            raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, "pushed before the push interval")
        if req.subscription_id != inst.subscription_id:
            raise TelemetryError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID, "not the current subscription")
        if req.compression_type not in SUPPORTED_COMPRESSION_TYPES:
            raise TelemetryError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "unknown compression type")
        if req.metrics is not None and len(req.metrics) > self.max_bytes:
            raise TelemetryError(ErrorCode.TELEMETRY_TOO_LARGE, "metrics above telemetry.max.bytes")

    # --- the instance cache ----------------------------------------------------------------

    def _instance(self, instance_id: uuid.UUID, ctx: RequestContext, now: int) -> ClientInstance:
        """The instance, new (or re-evaluated, as Kafka makes a new one) if the subscriptions
        changed since it was last seen; what it pushed is kept for the tests."""
        self._expire(now)
        inst = self._instances.get(instance_id)
        if inst is None or inst.version != self.subscriptions.version:
            # the address as Kafka's getHostAddress() gives it (ctx has Java's "/host" form)
            info = ClientInfo(str(instance_id), ctx.client_id or "", ctx.client_host.lstrip("/"))
            sub = self.subscriptions.for_client(info)
            fresh = ClientInstance(instance_id, sub, subscription_id(sub, instance_id),
                                   self.subscriptions.version, ctx.client_id)
            if inst is not None:
                fresh.metrics, fresh.resource = inst.metrics, inst.resource
                fresh.pushed_at_ms, fresh.pushes = inst.pushed_at_ms, inst.pushes
            inst = self._instances[instance_id] = fresh
            while len(self._instances) > CACHE_MAX_SIZE:
                self._instances.popitem(last=False)
        self._instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        return inst

    def _expire(self, now: int) -> None:
        """Forget instances not heard from for ``max(60 s, 3 push intervals)`` (the least recently
        seen first)."""
        while self._instances:
            oldest = next(iter(self._instances.values()))
            expiry = max(DEFAULT_CACHE_EXPIRY_MS, CACHE_EXPIRY_PUSH_INTERVALS * oldest.subscription.interval_ms)
            if now - oldest.last_seen_ms < expiry:
                return
            self._instances.popitem(last=False)

    async def reset(self) -> None:
        """Forget every instance and every client-metrics resource (test control's reset)."""
        self._instances.clear()
        await self.subscriptions.clear()

    # --- what tests and the metrics endpoint read ----------------------------------------

    def reported(self, client_id: str | None = None) -> dict[str, dict[str, Any]]:
        """``{client instance id: {metric name: value or points}}`` of the instances that pushed
        metrics (and are not expired), optionally only those of ``client_id``."""
        self._expire(self._now_ms())
        return {str(i.instance_id): dict(i.metrics) for i in self._instances.values()
                if i.pushed_at_ms is not None and (client_id is None or i.client_id == client_id)}

    def numbers(self) -> list[tuple[str, str, str, str, float]]:
        """(instance id, client id, metric name, attributes as ``k=v,...``, value) of every number
        the instances last pushed (gauges and sums; what the Prometheus endpoint exports)."""
        self._expire(self._now_ms())
        rows = []
        for inst in self._instances.values():
            for name, value in inst.metrics.items():
                points = value if isinstance(value, list) else [{"attributes": {}, "value": value}]
                for p in points:
                    if isinstance(p["value"], int | float):
                        attrs = ",".join(f"{k}={v}" for k, v in sorted(p["attributes"].items()))
                        rows.append((str(inst.instance_id), inst.client_id or "", name, attrs, p["value"]))
        return rows

    def instances(self) -> list[dict[str, Any]]:
        """Every known instance: id, client id, subscription, pushes, terminating, resource."""
        self._expire(self._now_ms())
        return [{"client_instance_id": str(i.instance_id), "client_id": i.client_id,
                 "subscription_id": i.subscription_id, "requested_metrics": list(i.subscription.metrics),
                 "push_interval_ms": i.subscription.interval_ms, "pushes": i.pushes,
                 "terminating": i.terminating, "pushed_at_ms": i.pushed_at_ms, "resource": dict(i.resource)}
                for i in self._instances.values()]



async def _decoded(codec: int, payload: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """Decompress (in a thread when big) and decode an OTLP payload."""
    from .otlp import decode_metrics  # noqa: PLC0415  (protobuf only once a client pushes)

    def work() -> tuple[dict[str, Any], dict[str, Any]]:
        return decode_metrics(bytes(compression.decompress(codec, payload)))

    return work() if len(payload) <= _INLINE_BYTES else await asyncio.to_thread(work)
