"""DescribeLogDirs (key 35): the log directories and each partition's size in them.

v2 is flexible; v3 adds a top-level error code; v4 the volume's total and
usable bytes.  (Kafka 4.1's v5 adds ``is_cordoned``; not declared here.)
"""

from ..schema import F, Message

REQUEST = Message("DescribeLogDirsRequest", [
    F("topics", "[]", nullable="0+", fields=[
        F("topic", "string"),
        F("partitions", "[]int32"),
    ]),
], valid="0-4", flexible="2+")

RESPONSE = Message("DescribeLogDirsResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "3+"),
    F("results", "[]", fields=[
        F("error_code", "int16"),
        F("log_dir", "string"),
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=[
                F("partition_index", "int32"),
                F("partition_size", "int64"),
                F("offset_lag", "int64"),
                F("is_future_key", "bool"),
            ]),
        ]),
        F("total_bytes", "int64", "4+", default=-1),
        F("usable_bytes", "int64", "4+", default=-1),
    ]),
], valid="0-4", flexible="2+")
