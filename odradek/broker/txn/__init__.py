"""The transaction coordinator: ``__transaction_state`` shards on the coordinator runtime."""

from .config import TxnConfig
from .coordinator import TransactionCoordinator

__all__ = ["TxnConfig", "TransactionCoordinator"]
