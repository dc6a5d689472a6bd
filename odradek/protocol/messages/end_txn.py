"""EndTxn (key 26): commit or abort the producer's transaction.

v3 is flexible, v4 only adds TRANSACTION_ABORTABLE.  v5 is transactions v2
(KIP-890): the coordinator bumps the epoch at every end and the answer carries
the producer id and epoch to continue with (a new producer id, epoch 0, once
the epoch is exhausted).
"""

from ..schema import F, Message

REQUEST = Message("EndTxnRequest", [
    F("transactional_id", "string", "0+"),
    F("producer_id", "int64", "0+"),
    F("producer_epoch", "int16", "0+"),
    F("committed", "bool", "0+"),
], valid="0-5", flexible="3+")

RESPONSE = Message("EndTxnResponse", [
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
    F("producer_id", "int64", "5+", default=-1),
    F("producer_epoch", "int16", "5+", default=-1),
], valid="0-5", flexible="3+")
