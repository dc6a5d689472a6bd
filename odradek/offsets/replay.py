"""Rebuilding committed offsets from ``__consumer_offsets`` records, transactions included.

The rules for transactional offset commits are ``transactions.TxnOffsets``
(Kafka's ``OffsetMetadataManager.replay`` / ``replayEndTransactionMarker``):
a transactional commit is pending under its producer id until that
producer's marker; COMMIT applies it unless the partition's committed value
was written later, ABORT drops it; a tombstone removes the committed value
and every pending one of that partition.

``OffsetsReplay`` is the reader for offline users of a log (``odradek
offsets``, ``odradek import``): it feeds ``apply(key, value, record)`` the
records as they take effect.  A transaction still open at the end of what
was read has committed nothing there: ``finish`` drops it.  The broker's
shard applies the same rules through its own ``replay`` (``Shard.replay``),
where pending offsets stay pending until the transaction coordinator's
marker arrives.

The pipeline's report (``pipeline/reports.py``) applies the rule as "the
highest offset wins", which gives the same committed offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.records import Record
from .records import GroupKey, OffsetKey
from .transactions import MarkerKey, TxnOffsetKey, TxnOffsets, decode_record

Apply = Callable[[OffsetKey | GroupKey, Any, Record], None]  # key, decoded value, the record


class OffsetsReplay:
    """Feeds records, in log order, to ``apply(key, value, record)`` as they take effect at load time.

    Applied in that order, the records rebuild the same state: ``odradek
    import`` writes exactly them, as plain records, in that order.
    """

    def __init__(self, apply: Apply):
        self._apply = apply
        self.txn = TxnOffsets()

    @property
    def dropped(self) -> int:
        """Pending commits dropped by ABORT or by ``finish``."""
        return self.txn.dropped

    def feed(self, header: Any, record: Record) -> bool:
        """Take one record of a batch; True if it is a data record this coordinator owns.

        Raises ``RecordDecodeError`` for a record it cannot read, a bad
        transaction marker included.
        """
        decoded = decode_record(header, record)
        if decoded is None:
            return False
        key, value = decoded
        kind = type(key)
        txn = self.txn
        if kind is MarkerKey:
            for offset_key, committed, parked in txn.end(key.producer_id, key.producer_epoch, key.commit, value):
                self._apply(offset_key, committed, parked)
            return False
        if kind is TxnOffsetKey:
            if value is not None:
                txn.park(key.producer_id, key.producer_epoch, key.key, value, record)
                return True
            key = key.key  # a transactional tombstone removes like any other
        if (kind is OffsetKey or kind is TxnOffsetKey) and txn.groups:
            txn.plain(key, value)
        self._apply(key, value, record)
        return True

    def finish(self) -> None:
        """The log ended: transactions still open have committed nothing (see the module notes)."""
        self.txn.drop_all()
