"""ListTransactions (key 66, KIP-664): transactional ids, filtered by state, producer id and
(v1, KIP-994) how long their transaction has been open, and (v2, KIP-1152) a regular expression
the whole transactional id must match."""

from ..schema import F, Message

REQUEST = Message("ListTransactionsRequest", [
    F("state_filters", "[]string", "0+"),
    F("producer_id_filters", "[]int64", "0+"),
    F("duration_filter", "int64", "1+", default=-1),
    F("transactional_id_pattern", "string", "2+", nullable="2+", default=None),
], valid="0-2", flexible="0+")

RESPONSE = Message("ListTransactionsResponse", [
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("unknown_state_filters", "[]string", "0+"),
    F("transaction_states", "[]", "0+", fields=[
        F("transactional_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("transaction_state", "string", "0+"),
    ]),
], valid="0-2", flexible="0+")
