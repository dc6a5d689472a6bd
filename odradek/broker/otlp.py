"""Pushed client metrics (KIP-714): OpenTelemetry ``MetricsData`` protobuf to plain values.

``opentelemetry-proto`` (the generated protobuf classes OpenTelemetry publishes) is imported
on the first push, so a broker without telemetry never loads protobuf.  A metric becomes
its name and either one value (a single data point without attributes) or its data points
``[{"attributes": {...}, "value": ...}]``; a histogram's or summary's value is a dict of
its count, sum and buckets or quantiles.
"""

from __future__ import annotations

from typing import Any


class OtlpError(ValueError):
    """The payload is not an OTLP ``MetricsData`` message."""


def decode_metrics(payload: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(metrics by name, resource attributes)`` of a serialized ``MetricsData``."""
    from google.protobuf.message import DecodeError  # noqa: PLC0415
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData  # noqa: PLC0415

    data = MetricsData()
    try:
        data.ParseFromString(payload)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise OtlpError(f"not an OTLP MetricsData message: {exc}") from None
    metrics: dict[str, Any] = {}
    resource: dict[str, Any] = {}
    for rm in data.resource_metrics:
        resource.update(_attributes(rm.resource.attributes))
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points = _points(metric)
                one = len(points) == 1 and not points[0]["attributes"]
                metrics[metric.name] = points[0]["value"] if one else points
    return metrics, resource


def _points(metric) -> list[dict[str, Any]]:
    kind = metric.WhichOneof("data")
    if kind is None:
        return []
    points = getattr(metric, kind).data_points
    value = _number if kind in ("gauge", "sum") else _distribution
    return [{"attributes": _attributes(p.attributes), "value": value(p)} for p in points]


def _number(point) -> int | float | None:
    which = point.WhichOneof("value")
    return None if which is None else getattr(point, which)


def _distribution(point) -> dict[str, Any]:
    """A histogram's, exponential histogram's or summary's data point as a dict of its fields."""
    out: dict[str, Any] = {"count": point.count, "sum": point.sum}
    for name in ("bucket_counts", "explicit_bounds"):
        if hasattr(point, name):
            out[name] = list(getattr(point, name))
    if hasattr(point, "quantile_values"):
        out["quantiles"] = {q.quantile: q.value for q in point.quantile_values}
    return out


def _attributes(pairs) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in pairs}


def _any_value(v) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    return getattr(v, which)
