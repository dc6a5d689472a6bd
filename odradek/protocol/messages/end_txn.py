"""EndTxn (key 26): commit or abort the producer's transaction.

Served 0-4: the classic protocol.  v5 is the KIP-890 (transaction.version 2)
protocol that bumps the epoch on every end; the Java client uses it only when
the cluster finalizes that feature, which this broker never does.
"""

from ..schema import F, Message

REQUEST = Message("EndTxnRequest", [
    F("transactional_id", "string", "0+"),
    F("producer_id", "int64", "0+"),
    F("producer_epoch", "int16", "0+"),
    F("committed", "bool", "0+"),
], valid="0-4", flexible="3+")

RESPONSE = Message("EndTxnResponse", [
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
], valid="0-4", flexible="3+")
