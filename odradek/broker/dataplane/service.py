"""The data plane's shared state and its storage-facing operations.

Handlers (``broker/handlers/``) speak the protocol; this object owns what
they share: the topic registry, producer ids and sequence state, and the
long-poll waiters.  ``append_now`` is the one way a client batch reaches a log;
``write_txn_marker`` the one way a transaction marker does (the coordinator's
``MarkerTarget``, Kafka's ``WriteTxnMarkers`` path on the partition leader).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ...protocol.records import HEADER_SIZE, BatchHeader, encode_end_txn_batch
from ...storage import producer_snapshot, txn_index
from ...storage.config import FsyncMode, LogConfig
from ...storage.errors import LogClosedError, OffsetOutOfRangeError, RecordBatchTooLargeError
from ...storage.log import Log
from ...storage.log_manager import LogManager
from ...storage.producer_snapshot import SnapshotEntry
from ...storage.txn_index import AbortedTxn
from ..txn_contracts import TxnMarker, TxnVerifier
from . import topic_configs
from .batches import BatchRejected, Prechecked, precheck, validate_batch
from .implicit_add import IMPLICIT_ADD_FROM_VERSION
from .producers import PartitionProducers, ProducerIdAllocator, ProducerStates, SequenceError
from .recompress import recompress, target_codec
from .topics import INTERNAL_TOPICS, TopicRegistry
from .waiters import AppendWaiters

logger = structlog.get_logger("odradek.dataplane")

_MAX_TS = struct.Struct(">q")
_NO_RECOMPRESSION = LogConfig()  # compression.type producer: every batch stored as sent
MAX_TIMESTAMP_OFFSET = 35
BIG_READ_BYTES = 64 << 10  # reads that may return more than this go to a worker thread
BIG_READ_LAG = 64  # ... when the reader is at least this many offsets behind the end
HEAVY_CHECKS = 1  # heavy batches checked at once (a core's worth), each holding at most one decompressed area
GIL_SWITCH_S = 0.001  # the longest a worker thread's Python keeps the loop waiting for the GIL


class _SwitchInterval:
    """The process's GIL switch interval, shortened while any broker of the process runs.

    A heavy check's record walk is Python in a worker thread: each time the loop wants the GIL
    back it waits up to the switch interval, and CPython's 5 ms would be added to every other
    client's request while a heavy batch is being checked.  The interval is process-wide, so
    an in-process test broker must not leave it changed: the last broker to stop puts back
    what the first found (unless someone changed it since).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._saved = 0.0
        self._set = 0.0

    def shorten(self) -> None:
        with self._lock:
            if self._running == 0:
                self._saved = sys.getswitchinterval()
                self._set = min(self._saved, GIL_SWITCH_S)
                sys.setswitchinterval(self._set)
            self._running += 1

    def restore(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0 and sys.getswitchinterval() == self._set:
                sys.setswitchinterval(self._saved)


SWITCH_INTERVAL = _SwitchInterval()

# What a transactional Produce answers when the coordinator says the partition is not in the
# producer's transaction (Kafka's ``AddPartitionsToTxnManager`` / ``ReplicaManager``): retriable
# coordinator errors become NOT_ENOUGH_REPLICAS (retried without a metadata refresh), a fenced
# producer INVALID_PRODUCER_EPOCH, and "not in the transaction" INVALID_TXN_STATE before
# Produce v11, TRANSACTION_ABORTABLE from v11.
_RETRIABLE_VERIFY = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                               ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               ErrorCode.NOT_COORDINATOR})
ABORTABLE_FROM_VERSION = 11


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


class DataPlane:
    def __init__(self, topics: TopicRegistry, logs: LogManager, data_dir: Path):
        self.topics = topics
        self.logs = logs
        self.producer_ids = ProducerIdAllocator(data_dir)
        self.producers = ProducerStates()
        self.waiters = AppendWaiters()
        self._gate = asyncio.Lock()
        self._heavy_slots = asyncio.Semaphore(HEAVY_CHECKS)
        self._turns: dict[int, asyncio.Future[None]] = {}  # connection id -> its last Produce's turn
        self._ordered = 0
        logs.stable_offset = self._stable_offset_for_cleaner
        logs.after_clean = self._after_clean
        # the cleaner's bound on an internal topic, from the coordinator that writes it (set by the app)
        self.internal_stable_offset: Callable[[Log], int | None] | None = None
        # a cluster's (ISR size, replica count) of a partition (``cluster``); None: the one broker's (1, 1)
        self.in_sync: Callable[[str, int], tuple[int, int]] | None = None
        logs.before_close = self._snapshot_all
        self._switch_shortened = False

    async def start(self) -> None:
        if not self._switch_shortened:
            SWITCH_INTERVAL.shorten()
            self._switch_shortened = True
        await self.topics.reconcile(self.logs)

    def stop(self) -> None:
        """The broker stops: the process's GIL switch interval back when no other broker runs."""
        if self._switch_shortened:
            self._switch_shortened = False
            SWITCH_INTERVAL.restore()

    # --- produce --------------------------------------------------------------------------
    #
    # Appends must happen in arrival order: an idempotent producer pipelines
    # up to five requests, and the sequence check rejects a later batch that
    # overtakes an earlier one.  The common path (topic known, producer state
    # loaded) never yields, so order is kept for free.  A request that must
    # wait (auto-create a topic, rebuild producer state from the log) enters
    # the *ordered* section, and while anyone is in it every request does,
    # queueing FIFO on one lock behind it.

    def fast_path_ok(self, logs: list[Log]) -> bool:
        """True when these appends need no await and nobody is queued in the ordered section."""
        if self._ordered:
            return False
        return all(self.producers.get(lg.topic, lg.partition).loaded for lg in logs)

    @contextlib.asynccontextmanager
    async def ordered(self) -> AsyncIterator[None]:
        """FIFO section for requests that await before appending (see above)."""
        self._ordered += 1
        try:
            async with self._gate:
                yield
        finally:
            self._ordered -= 1

    # A batch that is big work to check (``batches.is_heavy``: a compressed area of hundreds of
    # MiB, a walk of many records) is checked in a worker thread before its request appends,
    # at most HEAVY_CHECKS at a time so the decompressed areas alive stay bounded; Kafka checks
    # on its handler threads, so one client's batch does not stall the others.  The request's
    # connection keeps its order meanwhile: its later Produce requests append after it, as
    # Kafka, which handles a connection's requests one at a time, appends them.

    async def precheck(self, data: bytes, *, api_version: int, max_bytes: int,
                       config: LogConfig = _NO_RECOMPRESSION) -> Prechecked:
        """``batches.precheck`` in a worker thread, within the bound on concurrent checks; the
        batch is recompressed there too when the topic's ``compression.type`` (``config``) asks."""
        def stored(batch: bytes, h: BatchHeader, area):
            target = target_codec(config.compression_type, h.compression)
            if target == h.compression:
                return None
            return (*recompress(batch, target, config.compression_level(target), area), target)

        async with self._heavy_slots:
            return await asyncio.to_thread(precheck, data, api_version=api_version, max_bytes=max_bytes,
                                           recompress=stored)

    def turn_pending(self, connection_id: int) -> bool:
        """True while an earlier Produce of this connection is still being checked."""
        return connection_id in self._turns

    @contextlib.asynccontextmanager
    async def connection_turn(self, connection_id: int) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """A Produce's turn on its connection: yields a wait for the earlier ones to have appended."""
        earlier = self._turns.get(connection_id)
        mine = asyncio.get_running_loop().create_future()
        self._turns[connection_id] = mine

        async def wait_earlier() -> None:
            if earlier is not None:
                await asyncio.shield(earlier)

        try:
            yield wait_earlier
        finally:
            mine.set_result(None)
            if self._turns.get(connection_id) is mine:
                del self._turns[connection_id]

    async def barrier(self, connection_id: int | None = None) -> None:
        """Readers call this first: appends that arrived earlier but are queued in the ordered
        section, or (on ``connection_id``) are still being checked off the loop, land before the
        read, as on Kafka, which handles a connection's requests in turn."""
        turn = self._turns.get(connection_id) if connection_id is not None else None
        if turn is not None:
            await asyncio.shield(turn)
        if self._ordered:
            async with self.ordered():
                pass

    async def load_producers(self, log: Log) -> None:
        await self.producers.ensure_loaded(self.producers.get(log.topic, log.partition), log)

    async def ensure_loaded(self, log: Log) -> PartitionProducers:
        """The partition's producer state, rebuilt first if this is its first use since start
        (readers need it too: the last stable offset and the aborted transactions).  Internal
        topics are written by their coordinators, not through here: no state is kept for them
        and their last stable offset is their log end."""
        state = self.producers.get(log.topic, log.partition)
        if not state.loaded and log.topic not in INTERNAL_TOPICS:
            async with self.ordered():
                await self.producers.ensure_loaded(state, log)
        return state

    def append_now(self, log: Log, data: bytes | None, *, api_version: int, acks: int,
                   transactional_id: str | None = None, verifier: TxnVerifier | None = None) -> AppendResult:
        """Validate, dedupe and append one partition's batch without yielding; raises BatchRejected.

        The partition's producer state must be loaded (``load_producers``).  A
        transactional batch is first verified with the coordinator (``verifier``)
        unless its producer already has a transaction open in this partition.
        """
        config = log.config
        records = stored = None
        if type(data) is Prechecked:
            data, records, stored = data.data, data.records, data.stored
        h = validate_batch(data, api_version=api_version, max_bytes=config.max_message_bytes,
                           compacted=config.compact, records=records)
        if acks == -1 and (min_isr := topic_configs.min_insync_replicas(self._overrides(log.topic))) > 1:
            self._check_min_isr(log, min_isr)
        state = self.producers.get(log.topic, log.partition)
        if h.is_transactional and not state.in_txn(h.producer_id, h.producer_epoch):
            _verify(log, h.producer_id, h.producer_epoch, transactional_id, verifier, api_version)
            if api_version >= IMPLICIT_ADD_FROM_VERSION and h.base_sequence != 0 \
                    and h.producer_id not in state.entries:  # ProducerAppendInfo.checkSequence, TV2
                raise BatchRejected(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    f"Invalid sequence number for producer {h.producer_id}: {h.base_sequence} "
                                    f"(incoming seq. number). Expected sequence 0 for transactions v2 "
                                    f"idempotent producer with no existing state.")
        if h.producer_id >= 0:
            try:
                dup = state.check(h)
            except SequenceError as exc:
                raise BatchRejected(exc.code, exc.message) from None
            if dup is not None:
                return AppendResult(dup.first_offset, dup.append_time, log.log_start_offset)
        target = target_codec(config.compression_type, h.compression)
        if stored is not None and stored[2] == target:  # recompressed with the off-loop check (the
            data, h, _ = stored                          # topic's codec unchanged meanwhile)
        elif target != h.compression:  # the topic's codec differs from the batch's (LogValidator)
            data, h = recompress(data, target, config.compression_level(target))  # type: ignore[arg-type]
        first = self._append(log, state, data)  # type: ignore[arg-type]
        append_time = _stamped_time(log, h.size) if config.log_append_time else -1
        if h.producer_id >= 0:
            state.record(h, first, append_time)
        self.waiters.notify(log.topic, log.partition)
        return AppendResult(first, append_time, log.log_start_offset)

    async def append_pairs(self, log: Log, pairs: list[tuple[bytes | None, bytes | None]], timestamp: int) -> int:
        """Records a broker-side writer builds (the schema registry's ``_schemas``) as one batch,
        no producer id: long polls woken; returns once durable as an ``acks=-1`` produce would
        (fsync ``always``: fsynced).  Raises the log's errors (too large, closed, storage)."""
        state = await self.ensure_loaded(log)
        active = log.active_segment
        first, _last = log.append_records(pairs, timestamp)
        if log.active_segment is not active:
            self._snapshot(log, first, state.snapshot_entries(), active.base_offset)
        self.waiters.notify(log.topic, log.partition)
        if self.needs_sync(log, -1):
            await log.sync()
        return first

    # --- transactions --------------------------------------------------------------------

    async def write_txn_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        """Append a COMMIT/ABORT control batch (``MarkerTarget``): Kafka's epoch and
        coordinator-epoch checks, the producer's transaction closed, an ABORT indexed in
        ``.txnindex``, the LSO moved and long polls woken; durable first under fsync ``always``."""
        log = self.topics.log(topic, partition)
        if log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            state = await self.ensure_loaded(log)
            if self._ordered:  # appends queued in the ordered section land first, in order
                async with self.ordered():
                    self._append_marker(log, state, marker)
            else:
                self._append_marker(log, state, marker)
            if log.config.fsync is FsyncMode.ALWAYS:
                await self.durable(log)
        except BatchRejected as exc:
            if exc.code not in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
                logger.warning("txn_marker.failed", topic=topic, partition=partition, error=exc.message)
            return exc.code
        except LogClosedError:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NONE

    def _append_marker(self, log: Log, state: PartitionProducers, marker: TxnMarker) -> None:
        try:
            state.check_marker(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                               marker.transaction_version)
        except SequenceError as exc:
            raise BatchRejected(exc.code, exc.message) from None
        now = log.clock()
        batch = encode_end_txn_batch(marker.commit, producer_id=marker.producer_id,
                                     producer_epoch=marker.producer_epoch,
                                     coordinator_epoch=marker.coordinator_epoch, timestamp=now)
        offset = self._append(log, state, batch)
        aborted = state.complete(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                 marker.commit, offset, now)
        if aborted is not None:
            try:
                log.append_aborted_txn(aborted)
            except OSError as exc:  # derived data: the next load rebuilds it from the log
                logger.warning("txn_index.append_failed", dir=log.directory.name, error=str(exc))
        self.waiters.notify(log.topic, log.partition)

    async def _stable_offset_for_cleaner(self, log: Log) -> int | None:
        """The cleaner's bound: a data partition's LSO (its producer state loaded first, which
        also brings its ``.txnindex`` up to date).  Internal topics are their coordinators'."""
        if log.topic in INTERNAL_TOPICS:
            hook = self.internal_stable_offset
            return hook(log) if hook is not None else None
        if self.topics.log(log.topic, log.partition) is not log:
            return None
        await self.ensure_loaded(log)
        return self.last_stable_offset(log)

    async def _after_clean(self, log: Log, end_offset: int) -> None:
        """The cleaner rewrote [log start, ``end_offset``) and its ``.txnindex`` files keep only the
        aborted transactions whose ABORT marker it kept (Kafka's cleaned index).  Fetch must stop
        listing the others: a client marks the producer aborted from the listed first offset
        until that producer's ABORT marker, which is gone, so it would skip the producer's later
        committed batches."""
        state = self.producers.peek(log.topic, log.partition)
        if state is None or not state.loaded or self.topics.log(log.topic, log.partition) is not log:
            return
        try:
            kept = await asyncio.to_thread(_indexed_below, log, end_offset)
        except (OSError, LogClosedError) as exc:
            logger.warning("txn_index.reload_failed", dir=log.directory.name, error=str(exc))
            return
        state.replace_aborted_below(end_offset, kept)

    def _append(self, log: Log, state: PartitionProducers, data: bytes) -> int:
        """Append; when the append rolled a segment, snapshot the producer state as of the new
        segment's base (the batch just written is not in it yet), as Kafka does on a roll."""
        active = log.active_segment
        first = _append(log, data)
        if log.active_segment is not active:
            self._snapshot(log, first, state.snapshot_entries(), active.base_offset)
        return first

    @staticmethod
    def _snapshot(log: Log, offset: int, entries: list[SnapshotEntry], indexed_base: int) -> None:
        """Write a snapshot; the aborted index it vouches for (the segment at ``indexed_base``,
        the last one written to) is made durable first."""
        try:
            txn_index.sync(log.directory, indexed_base)
            producer_snapshot.write(log.directory, offset, entries)
        except OSError as exc:  # a shortcut only: the next load replays more of the log
            logger.warning("producer_snapshot.write_failed", dir=log.directory.name, error=str(exc))

    async def _snapshot_all(self) -> None:
        """At shutdown (before the logs close): every loaded partition's state at its log end,
        so the next start replays nothing (an empty state too: without a snapshot the next
        start would replay the whole log)."""
        jobs = []
        for (topic, partition), state in self.producers.loaded():
            log = self.topics.log(topic, partition)
            if log is not None and not log.closed and topic not in INTERNAL_TOPICS:
                jobs.append((log, log.log_end_offset, state.snapshot_entries(), log.active_segment.base_offset))
        if jobs:
            await asyncio.to_thread(lambda: [self._snapshot(*job) for job in jobs])

    def last_stable_offset(self, log: Log) -> int:
        """min(first offset of the oldest open transaction, high watermark = log end), never below
        the log start (Kafka's ``maybeIncrementFirstUnstableOffset``: retention or DeleteRecords
        may take an open transaction's first batches; readers start at the log start)."""
        state = self.producers.peek(log.topic, log.partition)
        end = log.log_end_offset
        if state is None:
            return end
        lso = state.last_stable_offset(end)
        start = log.log_start_offset
        return lso if lso >= start else min(start, end)

    def loaded(self, log: Log) -> bool:
        """Whether the partition's producer state is ready (``ensure_loaded`` need not be awaited)."""
        state = self.producers.peek(log.topic, log.partition)
        return state is not None and (state.loaded or log.topic in INTERNAL_TOPICS)

    def aborted_txns(self, log: Log, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions of a read of [start, upper)."""
        state = self.producers.peek(log.topic, log.partition)
        if state is None or not state.has_aborted_from(start):
            return []
        return state.aborted_in(start, upper)

    @staticmethod
    def needs_sync(log: Log, acks: int) -> bool:
        return acks != 0 and log.config.fsync is FsyncMode.ALWAYS

    @staticmethod
    async def durable(log: Log) -> None:
        """Wait for the fsync round covering earlier appends (fsync mode ``always``)."""
        try:
            await log.sync()
        except OSError as exc:
            raise BatchRejected(ErrorCode.KAFKA_STORAGE_ERROR, f"fsync failed: {exc}") from None

    def _check_min_isr(self, log: Log, min_isr: int) -> None:
        """acks=all below ``min.insync.replicas`` is NOT_ENOUGH_REPLICAS, nothing written
        (``Partition.appendRecordsToLeader``); a cluster's partition with fewer replicas than that
        needs them all (``effectiveMinIsr``)."""
        if self.in_sync is None:
            raise BatchRejected(ErrorCode.NOT_ENOUGH_REPLICAS,
                                "min.insync.replicas is above the one replica a single broker has")
        isr, replicas = self.in_sync(log.topic, log.partition)
        if isr < min(min_isr, replicas):
            raise BatchRejected(ErrorCode.NOT_ENOUGH_REPLICAS,
                                f"The size of the current ISR {isr} is insufficient to satisfy the min.isr "
                                f"requirement of {min_isr} for partition {log.topic}-{log.partition}")

    def _overrides(self, topic: str) -> dict[str, str]:
        t = self.topics.get(topic)
        return t.configs if t is not None else {}

    # --- fetch ----------------------------------------------------------------------------

    async def read_span(self, log: Log, offset: int, max_bytes: int, *, background: bool = False,
                        max_offset: int | None = None) -> tuple[bytes, int]:
        """``read``, and the offset after the last batch read (read_committed's range end)."""
        if max_bytes > BIG_READ_BYTES and (background or log.log_end_offset - offset > BIG_READ_LAG):
            return await log.read_span_async(offset, max_bytes, max_offset=max_offset)
        return log.read_span(offset, max_bytes, max_offset=max_offset)

    async def read(self, log: Log, offset: int, max_bytes: int, *, background: bool = False,
                   max_offset: int | None = None) -> bytes:
        """Whole batches from ``offset`` (the first one whole even past ``max_bytes``, KIP-74).

        A reader at the tail reads a few fresh batches from the page cache on
        the loop; a reader far behind may pull megabytes, which go through a
        worker thread so other connections keep being served.  So does every
        further read of a Fetch that already read ``BIG_READ_BYTES`` on the
        loop (``background``): many partitions a few big batches behind
        must not add up to a stall.
        """
        if max_bytes > BIG_READ_BYTES and (background or log.log_end_offset - offset > BIG_READ_LAG):
            return await log.read_async(offset, max_bytes, max_offset=max_offset)
        return log.read(offset, max_bytes, max_offset=max_offset)

    def forget_all(self, topics: list[str]) -> None:
        """After a reset: no producer state survives, long polls on the old topics wake now."""
        self.producers = ProducerStates()
        for topic in topics:
            self.waiters.notify_topic(topic)

    def truncated(self, log: Log) -> None:
        """A log cut back (a cluster's unclean leader change): its producer state is rebuilt from
        what is left on next use, as ``UnifiedLog.truncateTo`` rebuilds it, and long polls wake."""
        self.producers.drop(log.topic, log.partition)
        self.waiters.notify_topic(log.topic)

    def forget_topic(self, topic: str) -> None:
        """After a delete: drop producer state and wake long polls so they see the error now."""
        self.producers.drop_topic(topic)
        self.waiters.notify_topic(topic)


def _append(log: Log, data: bytes) -> int:
    try:
        first, _last = log.append(data, validate=False)
    except RecordBatchTooLargeError as exc:
        raise BatchRejected(ErrorCode.MESSAGE_TOO_LARGE, str(exc)) from None
    except LogClosedError:
        raise BatchRejected(ErrorCode.NOT_LEADER_OR_FOLLOWER, "the partition was just deleted") from None
    except (OffsetOutOfRangeError, ValueError) as exc:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    except OSError as exc:
        raise BatchRejected(ErrorCode.KAFKA_STORAGE_ERROR, f"append failed: {exc}") from None
    return first


def _indexed_below(log: Log, end_offset: int) -> list[AbortedTxn]:
    """The ``.txnindex`` entries of the segments below ``end_offset`` (blocking: a worker thread)."""
    with log.reading() as segments:
        return [e for seg in segments if seg.base_offset < end_offset
                for e in txn_index.read_entries(log.directory, seg.base_offset)]


def _stamped_time(log: Log, size: int) -> int:
    """The LogAppendTime storage just wrote into the batch (61 bytes from the page cache)."""
    seg = log.active_segment
    head = seg.read(seg.size - size, HEADER_SIZE)
    return _MAX_TS.unpack_from(head, MAX_TIMESTAMP_OFFSET)[0]


def _verify(log: Log, producer_id: int, producer_epoch: int, transactional_id: str | None,
            verifier: TxnVerifier | None, api_version: int) -> None:
    """Kafka's KIP-890 verification of a producer's first transactional batch in a partition."""
    if transactional_id is None or verifier is None:
        code = ErrorCode.INVALID_TXN_STATE
    else:
        code = verifier.verify_partition(transactional_id, producer_id, producer_epoch, log.topic, log.partition)
    if code == ErrorCode.NONE:
        return
    if code in _RETRIABLE_VERIFY:
        code = ErrorCode.NOT_ENOUGH_REPLICAS
    elif code == ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    elif code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        code = ErrorCode.TRANSACTION_ABORTABLE if api_version >= ABORTABLE_FROM_VERSION \
            else ErrorCode.INVALID_TXN_STATE
    raise BatchRejected(code, f"Partition {log.topic}-{log.partition} was not added to the transaction "
                              f"of producer {producer_id} ({ErrorCode(code).name})")
