"""Idempotent producers: producer ids that never repeat, and per-partition sequence checks.

Ids come in blocks, as Kafka's controller hands them out: before the first
id of a block is given away, the block's end is written durably to
``producer-ids`` in the data dir, so a restarted broker starts after every id
it may ever have issued (a crash only costs the unused rest of a block).

Per partition, each producer id keeps its epoch and the metadata of its last
five batches (Kafka's ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``, the
client's max.in.flight): a retried batch that matches one of them is
acknowledged with its original offsets and not appended again.  Checks follow
Kafka's ``ProducerAppendInfo``: an older epoch is INVALID_PRODUCER_EPOCH; a
new epoch must start at sequence 0; otherwise the next sequence must follow
the last one (wrapping at 2^31-1) or OUT_OF_ORDER_SEQUENCE_NUMBER.  A producer
the partition has no state for (new, or its batches were removed) may start
at any sequence, as in Kafka since 2.5 (KIP-360), which no longer answers
UNKNOWN_PRODUCER_ID on Produce.

Transactions (Kafka's ``ProducerStateManager``): each producer's *current
txn first offset* (its first transactional batch since its last marker), the
partition's open transactions ordered by that offset (the oldest one bounds
the last stable offset), and the aborted transactions (the ``.txnindex``
entries, also kept in memory for Fetch).  A marker (``complete``) checks the
epoch and coordinator epoch, closes the producer's open transaction and, for
an ABORT, yields the index entry.

Snapshots (Kafka's ``<offset>.snapshot`` files, ``storage/producer_snapshot.py``)
are written when a produce or a marker rolls a segment, after a rebuild, and
at shutdown.  The first time a partition is touched after a start (a produce,
a fetch, a marker, the cleaner) its state is loaded from the newest snapshot
at or below the log end and the batches after it are replayed (headers only,
plus the one record of each marker), in a worker thread; without a snapshot
the whole log is replayed, never just a tail: an open transaction may be
older than any fixed window, and it holds the last stable offset until its
marker.  The replay rewrites the ``.txnindex`` of the segments it covers;
older segments' indexes are read as they are.
"""

from __future__ import annotations

import asyncio
import bisect
import os
from collections import OrderedDict, deque
from dataclasses import field
from pathlib import Path

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ...protocol.records import (
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    decode_batch,
    parse_control_key,
    parse_end_txn_marker,
)
from ...storage import producer_snapshot, txn_index
from ...storage.files import fsync_dir
from ...storage.log import Log
from ...storage.producer_snapshot import SnapshotEntry
from ...storage.txn_index import AbortedTxn

logger = structlog.get_logger("odradek.producers")

BATCHES_TO_RETAIN = 5
ID_BLOCK_SIZE = 1000
ID_FILE = "producer-ids"
MAX_PRODUCERS_PER_PARTITION = 10_000  # least recently used beyond this are forgotten (like expiry)
INT32_MAX = 0x7FFFFFFF
NO_EPOCH = -1
NO_OFFSET = -1


class ProducerIdAllocator:
    """Hands out producer ids from durably reserved blocks."""

    def __init__(self, data_dir: Path, block_size: int = ID_BLOCK_SIZE):
        self.path = data_dir / ID_FILE
        self.block_size = block_size
        self._next = 0
        self._end = 0  # exclusive end of the reserved block; 0 = nothing reserved yet
        self._lock = asyncio.Lock()

    async def allocate(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                self._next, self._end = await asyncio.to_thread(self._reserve)
            pid = self._next
            self._next += 1
            return pid

    def _reserve(self) -> tuple[int, int]:
        """Persist the end of a new block before using it (blocking: runs in a worker thread)."""
        start = self._end if self._end else _read_next_id(self.path)
        end = start + self.block_size
        tmp = self.path.with_name(ID_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"next.producer.id={end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        return start, end


def _read_next_id(path: Path) -> int:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "next.producer.id":
            return int(value.strip())
    return 0


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of the batch's last record, wrapping past Int32.MAX to 0 as Kafka does."""
    seq = base_sequence + last_offset_delta
    return seq - INT32_MAX - 1 if seq > INT32_MAX else seq


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    append_time: int  # LogAppendTime stamp, -1 for CreateTime topics


@dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_EPOCH
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1  # of the last marker
    last_timestamp: int = -1  # max timestamp of the last batch or marker
    txn_first_offset: int = NO_OFFSET  # Kafka's currentTxnFirstOffset

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def bump_epoch(self, epoch: int) -> None:
        """A newer epoch forgets the batches of the old one (its sequences restart at 0)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


class SequenceError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class PartitionProducers:
    """Producer state of one partition."""

    def __init__(self) -> None:
        self.entries: OrderedDict[int, ProducerEntry] = OrderedDict()
        self.loaded = False
        self.open_txns: dict[int, int] = {}  # producer id -> first offset, oldest first
        self.aborted: list[AbortedTxn] = []  # by marker offset
        self._aborted_last: list[int] = []

    def in_txn(self, producer_id: int, producer_epoch: int | None = None) -> bool:
        """Whether the producer (at this epoch, if given) has an open transaction in this partition:
        its next transactional batch needs no verification (Kafka's ``hasOngoingTransaction``)."""
        if producer_id not in self.open_txns:
            return False
        return producer_epoch is None or self.entries[producer_id].epoch == producer_epoch

    def has_aborted_from(self, start: int) -> bool:
        """Whether any aborted transaction ends at or after ``start`` (cheap pre-check for Fetch)."""
        return bool(self._aborted_last) and self._aborted_last[-1] >= start

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (Kafka's firstUndecidedOffset)."""
        return next(iter(self.open_txns.values()), None)

    def last_stable_offset(self, log_end_offset: int) -> int:
        first = self.first_unstable_offset()
        return log_end_offset if first is None or first > log_end_offset else first

    def check(self, h: BatchHeader) -> BatchMeta | None:
        """Validate an idempotent batch; returns the original's metadata if it is a duplicate."""
        entry = self.entries.get(h.producer_id)
        if entry is None or entry.epoch == NO_EPOCH:
            return None
        if h.producer_epoch < entry.epoch:
            raise SequenceError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                f"producer {h.producer_id} epoch {h.producer_epoch} is older than {entry.epoch}")
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise SequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    f"producer {h.producer_id} new epoch {h.producer_epoch} must start at "
                                    f"sequence 0, got {h.base_sequence}")
            return None
        last_seq = last_sequence(h.base_sequence, h.last_offset_delta)
        for meta in entry.batches:
            if meta.first_seq == h.base_sequence and meta.last_seq == last_seq:
                return meta
        if entry.batches and not in_sequence(entry.last_seq, h.base_sequence):
            raise SequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                f"producer {h.producer_id}: sequence {h.base_sequence} does not follow "
                                f"{entry.last_seq}")
        if not h.is_transactional and entry.txn_first_offset != NO_OFFSET:
            raise SequenceError(ErrorCode.INVALID_TXN_STATE,
                                f"producer {h.producer_id} wrote a non-transactional batch while its "
                                f"transaction is open in this partition")
        return None

    def _entry(self, pid: int) -> ProducerEntry:
        entry = self.entries.get(pid)
        if entry is None:
            entry = self.entries[pid] = ProducerEntry()
            if len(self.entries) > MAX_PRODUCERS_PER_PARTITION:
                self._evict_one()
        else:
            self.entries.move_to_end(pid)
        return entry

    def _evict_one(self) -> None:
        """Forget the least recently used producer, never one with an open transaction."""
        for pid, entry in self.entries.items():
            if entry.txn_first_offset == NO_OFFSET:
                del self.entries[pid]
                return

    def record(self, h: BatchHeader, first_offset: int, append_time: int) -> None:
        """Remember an appended data batch (also used when rebuilding from the log)."""
        entry = self._entry(h.producer_id)
        if h.producer_epoch < entry.epoch:
            return
        entry.bump_epoch(h.producer_epoch)
        entry.batches.append(BatchMeta(h.base_sequence, last_sequence(h.base_sequence, h.last_offset_delta),
                                       first_offset, first_offset + h.last_offset_delta, append_time))
        entry.last_timestamp = h.max_timestamp if append_time < 0 else append_time
        if h.is_transactional and entry.txn_first_offset == NO_OFFSET:
            entry.txn_first_offset = first_offset
            self.open_txns[h.producer_id] = first_offset

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> None:
        """Kafka's marker checks (``ProducerAppendInfo.appendEndTxnMarker``); raises SequenceError.

        A transactions-v2 marker carries the epoch the coordinator bumped, so it must be above
        the producer's; the same epoch with no transaction open is a retried marker, accepted
        (``checkProducerEpoch``, KAFKA-19999).  Older markers may carry the producer's epoch."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return
        tv2 = transaction_version >= 2
        if producer_epoch < entry.epoch or (tv2 and producer_epoch == entry.epoch
                                            and entry.txn_first_offset != NO_OFFSET):
            raise SequenceError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                f"Epoch of producer {producer_id} is {producer_epoch}, which is "
                                f"{'<=' if tv2 else '<'} the last seen epoch {entry.epoch} "
                                f"(TV{transaction_version})")
        if coordinator_epoch < entry.coordinator_epoch:
            raise SequenceError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                f"marker of producer {producer_id} has coordinator epoch {coordinator_epoch}, "
                                f"older than {entry.coordinator_epoch}")

    def complete(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                 marker_offset: int, timestamp: int) -> AbortedTxn | None:
        """Apply an appended marker: the producer's open transaction ends here.  Returns the
        aborted-index entry for an ABORT that closed a transaction, else None."""
        entry = self._entry(producer_id)
        first = entry.txn_first_offset
        entry.bump_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        entry.txn_first_offset = NO_OFFSET
        if first == NO_OFFSET:
            return None  # an empty transaction here, or a resent marker: nothing to index
        self.open_txns.pop(producer_id, None)
        if commit:
            return None
        other = self.first_unstable_offset()
        aborted = AbortedTxn(producer_id, first, marker_offset,
                             marker_offset + 1 if other is None else other)
        self._add_aborted([aborted])
        return aborted

    def aborted_in(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions a reader of [start, upper) must know about (Kafka's
        ``collectAbortedTxns``): marker at or after ``start``, first offset below ``upper``;
        the walk stops at the first entry whose last stable offset reaches ``upper``."""
        out = []
        aborted = self.aborted
        for i in range(bisect.bisect_left(self._aborted_last, start), len(aborted)):
            e = aborted[i]
            if e.first_offset < upper:
                out.append(e)
            if e.last_stable_offset >= upper:
                break
        return out

    def replace_aborted_below(self, end_offset: int, entries: list[AbortedTxn]) -> None:
        """The aborted transactions whose marker is below ``end_offset`` are now ``entries`` (what
        the cleaner kept of them); those from ``end_offset`` on stay."""
        rest = [e for e in self.aborted if e.last_offset >= end_offset]
        self.aborted, self._aborted_last = [], []
        self._add_aborted(sorted((e for e in entries if e.last_offset < end_offset), key=lambda e: e.last_offset)
                          + rest)

    def _add_aborted(self, entries: list[AbortedTxn]) -> None:
        self.aborted.extend(entries)
        self._aborted_last.extend(e.last_offset for e in entries)

    # --- snapshots and rebuild ------------------------------------------------------------

    def snapshot_entries(self) -> list[SnapshotEntry]:
        """The state as Kafka's snapshot holds it (the last batch of each producer)."""
        out = []
        for pid, e in self.entries.items():
            if e.batches:
                b = e.batches[-1]
                out.append(SnapshotEntry(pid, e.epoch, b.last_seq, b.last_offset, b.last_offset - b.first_offset,
                                         e.last_timestamp, e.coordinator_epoch, e.txn_first_offset))
            else:
                out.append(SnapshotEntry(pid, e.epoch, -1, -1, 0, e.last_timestamp, e.coordinator_epoch,
                                         e.txn_first_offset))
        return out

    def load_snapshot(self, entries: list[SnapshotEntry], log_append_time: bool) -> None:
        for s in entries:
            e = self.entries[s.producer_id] = ProducerEntry(s.epoch, coordinator_epoch=s.coordinator_epoch,
                                                            last_timestamp=s.timestamp,
                                                            txn_first_offset=s.txn_first_offset)
            if s.last_sequence >= 0 and s.last_offset >= 0:
                first_seq = s.last_sequence - s.offset_delta
                if first_seq < 0:
                    first_seq += INT32_MAX + 1
                e.batches.append(BatchMeta(first_seq, s.last_sequence, s.last_offset - s.offset_delta,
                                           s.last_offset, s.timestamp if log_append_time else -1))
        for s in sorted((s for s in entries if s.txn_first_offset != NO_OFFSET), key=lambda s: s.txn_first_offset):
            self.open_txns[s.producer_id] = s.txn_first_offset

    def rebuild(self, log: Log) -> None:
        """Load the newest snapshot and replay the batches after it (all of them without one),
        rewriting the replayed segments' ``.txnindex``; then snapshot the result (blocking: run
        it in a worker thread)."""
        directory = log.directory
        end = log.log_end_offset
        snap = producer_snapshot.latest(directory, end)
        if snap is not None and snap[0] < log.segments[0].base_offset:
            snap = None  # retention took batches after it: replay what is left instead, as without one
        start = 0
        if snap is not None:
            start = snap[0]
            self.load_snapshot(snap[1], log.config.log_append_time)
        replayed: list[int] = []
        with log.reading() as segments:  # a delete meanwhile closes the files only after this scan
            for i, seg in enumerate(segments):
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else end
                indexed = txn_index.read_entries(directory, seg.base_offset) if snap is not None else []
                if upper <= start and seg.base_offset < start:  # wholly before the snapshot
                    self._add_aborted(indexed)
                    continue
                kept = [e for e in indexed if e.last_offset < start]
                self._add_aborted(kept)
                position = 0
                if start > seg.base_offset:
                    loc = seg.find(start)
                    position = seg.size if loc is None else loc[0]
                txn_index.write_entries(directory, seg.base_offset, kept + self._replay(seg, position))
                replayed.append(seg.base_offset)
        if snap is None or start < end:
            for base in replayed:  # what the snapshot vouches for is on disk first
                txn_index.sync(directory, base)
            producer_snapshot.write(directory, end, self.snapshot_entries())

    def _replay(self, seg, position: int) -> list[AbortedTxn]:
        found: list[AbortedTxn] = []
        for _pos, buf, off, h in seg.iter_batches(position):
            if h.producer_id < 0:
                continue
            if h.is_control:
                aborted = self._replay_marker(buf, off, h)
                if aborted is not None:
                    found.append(aborted)
            elif h.base_sequence >= 0:
                self.record(h, h.base_offset, h.max_timestamp if h.log_append_time else -1)
        return found

    def _replay_marker(self, buf: bytes, off: int, h: BatchHeader) -> AbortedTxn | None:
        try:
            record = decode_batch(buf, off, verify_crc=False)[1][0]
            key = parse_control_key(record.key)
            if key.type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                return None
            coordinator_epoch = parse_end_txn_marker(record.value).coordinator_epoch
        except (CorruptRecordError, IndexError) as exc:
            logger.warning("producer_state.bad_marker", offset=h.base_offset, error=str(exc))
            return None
        return self.complete(h.producer_id, h.producer_epoch, coordinator_epoch,
                             key.type == ControlRecordType.COMMIT, h.base_offset, h.max_timestamp)


class ProducerStates:
    """Every partition's producer state, loaded lazily from the log on first use."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, int], PartitionProducers] = {}

    def get(self, topic: str, partition: int) -> PartitionProducers:
        key = (topic, partition)
        state = self._parts.get(key)
        if state is None:
            state = self._parts[key] = PartitionProducers()
        return state

    def peek(self, topic: str, partition: int) -> PartitionProducers | None:
        return self._parts.get((topic, partition))

    async def ensure_loaded(self, state: PartitionProducers, log: Log) -> None:
        """Rebuild from the log once; the caller keeps appends in arrival order meanwhile."""
        if not state.loaded:
            try:
                await asyncio.to_thread(state.rebuild, log)
            except Exception as exc:  # a torn tail is storage's to repair; dedupe starts afresh
                logger.warning("producer_state.rebuild_failed", dir=log.directory.name, error=str(exc))
            state.loaded = True

    def loaded(self) -> list[tuple[tuple[str, int], PartitionProducers]]:
        return [(k, s) for k, s in self._parts.items() if s.loaded]

    def drop(self, topic: str, partition: int) -> None:
        self._parts.pop((topic, partition), None)

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self._parts if k[0] == topic]:
            del self._parts[key]
