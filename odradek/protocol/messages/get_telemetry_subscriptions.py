"""GetTelemetrySubscriptions (key 71, KIP-714): a client asks which of its metrics the broker
wants pushed, how often, and gets its client instance id.  Flexible from v0."""

from ..schema import F, Message

REQUEST = Message("GetTelemetrySubscriptionsRequest", [
    F("client_instance_id", "uuid"),
], valid="0", flexible="0+")

RESPONSE = Message("GetTelemetrySubscriptionsResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("client_instance_id", "uuid"),
    F("subscription_id", "int32"),
    F("accepted_compression_types", "[]int8"),
    F("push_interval_ms", "int32"),
    F("telemetry_max_bytes", "int32"),
    F("delta_temporality", "bool"),
    F("requested_metrics", "[]string"),
], valid="0", flexible="0+")
