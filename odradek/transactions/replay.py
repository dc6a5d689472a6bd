"""Replay: the one function that turns ``__transaction_state`` records into state.

The coordinator's live path and its load path both call :func:`replay`, so a
reload reproduces what was live (``TxnMetadata.persisted()`` is what must
agree).  For each transactional id the last record wins; a tombstone removes
the id (Kafka's ``TransactionStateManager.loadTransactionMetadata``).

``TxnMetadata`` also carries what Kafka keeps only in memory: the pending
state (the target of a write in flight: any request that would change state
meanwhile gets CONCURRENT_TRANSACTIONS), the last epoch (to recognise a
retried InitProducerId whose answer was lost) and the previous producer id
(after an epoch overflow).  Replay clears the pending state -- the write it
stood for is done -- and leaves the other two alone: a reload forgets them,
as Kafka's does.
"""

from __future__ import annotations

from dataclasses import field

from ..protocol.lean_dataclass import dataclass
from .records import TopicPartition, TxnKey, TxnValue
from .state import TxnState

NO_PRODUCER_ID = -1
NO_EPOCH = -1


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH
    timeout_ms: int = 0
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    client_tv: int = 0  # transaction version of the client's last change (Kafka's clientTransactionVersion)
    # memory only
    pending_state: TxnState | None = None
    last_epoch: int = NO_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID  # TV2: the id an end that exhausted the epoch continues with

    def apply(self, value: TxnValue) -> None:
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.timeout_ms = value.timeout_ms
        self.state = value.state
        self.partitions = set(value.partitions or ())
        self.last_update_ms = value.last_update_ms
        self.start_ms = value.start_ms
        self.client_tv = value.client_tv
        self.pending_state = None

    def persisted(self) -> TxnValue:
        """The record that describes this state (what a reload must rebuild)."""
        return TxnValue(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                        timeout_ms=self.timeout_ms, state=self.state,
                        partitions=None if self.state is TxnState.EMPTY else tuple(sorted(self.partitions)),
                        last_update_ms=self.last_update_ms, start_ms=self.start_ms, client_tv=self.client_tv)

    def value(self, *, state: TxnState, producer_id: int | None = None, producer_epoch: int | None = None,
              timeout_ms: int | None = None, partitions: set[TopicPartition] | None = None,
              now: int, start_ms: int | None = None, client_tv: int | None = None) -> TxnValue:
        """The record of a transition from this state (unchanged fields carried over)."""
        parts = self.partitions if partitions is None else partitions
        return TxnValue(
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=None if state is TxnState.EMPTY else tuple(sorted(parts)),
            last_update_ms=now,
            start_ms=self.start_ms if start_ms is None else start_ms,
            client_tv=self.client_tv if client_tv is None else client_tv)


def replay(txns: dict[str, TxnMetadata], key: TxnKey | None, value: TxnValue | None) -> None:
    """Apply one record to ``txns`` (at load time, and live once its write is durable)."""
    if key is None:  # a key version we do not know: skipped, as Kafka does
        return
    tid = key.transactional_id
    if value is None:
        txns.pop(tid, None)
        return
    meta = txns.get(tid)
    if meta is None:
        meta = txns[tid] = TxnMetadata(tid)
    meta.apply(value)
