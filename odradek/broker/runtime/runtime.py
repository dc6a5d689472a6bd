"""The coordinator runtime: records to the log, durable, replayed, then answered.

Kafka's ``CoordinatorRuntime`` is the model.  A coordinator is split into
*shards*, one per partition of its compacted internal topic
(``__consumer_offsets``; ``__transaction_state`` next).  A shard's handlers
validate against its state and produce records; the runtime owns everything
between those records and the answer:

1. **Staging.**  While the server answers the reads of one event-loop turn
   (``open_turn``), each request's records are staged instead of appended.
   Clients pipeline, and one loop iteration often reads several connections
   whose groups share a shard: an append per request costs a batch header,
   a CRC, a write syscall and the log's bookkeeping each (about a quarter of
   an OffsetCommit's CPU at one request per read).
2. **Batching.**  ``flush`` packs each shard's staged requests into as few
   batches as ``max.message.bytes`` allows, every request whole inside one
   batch, so a request stays atomic.
3. **Appending, then answering.**  Every answer given during the turn is
   held (``hold``) until the turn's records are in the log (the OS's page
   cache); then ``end_turn`` releases them, each connection's in request
   order.  Writes made while no turn is open go to the log at once.
4. **Durability.**  With ``log.fsync.mode=always`` a write's promise, and
   its replay, wait for the fsync round that covers its batch (group
   commit: the log calls back in write order); the server queues that
   answer behind the connection's earlier ones.  With never/interval a
   write is applied as soon as it is accepted.
5. **Replay.**  State changes only through the shard's ``replay(key,
   value)``, the same function that loads the shard from its log.
6. **Transactions.**  A write may carry a producer (``TxnBatch``): its
   records go to the log as a batch of their own, transactional, with the
   producer's id and epoch (a TxnOffsetCommit's offsets), or as a control
   batch (a transaction marker) -- Kafka's
   ``scheduleTransactionalWriteOperation`` / ``scheduleTransactionCompletion``.
7. **Failure.**  If an append or an fsync fails, the shard goes Failed (its
   state may hold records the log lacks; it answers NOT_COORDINATOR until it
   is reloaded) and the server closes the connections waiting for answers
   rather than answering: no client sees a success that was not written.

Timers that fire while a turn is open stage their writes too; whatever they
answer is sent from a callback queued behind the turn's end, or flushes
first (``flush_turn``).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, NamedTuple, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.records import HEADER_SIZE, encode_batch, pairs_batch_size_bound
from ...storage.errors import RecordBatchTooLargeError, StorageError
from .promise import Promise

log = structlog.get_logger("odradek.coordinator")

Record = tuple[Any, Any]  # (key, value): a shard's decoded record; value None is a tombstone
EncodedRecord = tuple[bytes | None, bytes | None]

_WRITTEN = Promise.resolved(None)  # what every write applied at once answers (completed: immutable)


class TxnBatch(NamedTuple):
    """The producer of a transactional write; ``control``: the write is one transaction marker."""

    producer_id: int
    producer_epoch: int
    control: bool = False


class ShardStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


class CoordinatorShard(Protocol):
    """What the runtime needs of a shard (Kafka's ``CoordinatorShard``)."""

    partition: int
    status: ShardStatus

    def replay(self, key: Any, value: Any) -> None:
        """Apply one record to the shard's state: at load time and once a write is durable."""

    # optional: ``replay_records(records)``, a write's records at once, as ``replay`` of each in turn


class AnswerHolder(Protocol):
    """A connection holding answers until the turn's records are in the log."""

    def send_held(self) -> None: ...


class CoordinatorResult:
    """What an operation produces (Kafka's ``CoordinatorResult``): records, and the answer.

    Operations validate against the shard's state and never change it: the
    records change it, when they are replayed.  ``response`` is the answer
    once the records are durable and replayed; ``failed(response, error)``
    the answer if they could not be written (None: the error code itself).
    A plain function rather than a closure: the hot path (OffsetCommit)
    builds one result per request.
    """

    __slots__ = ("records", "response", "failed", "txn")

    def __init__(self, records: list[Record], response: Any = None,
                 failed: Callable[[Any, ErrorCode], Any] | None = None, txn: TxnBatch | None = None) -> None:
        self.records = records
        self.response = response
        self.failed = failed
        self.txn = txn  # written as the producer's transactional (or control) batch

    def answer(self, error: ErrorCode | None) -> Any:
        """The answer given the write's outcome (None: durable)."""
        if error is None:
            return self.response
        return error if self.failed is None else self.failed(self.response, error)

    def answer_when(self, written: Promise) -> Promise:
        """A promise of the answer, completed when ``written`` (the records' write) is."""
        if written.done:  # applied at once (fsync never/interval): no closure
            error = written.result()
            return Promise.resolved(self.response if error is None else self.answer(error))
        answer = Promise()
        written.add_done_callback(lambda error: answer.set(self.answer(error)))
        return answer


class StagedWriteFailed(Exception):
    """A staged batch could not be appended: the answers that relied on it must not be sent."""


class _Write:
    """A write waiting for its fsync round (``log.fsync.mode=always``); hashed by identity."""

    __slots__ = ("records", "promise")

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.promise = Promise()


class ShardWriter:
    """One shard's side of the runtime: stage, batch, append, wait for fsync, replay, fail.

    ``encode`` turns a request's records into (key bytes, value bytes) pairs;
    ``await_fsync`` is true when ``log.fsync.mode=always`` (a write is applied
    and answered only after the fsync round covering it); ``on_accept``, if
    given, sees every write the log accepted (the shard's metrics);
    ``on_txn_append(txn, first offset, pairs)``, if given, learns where each
    transactional or control batch landed (a partition's open transactions).
    """

    def __init__(self, runtime: CoordinatorRuntime, shard: CoordinatorShard, log_: Any,
                 encode: Callable[[list[Record]], list[EncodedRecord]],
                 now_ms: Callable[[], int], *, await_fsync: bool = False,
                 on_accept: Callable[[list[Record]], None] | None = None,
                 on_txn_append: Callable[[TxnBatch, int, list[EncodedRecord]], None] | None = None) -> None:
        self.runtime = runtime
        self.shard = shard
        self.log = log_
        self.encode = encode
        self.now_ms = now_ms
        self.await_fsync = await_fsync
        self.on_accept = on_accept
        self.on_txn_append = on_txn_append
        replay_records = getattr(shard, "replay_records", None)
        self.replay_records: Callable[[list[Record]], None] = (
            replay_records if replay_records is not None else self._replay_each)
        # writes staged or appended, not yet fsynced (await_fsync), in write order
        self._in_flight: dict[_Write, None] = {}
        # staged requests of the open turn: (encoded records, timestamp, the write waiting for fsync,
        # the producer of a transactional write, the bound of the records' size in a batch)
        self._staged: list[tuple[list[EncodedRecord], int, _Write | None, TxnBatch | None, int]] = []

    # --- writing ---------------------------------------------------------------------------

    def write(self, records: list[Record], now: int | None = None, txn: TxnBatch | None = None, *,
              replay_now: bool = False) -> Promise:
        """Append ``records`` as one batch; the promise yields None or an ErrorCode.

        On success the records have been replayed before the promise
        completes.  ``now`` is the caller's reading of the clock, if it took
        one.  While a turn is open the request is staged and appended with the
        turn's others before any answer is sent.  ``txn``: the records form
        a transactional batch of that producer (or its marker), never shared
        with another write.  ``replay_now``: the records are replayed as soon as the write is
        accepted even when its answer waits for fsync -- Kafka's runtime applies records to its
        (uncommitted) state at once and holds only the answer, which the next request of a
        consumer group must see; a failed append fails the shard, as for staged writes.  Raises what ``encode`` raises for a record that
        cannot be encoded (nothing is written).
        """
        shard = self.shard
        if shard.status is not ShardStatus.ACTIVE:
            return Promise.resolved(ErrorCode.NOT_COORDINATOR)
        if now is None:
            now = self.now_ms()
        pairs = self.encode(records)
        runtime = self.runtime
        if runtime.open and self.log.writable:
            bound = pairs_batch_size_bound(pairs)
            if bound <= self.log.config.max_message_bytes:
                return self._stage(records, pairs, now, txn, bound - HEADER_SIZE, replay_now)
            if self._staged and not self.flush_staged():  # the log keeps the order state saw
                runtime.failed.append(shard.partition)
                return Promise.resolved(ErrorCode.KAFKA_STORAGE_ERROR)
        try:
            # with fsync "always" the fsync round started below is the one for this write
            # (group commit), so the log need not start its own per append
            if txn is None:
                self.log.append_records(pairs, now, schedule=not self.await_fsync)
            else:
                self._append_txn(pairs, now, txn)
        except RecordBatchTooLargeError as exc:  # callers map it (OffsetCommit: 28)
            log.warning("coordinator.write_too_large", partition=shard.partition, error=str(exc))
            return Promise.resolved(ErrorCode.MESSAGE_TOO_LARGE)
        except (OSError, StorageError) as exc:
            log.error("coordinator.write_failed", partition=shard.partition, error=str(exc))
            return Promise.resolved(ErrorCode.KAFKA_STORAGE_ERROR)
        w = self._settle(records, replay_now)
        if w is None:
            return _WRITTEN
        # group commit: one fsync round covers every write made before it started, and
        # the log calls back in write order, straight from the round's completion
        self.log.when_durable(partial(self._durable, w))
        return w.promise

    def _stage(self, records: list[Record], pairs: list[EncodedRecord], now: int,
               txn: TxnBatch | None, size: int, replay_now: bool = False) -> Promise:
        """Keep the request for the turn's append (it is in the page cache before any answer);
        ``size`` bounds its records' bytes in a batch (the batch header not counted)."""
        if not self._staged:
            self.runtime.stage(self)
        w = self._settle(records, replay_now)
        self._staged.append((pairs, now, w, txn, size))
        return _WRITTEN if w is None else w.promise

    def _settle(self, records: list[Record], replay_now: bool = False) -> _Write | None:
        """Apply an accepted write now (None) if written means durable, else the write that waits.

        It waits for the fsync round that covers it (``_durable``) with fsync
        ``always``, and behind earlier writes still waiting, so state changes
        in log order.
        """
        if self.on_accept is not None:
            self.on_accept(records)
        if replay_now or (not self.await_fsync and not self._in_flight):
            self.replay_records(records)
            if not self.await_fsync:
                return None
            records = []  # applied: the fsync round only releases the answer
        w = _Write(records)
        self._in_flight[w] = None
        return w

    def _replay_each(self, records: list[Record]) -> None:
        """A write's records applied one by one (a shard without ``replay_records``)."""
        replay = self.shard.replay
        for key, value in records:
            replay(key, value)

    def flush_staged(self) -> bool:
        """Append the staged writes, each kept whole in one batch; False if that failed.

        A failure -- any exception, so that no other shard of the turn is left
        unflushed -- fails the shard (as a failed fsync does): its state
        already holds the staged records, which the log does not, so it must
        stop answering until it is reloaded from the log.  Staged writes
        waiting for fsync then wait for the round that covers this append.
        """
        staged, self._staged = self._staged, []
        limit = self.log.config.max_message_bytes
        pairs: list[EncodedRecord] = []
        stamps: list[int] = []
        waiting = [w for _pairs, _now, w, _txn, _size in staged if w is not None]
        size = 0
        try:
            for request_pairs, now, _w, txn, more in staged:
                if txn is not None:  # a batch of its own, in its place in the order
                    if pairs:
                        self._append(pairs, stamps)
                        pairs, stamps = [], []
                    self._append_txn(request_pairs, now, txn)
                    continue
                # each request's bound fits (checked when staged); the header is counted once
                if pairs and size + more > limit:
                    self._append(pairs, stamps)
                    pairs, stamps = [], []
                if not pairs:
                    size = HEADER_SIZE
                size += more
                pairs.extend(request_pairs)
                stamps.extend([now] * len(request_pairs))
            if pairs:
                self._append(pairs, stamps)
        except Exception as exc:  # whatever it was, the state now holds records the log may not
            log.error("coordinator.write_failed", partition=self.shard.partition, error=str(exc),
                      staged_requests=len(staged), exc_info=not isinstance(exc, (OSError, StorageError)))
            self.shard.status = ShardStatus.FAILED
            for w in waiting:
                self._durable(w, exc)
            return False
        if waiting:
            self.log.when_durable(partial(self._all_durable, waiting))
        return True

    def _append(self, pairs: list[EncodedRecord], stamps: list[int]) -> None:
        if min(stamps) == max(stamps):  # one reading of the clock (usual in a turn): the same bytes, no deltas
            self.log.append_records(pairs, stamps[0], schedule=not self.await_fsync)
        else:
            self.log.append_records(pairs, stamps[0], timestamps=stamps, schedule=not self.await_fsync)

    def _append_txn(self, pairs: list[EncodedRecord], now: int, txn: TxnBatch) -> None:
        """One transactional batch (base sequence 0, as Kafka's coordinator writes it) or control batch.

        Through ``Log.append``, the path every producer's batch takes, which
        assigns the offsets.
        """
        batch = encode_batch(pairs, base_offset=0, base_timestamp=now, producer_id=txn.producer_id,
                             producer_epoch=txn.producer_epoch, base_sequence=-1 if txn.control else 0,
                             partition_leader_epoch=0, transactional=True, control=txn.control)
        first, _last = self.log.append(batch, validate=False, schedule=not self.await_fsync)
        if self.on_txn_append is not None:
            self.on_txn_append(txn, first, pairs)

    # --- durability ------------------------------------------------------------------------

    def _all_durable(self, writes: list[_Write], error: BaseException | None) -> None:
        for w in writes:
            self._durable(w, error)

    def _durable(self, w: _Write, error: BaseException | None) -> None:
        """The write's fsync round ended: apply it, or fail it (and the shard) on a failed fsync."""
        del self._in_flight[w]
        shard = self.shard
        if error is None:
            self.replay_records(w.records)
            w.promise.set(None)
            return
        if shard.status is not ShardStatus.FAILED:
            log.error("coordinator.sync_failed", partition=shard.partition, error=str(error))
            shard.status = ShardStatus.FAILED
        w.promise.set(ErrorCode.KAFKA_STORAGE_ERROR)

    def pending_records(self) -> Iterator[Record]:
        """Records written but not yet durable (nor replayed), in write order.

        Why computed rather than counted on every write: only a few readers
        ask (OffsetFetch ``require_stable``, the expiry sweep, a group's
        removal), and the writes in flight are the few of the current fsync
        rounds.
        """
        for w in self._in_flight:
            yield from w.records

    def has_pending_writes(self) -> bool:
        return bool(self._in_flight)


class CoordinatorRuntime:
    """Every shard's writer, the staging of the current turn, and the answers it holds.

    The server's whole interface: ``open_turn`` when it starts answering a
    read, ``turn_open`` / ``hold`` to hold a connection's answers,
    ``flush_turn`` before an answer must leave mid-turn, ``end_turn`` (queued
    by ``open_turn``) to append and release; ``on_writes_failed`` is the
    server's callback for a turn whose records could not be appended.
    """

    def __init__(self) -> None:
        self.open = False  # staging: writes are staged rather than appended
        self._staged: dict[ShardWriter, None] = {}
        self.failed: list[int] = []  # partitions whose staged writes failed before the flush
        self._holders: list[AnswerHolder] | None = None  # None: no turn open
        self.on_writes_failed: Callable[[Exception, list[AnswerHolder]], None] | None = None

    def writer(self, shard: CoordinatorShard, log_: Any,
               encode: Callable[[list[Record]], list[EncodedRecord]], now_ms: Callable[[], int],
               *, await_fsync: bool = False,
               on_accept: Callable[[list[Record]], None] | None = None,
               on_txn_append: Callable[[TxnBatch, int, list[EncodedRecord]], None] | None = None) -> ShardWriter:
        """A shard joins the runtime: the writer its handlers' records go through."""
        return ShardWriter(self, shard, log_, encode, now_ms, await_fsync=await_fsync, on_accept=on_accept,
                           on_txn_append=on_txn_append)

    # --- staging ---------------------------------------------------------------------------

    def begin(self) -> None:
        """Stage writes from now on, until ``end``."""
        self.open = True

    def stage(self, writer: ShardWriter) -> None:
        self._staged[writer] = None

    def flush(self) -> None:
        """Append everything staged so far; raises StagedWriteFailed if any shard could not."""
        if not self._staged and not self.failed:
            return
        writers = list(self._staged)
        self._staged.clear()
        failed = [w.shard.partition for w in writers if not w.flush_staged()] + self.failed
        self.failed = []
        if failed:
            raise StagedWriteFailed(f"partitions {failed} could not append their writes")

    def end(self) -> None:
        """Stop staging: flush (raising like ``flush``); later writes go straight to the log."""
        self.open = False
        self.flush()

    # --- the turn: every read of one event-loop iteration, answered together -----------------

    @property
    def turn_open(self) -> bool:
        return self._holders is not None

    def open_turn(self) -> None:
        """Open a turn for this loop iteration's reads (once); ``end_turn`` runs after them.

        The callback is queued behind the iteration's I/O callbacks, so it
        runs once they are all done, before anything queued after them.
        """
        if self._holders is None:
            self._holders = []
            self.begin()
            asyncio.get_running_loop().call_soon(self.end_turn)

    def hold(self, holder: AnswerHolder) -> None:
        """``holder`` has answers to send once the turn's records are in the log."""
        self._holders.append(holder)

    def end_turn(self) -> None:
        """Append what the turn staged, then release every answer held for it."""
        held, self._holders = self._holders, None
        if held is None:
            return
        try:
            self.end()
        except Exception as exc:
            self._failed(exc, held)
            return
        for holder in held:
            holder.send_held()

    def flush_turn(self) -> bool:
        """Append what the turn staged so far (an answer must go out now); False if that failed."""
        try:
            self.flush()
        except Exception as exc:
            held, self._holders = self._holders or [], []
            self._failed(exc, held)
            return False
        return True

    def _failed(self, exc: Exception, held: list[AnswerHolder]) -> None:
        if self.on_writes_failed is not None:
            self.on_writes_failed(exc, held)
