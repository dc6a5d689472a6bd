"""OffsetFetch (key 9): read committed offsets back, for one group or (v8+) several.

v0-v7 name one group and its topics (null topics = all, v2+); v8 batches
groups, each with its own topic list, and moves errors per group.  v9 adds
the KIP-848 member id/epoch, v10 names topics by id instead of name.  Flexible from v6.
"""

from ..schema import F, Message

REQUEST = Message("OffsetFetchRequest", [
    F("group_id", "string", "0-7"),
    F("topics", "[]", "0-7", nullable="2-7", fields=[
        F("name", "string", "0-7"),
        F("partition_indexes", "[]int32", "0-7"),
    ]),
    F("groups", "[]", "8+", fields=[
        F("group_id", "string", "8+"),
        F("member_id", "string", "9+", nullable="9+", default=None),
        F("member_epoch", "int32", "9+", default=-1),
        F("topics", "[]", "8+", nullable="8+", fields=[
            F("name", "string", "8-9"),
            F("topic_id", "uuid", "10+"),
            F("partition_indexes", "[]int32", "8+"),
        ]),
    ]),
    F("require_stable", "bool", "7+", default=False),
], valid="0-10", flexible="6+")

RESPONSE = Message("OffsetFetchResponse", [
    F("throttle_time_ms", "int32", "3+"),
    F("topics", "[]", "0-7", fields=[
        F("name", "string", "0-7"),
        F("partitions", "[]", "0-7", fields=[
            F("partition_index", "int32", "0-7"),
            F("committed_offset", "int64", "0-7"),
            F("committed_leader_epoch", "int32", "5-7", default=-1),
            F("metadata", "string", "0-7", nullable="0-7"),
            F("error_code", "int16", "0-7"),
        ]),
    ]),
    F("error_code", "int16", "2-7", default=0),
    F("groups", "[]", "8+", fields=[
        F("group_id", "string", "8+"),
        F("topics", "[]", "8+", fields=[
            F("name", "string", "8-9"),
            F("topic_id", "uuid", "10+"),
            F("partitions", "[]", "8+", fields=[
                F("partition_index", "int32", "8+"),
                F("committed_offset", "int64", "8+"),
                F("committed_leader_epoch", "int32", "8+", default=-1),
                F("metadata", "string", "8+", nullable="8+"),
                F("error_code", "int16", "8+"),
            ]),
        ]),
        F("error_code", "int16", "8+", default=0),
    ]),
], valid="0-10", flexible="6+")
