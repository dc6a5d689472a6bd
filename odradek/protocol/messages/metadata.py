"""Metadata (key 3): brokers, controller, cluster id and topic/partition leaders.

From v1 on ``topics=None`` means "all topics" and ``[]`` means none, which
is the distinction every client relies on; v0 (not nullable) reads ``[]`` as all.  The authorized-
operations fields default to Kafka's "not requested" value -2147483648.
"""

from ..schema import F, Message

REQUEST = Message("MetadataRequest", [
    F("topics", "[]", nullable="1+", fields=[
        F("topic_id", "uuid", "10+"),
        F("name", "string", nullable="10+"),
    ]),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
], valid="0-13", flexible="9+")

RESPONSE = Message("MetadataResponse", [
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", "[]", fields=[
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", nullable="1+", default=None),
    ]),
    F("cluster_id", "string", "2+", nullable="2+", default=None),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", "[]", fields=[
        F("error_code", "int16"),
        F("name", "string", nullable="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+"),
        F("partitions", "[]", fields=[
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("offline_replicas", "[]int32", "5+"),
        ]),
        F("topic_authorized_operations", "int32", "8+", default=-2147483648),
    ]),
    F("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    F("error_code", "int16", "13+"),
], valid="0-13", flexible="9+")
