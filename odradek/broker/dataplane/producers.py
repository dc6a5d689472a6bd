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

The state is not snapshotted: on the first append after a restart the tail
of the log (``SCAN_TAIL_BYTES``) is scanned, batch headers only, in a worker
thread, so a producer that retries across a broker restart is still deduped.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.records import BatchHeader
from ...storage.files import fsync_dir
from ...storage.log import Log
from ...storage.segment import Segment

logger = structlog.get_logger("odradek.producers")

BATCHES_TO_RETAIN = 5
ID_BLOCK_SIZE = 1000
ID_FILE = "producer-ids"
SCAN_TAIL_BYTES = 64 << 20
MAX_PRODUCERS_PER_PARTITION = 10_000  # least recently used beyond this are forgotten (like expiry)
INT32_MAX = 0x7FFFFFFF
NO_EPOCH = -1


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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


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
        return None

    def record(self, h: BatchHeader, first_offset: int, append_time: int) -> None:
        """Remember an appended batch (also used when rebuilding from the log)."""
        pid = h.producer_id
        entry = self.entries.get(pid)
        if entry is None:
            entry = self.entries[pid] = ProducerEntry()
            if len(self.entries) > MAX_PRODUCERS_PER_PARTITION:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(pid)
        if h.producer_epoch < entry.epoch:
            return
        if h.producer_epoch > entry.epoch:
            entry.epoch = h.producer_epoch
            entry.batches.clear()
        entry.batches.append(BatchMeta(h.base_sequence, last_sequence(h.base_sequence, h.last_offset_delta),
                                       first_offset, first_offset + h.last_offset_delta, append_time))

    def rebuild(self, log: Log) -> None:
        """Replay the batch headers of the log's tail (blocking: run it in a worker thread)."""
        with log.reading() as segments:  # a delete meanwhile closes the files only after this scan
            for h in _tail_headers(segments, SCAN_TAIL_BYTES):
                if h.producer_id >= 0 and h.base_sequence >= 0 and not h.is_control:
                    self.record(h, h.base_offset, h.max_timestamp if h.log_append_time else -1)


def _tail_headers(segments: Sequence[Segment], budget: int):
    """Headers of the last ``budget`` bytes or so of the log, oldest first, from batch boundaries."""
    chosen = []
    total = 0
    for seg in reversed(segments):
        chosen.append(seg)
        total += seg.size
        if total >= budget:
            break
    chosen.reverse()
    excess = total - budget
    for i, seg in enumerate(chosen):
        start = 0
        if i == 0 and excess > 0:
            start = _index_position_at_least(seg, excess)
        for _pos, _buf, _off, header in seg.iter_batches(start, seg.size):
            yield header


def _index_position_at_least(seg, position: int) -> int:
    """A batch boundary at or after ``position`` taken from the sparse index (0 if none)."""
    for _rel, pos in seg.index.entries():
        if pos >= position:
            return pos
    return 0


class ProducerStates:
    """Every partition's producer state, loaded lazily from the log on first append."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, int], PartitionProducers] = {}

    def get(self, topic: str, partition: int) -> PartitionProducers:
        key = (topic, partition)
        state = self._parts.get(key)
        if state is None:
            state = self._parts[key] = PartitionProducers()
        return state

    async def ensure_loaded(self, state: PartitionProducers, log: Log) -> None:
        """Rebuild from the log once; the caller keeps appends in arrival order meanwhile."""
        if not state.loaded:
            try:
                await asyncio.to_thread(state.rebuild, log)
            except Exception as exc:  # a torn tail is storage's to repair; dedupe starts afresh
                logger.warning("producer_state.rebuild_failed", dir=log.directory.name, error=str(exc))
            state.loaded = True

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self._parts if k[0] == topic]:
            del self._parts[key]
