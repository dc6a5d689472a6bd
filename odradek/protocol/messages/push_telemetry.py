"""PushTelemetry (key 72, KIP-714): a client pushes its metrics, OpenTelemetry ``MetricsData``
protobuf, maybe compressed.  Flexible from v0."""

from ..schema import F, Message

REQUEST = Message("PushTelemetryRequest", [
    F("client_instance_id", "uuid"),
    F("subscription_id", "int32"),
    F("terminating", "bool"),
    F("compression_type", "int8"),
    F("metrics", "bytes"),
], valid="0", flexible="0+")

RESPONSE = Message("PushTelemetryResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
], valid="0", flexible="0+")
