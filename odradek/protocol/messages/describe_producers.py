"""DescribeProducers (key 61, KIP-664): the active producers of partitions (admin
``describe_producers``, ``kafka-transactions.sh describe-producers``).  Flexible from v0."""

from ..schema import F, Message

REQUEST = Message("DescribeProducersRequest", [
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    ]),
], valid="0", flexible="0+")

RESPONSE = Message("DescribeProducersResponse", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("active_producers", "[]", fields=[
                F("producer_id", "int64"),
                F("producer_epoch", "int32"),
                F("last_sequence", "int32", default=-1),
                F("last_timestamp", "int64", default=-1),
                F("coordinator_epoch", "int32"),
                F("current_txn_start_offset", "int64", default=-1),
            ]),
        ]),
    ]),
], valid="0", flexible="0+")
