"""ListOffsets (key 2): earliest (-2), latest (-1), max-timestamp (-3) or by-time offsets.

v0's multi-offset form is still sent by sarama-based tools (Burrow); v7
(max timestamp) is what kafka-python's version probe looks for.  v8-v11 add no fields but
timestamps for tiered storage: -4 earliest local (v8), -5 latest tiered (v9), -6 earliest pending
upload (v11); v10 adds ``timeout_ms`` for lookups in remote storage.
"""

from ..schema import F, Message

REQUEST = Message("ListOffsetsRequest", [
    F("replica_id", "int32"),
    F("isolation_level", "int8", "2+"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64"),
            F("max_num_offsets", "int32", "0", default=1),
        ]),
    ]),
    F("timeout_ms", "int32", "10+"),
], valid="0-11", flexible="6+")

RESPONSE = Message("ListOffsetsResponse", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("old_style_offsets", "[]int64", "0"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        ]),
    ]),
], valid="0-11", flexible="6+")
