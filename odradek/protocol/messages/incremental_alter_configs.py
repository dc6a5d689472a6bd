"""IncrementalAlterConfigs (key 44): per-key SET/DELETE/APPEND/SUBTRACT (KIP-339).

What kafka-python's ``alter_configs`` and confluent-kafka's
``incremental_alter_configs`` send; v1 is flexible.
"""

from ..schema import F, Message

REQUEST = Message("IncrementalAlterConfigsRequest", [
    F("resources", "[]", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]", fields=[
            F("name", "string"),
            F("config_operation", "int8"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("validate_only", "bool"),
], valid="0-1", flexible="1+")

RESPONSE = Message("IncrementalAlterConfigsResponse", [
    F("throttle_time_ms", "int32"),
    F("responses", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ]),
], valid="0-1", flexible="1+")
