"""CreatePartitions (key 37): admin clients grow a topic's partition count.

v1 = v0; v2 is flexible; v3 may answer THROTTLING_QUOTA_EXCEEDED (never here).
"""

from ..schema import F, Message

REQUEST = Message("CreatePartitionsRequest", [
    F("topics", "[]", fields=[
        F("name", "string"),
        F("count", "int32"),
        F("assignments", "[]", nullable="0+", fields=[
            F("broker_ids", "[]int32"),
        ]),
    ]),
    F("timeout_ms", "int32"),
    F("validate_only", "bool"),
], valid="0-3", flexible="2+")

RESPONSE = Message("CreatePartitionsResponse", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", fields=[
        F("name", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ]),
], valid="0-3", flexible="2+")
