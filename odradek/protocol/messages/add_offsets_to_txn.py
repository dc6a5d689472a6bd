"""AddOffsetsToTxn (key 25): a consumer group's offsets partition joins the transaction.

v3 is flexible; v4 only adds the TRANSACTION_ABORTABLE error (KIP-890).
"""

from ..schema import F, Message

REQUEST = Message("AddOffsetsToTxnRequest", [
    F("transactional_id", "string", "0+"),
    F("producer_id", "int64", "0+"),
    F("producer_epoch", "int16", "0+"),
    F("group_id", "string", "0+"),
], valid="0-4", flexible="3+")

RESPONSE = Message("AddOffsetsToTxnResponse", [
    F("throttle_time_ms", "int32", "0+"),
    F("error_code", "int16", "0+"),
], valid="0-4", flexible="3+")
