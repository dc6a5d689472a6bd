"""What the transaction coordinator, the data plane and the group coordinator ask of each other.

Kafka's coordinator sends WriteTxnMarkers to each partition leader and the
leader verifies a transactional Produce against the coordinator
(``AddPartitionsToTxnManager``, verify-only).  On one node both are local
calls; these protocols are the seam, so each side is built and tested alone.
"""

from __future__ import annotations

from typing import Protocol

from ..protocol.errors import ErrorCode
from ..protocol.lean_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction end, as written in a control batch (Kafka's ``TxnMarkerEntry``)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool  # COMMIT (control type 1) or ABORT (0)
    # the transaction's version (WriteTxnMarkers v2's TransactionVersion): from 2 on the marker's epoch
    # is the bumped one and must be above the producer's (ProducerAppendInfo.checkProducerEpoch)
    transaction_version: int = 0


class MarkerTarget(Protocol):
    """Who writes a marker to a partition: the data plane for data topics, the group
    coordinator for ``__consumer_offsets`` (which also applies or drops the pending offsets).

    Resolves once the control batch is appended (and durable under fsync ``always``);
    answers NONE, or the per-partition error Kafka's ``WriteTxnMarkers`` would
    (UNKNOWN_TOPIC_OR_PARTITION for a deleted partition: the coordinator drops it).
    """

    async def write_txn_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode: ...


class TxnVerifier(Protocol):
    """The coordinator's answer to "is this partition in this producer's ongoing transaction?".

    NONE when it is; otherwise the coordinator's error (INVALID_PRODUCER_EPOCH,
    PRODUCER_FENCED, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING,
    CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR ...),
    which the caller maps to its request version's code.
    """

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> ErrorCode: ...
