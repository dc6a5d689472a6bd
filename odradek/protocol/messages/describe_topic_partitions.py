"""DescribeTopicPartitions (key 75, KIP-966): newer admin clients describe topics with it.

Only v0, flexible; the answer is paged by a partition limit and a cursor.
"""

from ..schema import F, Message


def _cursor(name: str) -> F:
    return F(name, "struct", nullable="0+", default=None, fields=[
        F("topic_name", "string"),
        F("partition_index", "int32"),
    ])


REQUEST = Message("DescribeTopicPartitionsRequest", [
    F("topics", "[]", fields=[
        F("name", "string"),
    ]),
    F("response_partition_limit", "int32", default=2000),
    _cursor("cursor"),
], valid="0", flexible="0+")

RESPONSE = Message("DescribeTopicPartitionsResponse", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]", fields=[
        F("error_code", "int16"),
        F("name", "string", nullable="0+"),
        F("topic_id", "uuid"),
        F("is_internal", "bool"),
        F("partitions", "[]", fields=[
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("eligible_leader_replicas", "[]int32", nullable="0+", default=None),
            F("last_known_elr", "[]int32", nullable="0+", default=None),
            F("offline_replicas", "[]int32"),
        ]),
        F("topic_authorized_operations", "int32", default=-2147483648),
    ]),
    _cursor("next_cursor"),
], valid="0", flexible="0+")
