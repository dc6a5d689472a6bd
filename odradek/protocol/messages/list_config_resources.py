"""ListConfigResources (key 74; KIP-1000 named it ListClientMetricsResources, KIP-1142
renamed it): the config resources a broker knows.  Flexible from v0; v0 lists only
client-metrics resources, v1 asks for resource types and answers each resource's type."""

from ..schema import F, Message

REQUEST = Message("ListConfigResourcesRequest", [
    F("resource_types", "[]int8", "1+"),
], valid="0-1", flexible="0+")

RESPONSE = Message("ListConfigResourcesResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("config_resources", "[]", fields=[
        F("resource_name", "string"),
        F("resource_type", "int8", "1+", default=16),
    ]),
], valid="0-1", flexible="0+")
