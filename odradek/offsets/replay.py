"""Rebuilding coordinator state from ``__consumer_offsets`` records, transactions included.

As Kafka's ``GroupMetadataManager.loadGroupsAndOffsets`` does: a transactional offset commit (a Kafka producer's
``sendOffsetsToTransaction``, in a log imported from Kafka) is not committed
when it is read but parked under its producer id until that producer's next
marker: COMMIT applies it, replacing the current value only if its batch is
later than the one that set that value (or there is none); ABORT drops it.
A transactional tombstone only removes the producer's own parked entry.

This broker writes no transactional batches itself, so a transaction with no
marker by the end of the log will never get one: ``finish`` drops it, as
Kafka's transaction coordinator would abort it once it timed out.

Why one module: the broker's load (``Shard.load``) and the offline view
(``odradek offsets``) must agree record for record.  The pipeline's report
(``pipeline/reports.py``) applies the same rule as "the highest offset wins",
which differs in one case Kafka itself never writes: a plain tombstone for the
partition between a transactional commit and its COMMIT marker (Kafka puts the
transactional value back; the report keeps it deleted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.records import ControlRecordType, CorruptRecordError, Record, parse_control_key
from .records import GroupKey, OffsetKey, RecordDecodeError, decode_key, decode_value

Apply = Callable[[OffsetKey | GroupKey, Any, Record], None]  # key, decoded value, the record


class OffsetsReplay:
    """Feeds records, in log order, to ``apply(key, value, record)`` as they take effect at load time.

    Applied in that order, the records rebuild the same state: ``odradek
    import`` writes exactly them, as plain records, in that order.
    """

    def __init__(self, apply: Apply):
        self._apply = apply
        # producer id -> key -> (value, batch offset, record): transactional commits awaiting a marker
        self._parked: dict[int, dict[OffsetKey, tuple[Any, int, Record]]] = {}
        # batch offset of the value applied to a parked key after it was parked (None: none since,
        # or a tombstone removed it); only kept while something is parked
        self._applied_at: dict[OffsetKey, int] = {}
        self.dropped = 0  # parked commits dropped by ABORT or by ``finish``

    def feed(self, header: Any, record: Record) -> bool:
        """Take one record of a batch; True if it is a data record this coordinator owns.

        Raises ``RecordDecodeError`` for a record it cannot read, a bad
        transaction marker included.
        """
        if header.is_control:
            if header.is_transactional:
                self._marker(header.producer_id, record)
            return False
        key = decode_key(record.key)
        if key is None:
            return False  # KIP-848/share-group key types: not ours
        value = decode_value(key, record.value)
        if header.is_transactional and type(key) is OffsetKey:
            parked = self._parked.setdefault(header.producer_id, {})
            if value is None:
                parked.pop(key, None)
            else:
                parked[key] = (value, header.base_offset, record)
            return True
        if self._parked and type(key) is OffsetKey:
            self._note(key, value, header.base_offset)
        self._apply(key, value, record)
        return True

    def finish(self) -> None:
        """The log ended: transactions still open will never end here (see the module notes)."""
        self.dropped += sum(len(p) for p in self._parked.values())
        self._parked.clear()
        self._applied_at.clear()

    def _marker(self, producer_id: int, record: Record) -> None:
        parked = self._parked.pop(producer_id, None)
        if parked is None:
            return
        try:
            committed = parse_control_key(record.key).type == ControlRecordType.COMMIT
        except CorruptRecordError as exc:
            raise RecordDecodeError(str(exc)) from None
        if not committed:
            self.dropped += len(parked)
        else:
            for key, (value, offset, parked_record) in parked.items():
                later = self._applied_at.get(key)
                if later is None or later < offset:
                    if self._parked:
                        self._note(key, value, offset)
                    self._apply(key, value, parked_record)
        if not self._parked:
            self._applied_at.clear()

    def _note(self, key: OffsetKey, value: Any, offset: int) -> None:
        """Remember what a parked key got since it was parked (what a later COMMIT compares with)."""
        if any(key in parked for parked in self._parked.values()):
            if value is None:
                self._applied_at.pop(key, None)  # removed: a COMMIT puts its value back, as Kafka does
            else:
                self._applied_at[key] = offset
