"""CreateTopics (key 19): admin clients and test fixtures create topics up front.

v0/v1 were removed in Kafka 4.0 but 3.9 still served them (kafka-python starts at 2).
"""

from ..schema import F, Message

REQUEST = Message("CreateTopicsRequest", [
    F("topics", "[]", fields=[
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F("assignments", "[]", fields=[
            F("partition_index", "int32"),
            F("broker_ids", "[]int32"),
        ]),
        F("configs", "[]", fields=[
            F("name", "string"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+"),
], valid="0-7", flexible="5+")

RESPONSE = Message("CreateTopicsResponse", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("topic_id", "uuid", "7+"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", nullable="0+"),
        F("topic_config_error_code", "int16", "5+", tag=0),
        F("num_partitions", "int32", "5+", default=-1),
        F("replication_factor", "int16", "5+", default=-1),
        F("configs", "[]", "5+", nullable="5+", fields=[
            F("name", "string", "5+"),
            F("value", "string", "5+", nullable="5+"),
            F("read_only", "bool", "5+"),
            F("config_source", "int8", "5+", default=-1),
            F("is_sensitive", "bool", "5+"),
        ]),
    ]),
], valid="0-7", flexible="5+")
