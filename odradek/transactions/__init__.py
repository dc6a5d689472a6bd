"""The transaction-state domain: ``__transaction_state`` records, states and replay (sans-I/O).

Below the broker, beside ``odradek/offsets/``: the bytes are Kafka's
(``TransactionLog``), the states and their allowed transitions are Kafka's
(``TransactionState`` / ``TransactionMetadata``), and replay is the one
function that turns records into the coordinator's persisted state.
"""

from .records import TxnKey, TxnValue, decode_key, decode_value, encode_key, encode_value
from .replay import TxnMetadata, replay
from .state import TxnState

__all__ = ["TxnKey", "TxnValue", "TxnState", "TxnMetadata", "replay",
           "encode_key", "encode_value", "decode_key", "decode_value"]
