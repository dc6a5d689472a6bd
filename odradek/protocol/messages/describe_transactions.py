"""DescribeTransactions (key 65, KIP-664): the coordinator's view of transactional ids."""

from ..schema import F, Message

REQUEST = Message("DescribeTransactionsRequest", [
    F("transactional_ids", "[]string", "0+"),
], valid="0", flexible="0+")

RESPONSE = Message("DescribeTransactionsResponse", [
    F("throttle_time_ms", "int32", "0+"),
    F("transaction_states", "[]", "0+", fields=[
        F("error_code", "int16", "0+"),
        F("transactional_id", "string", "0+"),
        F("transaction_state", "string", "0+"),
        F("transaction_timeout_ms", "int32", "0+"),
        F("transaction_start_time_ms", "int64", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("topics", "[]", "0+", fields=[
            F("topic", "string", "0+"),
            F("partitions", "[]int32", "0+"),
        ]),
    ]),
], valid="0", flexible="0+")
