"""DescribeShareGroupOffsets (key 90, KIP-932): each share-partition's start offset (and, v1,
KIP-1226, its lag), read from the share coordinator's summary.  Topics null: every
initialized share-partition of the group."""

from ..schema import F, Message

REQUEST = Message("DescribeShareGroupOffsetsRequest", [
    F("groups", "[]", fields=[
        F("group_id", "string"),
        F("topics", "[]", nullable="0+", fields=[
            F("topic_name", "string"),
            F("partitions", "[]int32"),
        ]),
    ]),
], valid="0-1", flexible="0+")

RESPONSE = Message("DescribeShareGroupOffsetsResponse", [
    F("throttle_time_ms", "int32"),
    F("groups", "[]", fields=[
        F("group_id", "string"),
        F("topics", "[]", fields=[
            F("topic_name", "string"),
            F("topic_id", "uuid"),
            F("partitions", "[]", fields=[
                F("partition_index", "int32"),
                F("start_offset", "int64"),
                F("leader_epoch", "int32"),
                F("lag", "int64", "1+", default=-1),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ]),
        ]),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ]),
], valid="0-1", flexible="0+")
