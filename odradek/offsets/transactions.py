"""Transactional offset commits in ``__consumer_offsets``: pending until their producer's marker.

Kafka's ``OffsetMetadataManager`` (the group coordinator of Kafka 3.6+ and
the only one of 4.x) is the model; its ``replay`` and
``replayEndTransactionMarker`` are the rules, which one function applies both
when a shard loads and on the live path:

- An offset commit in a **transactional batch** (``TxnOffsetCommit``) is not
  committed: it is *pending* under its producer id until a marker of that
  producer reaches the partition.
- A **COMMIT** marker makes each of the producer's pending offsets the
  committed one, unless the committed offset of that partition was written
  *later* in the log (a plain OffsetCommit after the transactional one wins);
  an **ABORT** marker drops them.  A marker with nothing pending changes
  nothing but the producer's epochs.
- A **tombstone** for a partition (OffsetDelete, DeleteGroups, expiry, a
  deleted topic) removes the committed offset *and* every pending one of
  that partition, whatever the producer, so the commit marker cannot bring a
  deleted offset back.  (Kafka's older coordinator kept the pending entries
  at load time only, so its live state and its reload disagreed there.)

"Later in the log" is decided by the order records are replayed in, which is
log order on both paths (the runtime replays writes in the order it appends
them), so no log offset needs to be known when a write is replayed.

The same state keeps, per producer id, the epoch and coordinator epoch the
partition has seen (Kafka's ``ProducerStateEntry``): a TxnOffsetCommit or a
marker carrying an older producer epoch is refused (INVALID_PRODUCER_EPOCH),
a marker with an older coordinator epoch too (TRANSACTION_COORDINATOR_FENCED).

Records, as the coordinator replays them: ``(TxnOffsetKey, OffsetValue | None)``
for an offset commit of a transactional batch, ``(MarkerKey, coordinator
epoch)`` for a COMMIT/ABORT control record.  ``decode_record`` turns a log
record into one of those (or a plain ``(OffsetKey|GroupKey, value)``), and
``encode_txn_records`` turns them back into record bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from ..protocol.errors import ErrorCode
from ..protocol.records import (
    ControlRecordType,
    CorruptRecordError,
    encode_control_key,
    encode_end_txn_marker,
    parse_control_key,
    parse_end_txn_marker,
)
from .consumer_records import decode_cg_record
from .records import (
    GroupKey,
    OffsetKey,
    RecordDecodeError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from .share_group_records import decode_sg_record

__all__ = ["TxnOffsetKey", "MarkerKey", "TxnOffsets", "decode_record", "encode_txn_records"]


class TxnOffsetKey(NamedTuple):
    """An offset commit record written in a transactional batch of ``producer_id``."""

    producer_id: int
    producer_epoch: int
    key: OffsetKey


class MarkerKey(NamedTuple):
    """A transaction marker (control record) of ``producer_id``; its value is the coordinator epoch."""

    producer_id: int
    producer_epoch: int
    commit: bool


TopicPartition = tuple[str, int]


def decode_record(header: Any, record: Any) -> tuple[Any, Any] | None:
    """A log record as the coordinator replays it; None for a record that is not ours.

    Raises ``RecordDecodeError`` for a record it cannot read (a bad marker
    included): a load must stop rather than lose state.
    """
    if header.is_control:
        if not header.is_transactional:
            return None
        try:
            control = parse_control_key(record.key)
            if control.type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                return None
            epoch = parse_end_txn_marker(record.value).coordinator_epoch
        except CorruptRecordError as exc:
            raise RecordDecodeError(str(exc)) from None
        return (MarkerKey(header.producer_id, header.producer_epoch,
                          control.type == ControlRecordType.COMMIT), epoch)
    key = decode_key(record.key)
    if key is None:  # KIP-848 consumer-group and KIP-932 share-group records; streams key types are not ours
        found = decode_cg_record(record.key, record.value)
        return found if found is not None else decode_sg_record(record.key, record.value)
    value = decode_value(key, record.value)
    if header.is_transactional and type(key) is OffsetKey:
        return TxnOffsetKey(header.producer_id, header.producer_epoch, key), value
    return key, value


def encode_txn_records(records: list[tuple[Any, Any]], value_version=None) -> list[tuple[bytes | None, bytes | None]]:
    """Record bytes of a transactional write: offset commits, or one marker.

    ``value_version(value)``: the OffsetCommitValue version to write (an
    emulated release's), else the current one.
    """
    pairs = []
    for key, value in records:
        if type(key) is MarkerKey:
            control = ControlRecordType.COMMIT if key.commit else ControlRecordType.ABORT
            pairs.append((encode_control_key(control), encode_end_txn_marker(value)))
        else:
            version = None if value_version is None or value is None else value_version(value)
            pairs.append((encode_key(key.key), encode_value(value, version)))
    return pairs


class TxnOffsets:
    """Pending transactional offsets and producer epochs of one offsets partition.

    ``pending[producer][key] = (value, position, extra)``; ``groups[group]``
    the producers with something pending for the group (Kafka's
    ``openTransactionsByGroup``); ``producers[pid] = (epoch, coordinator
    epoch)``.  ``extra`` is whatever the caller wants back when the offset
    is committed (the loader's raw record).
    """

    __slots__ = ("pending", "groups", "producers", "_written", "_position", "dropped")

    def __init__(self) -> None:
        self.pending: dict[int, dict[OffsetKey, tuple[Any, int, Any]]] = {}
        self.groups: dict[str, set[int]] = {}
        self.producers: dict[int, tuple[int, int]] = {}
        # position of the last plain value replayed for a key that has something pending
        self._written: dict[OffsetKey, int] = {}
        self._position = 0
        self.dropped = 0  # pending offsets dropped by ABORT (or ``drop_all``)

    # --- replay -----------------------------------------------------------------------------

    def plain(self, key: OffsetKey, value: Any) -> None:
        """A committed value or tombstone for ``key`` is being replayed (call only if ``key.group in groups``)."""
        producers = self.groups.get(key.group)
        if producers is None:
            return
        if value is None:
            for pid in list(producers):
                entries = self.pending[pid]
                if entries.pop(key, None) is not None:
                    self._forget_if_done(pid, key.group)
            self._written.pop(key, None)
            return
        for pid in producers:
            if key in self.pending[pid]:
                self._position += 1
                self._written[key] = self._position
                return

    def park(self, producer_id: int, producer_epoch: int, key: OffsetKey, value: Any, extra: Any = None) -> None:
        """An offset commit of a transactional batch: pending until the producer's marker."""
        self._seen(producer_id, producer_epoch, None)
        self._position += 1
        self.pending.setdefault(producer_id, {})[key] = (value, self._position, extra)
        self.groups.setdefault(key.group, set()).add(producer_id)

    def end(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
            ) -> list[tuple[OffsetKey, Any, Any]]:
        """A marker: the (key, value, extra) to commit now, in no particular order (none on ABORT)."""
        self._seen(producer_id, producer_epoch, coordinator_epoch)
        entries = self.pending.pop(producer_id, None)
        if not entries:
            return []
        for key in entries:
            self._forget_group(producer_id, key.group)
        if not commit:
            self.dropped += len(entries)
            self._prune_written(entries)
            return []
        out = []
        for key, (value, position, extra) in entries.items():
            written = self._written.get(key)
            if written is None or written < position:
                out.append((key, value, extra))
                # the committed value now dates from ``position``: what other producers' COMMIT compare with
                self._written[key] = position
        self._prune_written(entries)
        return out

    def drop_all(self) -> None:
        """Forget every pending offset (an offline reader at the end of a log prefix)."""
        self.dropped += sum(len(e) for e in self.pending.values())
        self.pending.clear()
        self.groups.clear()
        self._written.clear()

    # --- questions ----------------------------------------------------------------------------

    def has_pending(self, group: str, tp: TopicPartition) -> bool:
        producers = self.groups.get(group)
        if not producers:
            return False
        key = OffsetKey(group, tp[0], tp[1])
        return any(key in self.pending[pid] for pid in producers)

    def pending_partitions(self, group: str) -> set[TopicPartition]:
        """Partitions of ``group`` with a pending transactional offset."""
        out: set[TopicPartition] = set()
        for pid in self.groups.get(group, ()):
            out.update((k.topic, k.partition) for k in self.pending[pid] if k.group == group)
        return out

    def pending_keys(self) -> Iterator[OffsetKey]:
        for entries in self.pending.values():
            yield from entries

    def has_producer_pending(self, producer_id: int) -> bool:
        return producer_id in self.pending

    def check_epoch(self, producer_id: int, producer_epoch: int) -> ErrorCode:
        """A transactional write of this producer: refused if the partition saw a newer epoch."""
        seen = self.producers.get(producer_id)
        if seen is not None and producer_epoch < seen[0]:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        return ErrorCode.NONE

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> ErrorCode:
        """Kafka's ``ProducerAppendInfo.appendEndTxnMarker`` checks: producer epoch, then coordinator epoch.
        A transactions-v2 marker's epoch (the bumped one) must be above the producer's, or equal to
        it with nothing pending (a retried marker)."""
        seen = self.producers.get(producer_id)
        if seen is None:
            return ErrorCode.NONE
        if producer_epoch < seen[0] or (transaction_version >= 2 and producer_epoch == seen[0]
                                        and self.pending.get(producer_id)):
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < seen[1]:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def state(self) -> tuple[dict, dict]:
        """(pending values per producer and key, producer epochs): what a reload must reproduce."""
        return ({pid: {k: v for k, (v, _p, _x) in e.items()} for pid, e in self.pending.items() if e},
                dict(self.producers))

    # --- internals -------------------------------------------------------------------------------

    def _seen(self, producer_id: int, producer_epoch: int, coordinator_epoch: int | None) -> None:
        epoch, coord = self.producers.get(producer_id, (-1, -1))
        if producer_epoch > epoch:
            epoch = producer_epoch
        if coordinator_epoch is not None and coordinator_epoch > coord:
            coord = coordinator_epoch
        self.producers[producer_id] = (epoch, coord)

    def _forget_if_done(self, producer_id: int, group: str) -> None:
        entries = self.pending[producer_id]
        if not any(k.group == group for k in entries):
            self._forget_group(producer_id, group)
        if not entries:
            del self.pending[producer_id]

    def _forget_group(self, producer_id: int, group: str) -> None:
        producers = self.groups.get(group)
        if producers is not None:
            producers.discard(producer_id)
            if not producers:
                del self.groups[group]

    def _prune_written(self, entries: dict[OffsetKey, Any]) -> None:
        """Notes of keys nothing is pending for any more are no longer needed."""
        if not self._written:
            return
        for key in entries:
            if key in self._written and not self.has_pending(key.group, (key.topic, key.partition)):
                del self._written[key]


def is_ours(key: Any) -> bool:
    """Whether ``key`` is a record type the group coordinator replays."""
    return type(key) in (OffsetKey, GroupKey, TxnOffsetKey, MarkerKey)
