"""AddPartitionsToTxn (key 24): partitions join a producer's ongoing transaction.

v0-3 come from clients (flexible from v3).  v4+ (KIP-890) are what one Kafka
broker sends another: a batch of transactions, each either verified
(``verify_only``: is the partition already in it?) or added to; the answer
is per transaction.  v5 only adds TRANSACTION_ABORTABLE.  Kafka answers them
to anyone with CLUSTER_ACTION on the cluster.
"""

from ..schema import F, Message

_TOPIC = [
    F("name", "string", "0+"),
    F("partitions", "[]int32", "0+"),
]
_TOPIC_RESULT = [
    F("name", "string", "0+"),
    F("results_by_partition", "[]", "0+", fields=[
        F("partition_index", "int32", "0+"),
        F("partition_error_code", "int16", "0+"),
    ]),
]

REQUEST = Message("AddPartitionsToTxnRequest", [
    F("transactions", "[]", "4+", fields=[
        F("transactional_id", "string", "4+"),
        F("producer_id", "int64", "4+"),
        F("producer_epoch", "int16", "4+"),
        F("verify_only", "bool", "4+", default=False),
        F("topics", "[]", "4+", fields=_TOPIC),
    ]),
    F("v3_and_below_transactional_id", "string", "0-3"),
    F("v3_and_below_producer_id", "int64", "0-3"),
    F("v3_and_below_producer_epoch", "int16", "0-3"),
    F("v3_and_below_topics", "[]", "0-3", fields=_TOPIC),
], valid="0-5", flexible="3+")

RESPONSE = Message("AddPartitionsToTxnResponse", [
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "4+"),
    F("results_by_transaction", "[]", "4+", fields=[
        F("transactional_id", "string", "4+"),
        F("topic_results", "[]", "4+", fields=_TOPIC_RESULT),
    ]),
    F("results_by_topic_v3_and_below", "[]", "0-3", fields=_TOPIC_RESULT),
], valid="0-5", flexible="3+")
