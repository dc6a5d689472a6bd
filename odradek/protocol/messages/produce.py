"""Produce (key 0): producers append record batches to partitions.

``records`` stays opaque bytes here; storage validates and stamps batches.
v0-2 carry magic 0/1 message sets (up-converted on append, as Kafka 3.9);
v3 is the first version carrying RecordBatch v2 (Kafka 4.0 dropped 0-2).  v10 adds the
tagged leader hints of KIP-951 (filled only beside NOT_LEADER_OR_FOLLOWER), v11 may answer
TRANSACTION_ABORTABLE, v12 has v11's layout (in a transaction under transactions v2 it adds
the partition implicitly, KIP-890) and v13 names topics by id instead of name (KIP-516).
"""

from ..schema import F, Message

REQUEST = Message("ProduceRequest", [
    F("transactional_id", "string", "3+", nullable="3+", default=None),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F("topic_data", "[]", fields=[
        F("name", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partition_data", "[]", fields=[
            F("index", "int32"),
            F("records", "records", nullable="0+"),
        ]),
    ]),
], valid="0-13", flexible="9+")

RESPONSE = Message("ProduceResponse", [
    F("responses", "[]", fields=[
        F("name", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partition_responses", "[]", fields=[
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("record_errors", "[]", "8+", fields=[
                F("batch_index", "int32", "8+"),
                F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
            ]),
            F("error_message", "string", "8+", nullable="8+", default=None),
            F("current_leader", "struct", "10+", tag=0, fields=[
                F("leader_id", "int32", "10+", default=-1),
                F("leader_epoch", "int32", "10+", default=-1),
            ]),
        ]),
    ]),
    F("throttle_time_ms", "int32", "1+"),
    F("node_endpoints", "[]", "10+", tag=0, fields=[
        F("node_id", "int32", "10+"),
        F("host", "string", "10+"),
        F("port", "int32", "10+"),
        F("rack", "string", "10+", nullable="10+", default=None),
    ]),
], valid="0-13", flexible="9+")
