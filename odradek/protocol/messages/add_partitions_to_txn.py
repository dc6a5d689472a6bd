"""AddPartitionsToTxn (key 24): a producer adds partitions to its ongoing transaction.

We serve the client versions 0-3 (flexible from v3).  v4+ (KIP-890) are sent
by one broker to another to verify or add a batch of transactions; a single
node verifies locally, and Kafka's clients never send them.
"""

from ..schema import F, Message

REQUEST = Message("AddPartitionsToTxnRequest", [
    F("v3_and_below_transactional_id", "string", "0-3"),
    F("v3_and_below_producer_id", "int64", "0-3"),
    F("v3_and_below_producer_epoch", "int16", "0-3"),
    F("v3_and_below_topics", "[]", "0-3", fields=[
        F("name", "string", "0+"),
        F("partitions", "[]int32", "0+"),
    ]),
], valid="0-3", flexible="3+")

RESPONSE = Message("AddPartitionsToTxnResponse", [
    F("throttle_time_ms", "int32", "0+"),
    F("results_by_topic_v3_and_below", "[]", "0-3", fields=[
        F("name", "string", "0+"),
        F("results_by_partition", "[]", "0+", fields=[
            F("partition_index", "int32", "0+"),
            F("partition_error_code", "int16", "0+"),
        ]),
    ]),
], valid="0-3", flexible="3+")
