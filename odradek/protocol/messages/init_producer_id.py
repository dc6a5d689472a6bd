"""InitProducerId (key 22): idempotent producers (kafka-python's default) get an id here.

v5 only adds the TRANSACTION_ABORTABLE error code (KIP-890); v6 (KIP-939 two-phase commit) is
unstable in Kafka 4.2, which does not advertise it, and is not declared.
"""

from ..schema import F, Message

REQUEST = Message("InitProducerIdRequest", [
    F("transactional_id", "string", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
], valid="0-5", flexible="2+")

RESPONSE = Message("InitProducerIdResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
], valid="0-5", flexible="2+")
