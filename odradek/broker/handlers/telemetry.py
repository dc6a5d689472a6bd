"""GetTelemetrySubscriptions and PushTelemetry (v0, KIP-714): wire glue over
``client_metrics.ClientMetricsManager``.

Registered only when telemetry is on (``client.telemetry.enable`` or a default
subscription), so ApiVersions lists the two keys only then: Kafka's
``ApiVersionManager`` leaves them out unless a client-telemetry receiver is configured,
and clients (librdkafka, the Java client) never start telemetry without them.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

from ..dispatch import HandlerTable, RequestContext

if TYPE_CHECKING:
    from ..client_metrics import ClientMetricsManager


class TelemetryServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the client instances."""

    client_metrics: ClientMetricsManager


def register(table: HandlerTable, app: TelemetryServices) -> None:
    table.register(71, partial(get_telemetry_subscriptions, app))
    table.register(72, partial(push_telemetry, app))


def get_telemetry_subscriptions(app: TelemetryServices, ctx: RequestContext, req) -> dict:
    return app.client_metrics.get_subscriptions(req.client_instance_id, ctx)


async def push_telemetry(app: TelemetryServices, ctx: RequestContext, req) -> dict:
    return {"throttle_time_ms": 0, "error_code": await app.client_metrics.push(req, ctx)}
