"""OffsetDelete (key 47): drop a group's committed offsets for chosen partitions (KIP-496).

One version, never flexible.
"""

from ..schema import F, Message

REQUEST = Message("OffsetDeleteRequest", [
    F("group_id", "string"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
        ]),
    ]),
], valid="0", flexible="none")

RESPONSE = Message("OffsetDeleteResponse", [
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
], valid="0", flexible="none")
