"""AlterConfigs (key 33): the legacy whole-set config change (kafka-python, aiokafka, librdkafka).

v1 is v0 (the throttle-time change); v2 is flexible.  Each resource's
configs replace its whole override set.
"""

from ..schema import F, Message

REQUEST = Message("AlterConfigsRequest", [
    F("resources", "[]", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]", fields=[
            F("name", "string"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("validate_only", "bool"),
], valid="0-2", flexible="2+")

RESPONSE = Message("AlterConfigsResponse", [
    F("throttle_time_ms", "int32"),
    F("responses", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ]),
], valid="0-2", flexible="2+")
