"""The transaction coordinator: routing, the transactional APIs' rules, markers and sweeps.

Kafka's ``TransactionCoordinator`` (request rules), ``TransactionStateManager``
(shards, loading, the timeout and expiry sweeps) and
``TransactionMarkerChannelManager`` (markers, then the Complete record), on one
node.  A transactional id lives in ``__transaction_state`` partition
``abs(hashCode(id)) % transaction.state.log.num.partitions``.

Every state change is a record written through the shard (``TxnShard.run``)
and applied by replay once durable; while it is in flight the id's
``pending_state`` is set and any other request that would change it gets
CONCURRENT_TRANSACTIONS.  Operations answer Kafka's canonical codes
(PRODUCER_FENCED, ...); the handlers rewrite them for older request versions.

Ending a transaction follows Kafka's order: the PrepareCommit/PrepareAbort
record is durable, the caller is answered, a marker is written to every
partition of the transaction (``MarkerTarget``), and then the
CompleteCommit/CompleteAbort record.  A shard loaded with transactions in
Prepare* finishes them the same way.

Transactions v2 (KIP-890): EndTxn v5 takes the TV2 path (``end_txn_v2``,
Kafka's ``endTransaction`` for a client at TransactionVersion 2): every end
bumps the epoch (the Prepare record carries epoch+1, the markers too, and
the answer returns it; an exhausted epoch moves to a new producer id at
epoch 0 in the Complete record), an abort with nothing added is allowed, and
a retry is recognised by its epoch.  A partition added by a TV2 client
(Produce v12+, TxnOffsetCommit v5+, AddPartitionsToTxn v4+) records client
version 2.  The coordinator's own aborts (fence, timeout) use the cluster's
finalized ``transaction.version``, as Kafka's ``txnManager.transactionVersionLevel``,
which also picks the value version written (v1 from level 1).

All timers (sweeps, marker retries) go through the broker clock, so tests
move time instead of sleeping.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from ...offsets.records import partition_for
from ...protocol.errors import ErrorCode
from ...transactions.records import TopicPartition, TxnKey, TxnValue, value_version
from ...transactions.replay import NO_EPOCH, NO_PRODUCER_ID, TxnMetadata
from ...transactions.state import TxnState
from ..clock import Clock
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, CoordinatorRuntime, ShardStatus
from ..txn_contracts import MarkerTarget, TxnMarker
from .config import TxnConfig
from .shard import TxnShard

log = structlog.get_logger("odradek.txn")

S = TxnState
E = ErrorCode
INT16_MAX = 32767
EPOCH_EXHAUSTED = INT16_MAX - 1  # Kafka's TransactionMetadata.isEpochExhausted: >= Short.MaxValue - 1
TV2 = 2  # TransactionVersion.TV_2: supportsEpochBump
COORDINATOR_EPOCH = 0  # one node, never re-elected: a constant (non-decreasing) coordinator epoch
NEED_PRODUCER_ID = object()  # InitProducerId needs a fresh producer id: allocate, then call again

# marker errors that mean "try again later" (Kafka's TransactionMarkerRequestCompletionHandler)
RETRIABLE_MARKER_ERRORS = frozenset({
    E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR, E.COORDINATOR_LOAD_IN_PROGRESS,
    E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.LEADER_NOT_AVAILABLE, E.NETWORK_EXCEPTION,
})


def exhausted(epoch: int) -> bool:
    return epoch >= EPOCH_EXHAUSTED


def append_error(error: ErrorCode) -> ErrorCode:
    """A failed ``__transaction_state`` append as the coordinator reports it (Kafka's mapping)."""
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_RECORD):
        return E.UNKNOWN_SERVER_ERROR
    return E.COORDINATOR_NOT_AVAILABLE


def _then(promise: Promise, fn: Callable[[Any], Any]) -> Promise:
    out = Promise()
    promise.add_done_callback(lambda result: out.set(fn(result)))
    return out


class TransactionCoordinator:
    """Every ``__transaction_state`` shard and the rules of the transactional APIs."""

    def __init__(self, clock: Clock, config: TxnConfig, logs: list[Any], *,
                 markers: MarkerTarget, group_partition: Callable[[str], int],
                 runtime: CoordinatorRuntime | None = None, await_fsync: bool = False,
                 offsets_topic: str = "__consumer_offsets",
                 transaction_version: Callable[[], int] = lambda: 0) -> None:
        """``logs[p]`` is the Log of ``__transaction_state-p``; ``markers`` writes a marker to a
        partition; ``group_partition(group)`` is the group's ``__consumer_offsets`` partition;
        ``transaction_version()`` the cluster's finalized ``transaction.version``."""
        if len(logs) != config.num_partitions:
            raise ValueError("one log per __transaction_state partition")
        self.clock = clock
        self.config = config
        self.markers = markers
        self.group_partition = group_partition
        self.offsets_topic = offsets_topic
        self.runtime = runtime if runtime is not None else CoordinatorRuntime()
        self.transaction_version = transaction_version
        self.shards = [TxnShard(p, lg, clock, runtime=self.runtime, await_fsync=await_fsync,
                                value_version=lambda: value_version(transaction_version()))
                       for p, lg in enumerate(logs)]
        # transactional id -> partitions whose marker is still to be written (Prepare* only)
        self.pending_markers: dict[str, set[TopicPartition]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._timers: dict[str, Any] = {}  # sweep name -> its next firing
        self._stopped = False
        # markers in parallel only when appends wait for fsync (see ``_complete``)
        self.parallel_markers = await_fsync

    # --- routing ----------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def shard_for(self, transactional_id: str) -> TxnShard:
        return self.shards[self.partition_for(transactional_id)]

    def _shard(self, transactional_id: str) -> tuple[TxnShard | None, ErrorCode]:
        shard = self.shard_for(transactional_id)
        if shard.status is ShardStatus.ACTIVE:
            return shard, E.NONE
        if shard.status is ShardStatus.LOADING:
            return None, E.COORDINATOR_LOAD_IN_PROGRESS
        return None, E.NOT_COORDINATOR

    def loading(self) -> bool:
        return any(s.status is ShardStatus.LOADING for s in self.shards)

    # --- writing a transition -----------------------------------------------------------------

    def _transition(self, shard: TxnShard, meta: TxnMetadata, value: TxnValue | None) -> Promise:
        """Write ``meta``'s next record (None: a tombstone); a promise of NONE or the mapped error.

        The id is pending meanwhile; replay clears that on success, the failure
        path here (and forgets an id whose first record never made it).
        """
        meta.pending_state = S.DEAD if value is None else value.state

        def failed(_response: Any, error: ErrorCode) -> ErrorCode:
            meta.pending_state = None
            if meta.last_update_ms == -1 and shard.txns.get(meta.transactional_id) is meta:
                del shard.txns[meta.transactional_id]
            log.warning("txn.write_failed", transactional_id=meta.transactional_id, error=error.name)
            return append_error(error)

        result = CoordinatorResult([(TxnKey(meta.transactional_id), value)], E.NONE, failed)
        return shard.run(result)

    # --- InitProducerId -------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_pid: int = NO_PRODUCER_ID,
                         expected_epoch: int = NO_EPOCH, fresh_pid: int | None = None) -> Any:
        """InitProducerId with a transactional id (Kafka's ``handleInitProducerId``).

        Returns a promise of ``(error, producer_id, epoch)``, or NEED_PRODUCER_ID
        when a new producer id is needed first (then call again with ``fresh_pid``).
        """
        if transactional_id == "":
            return _init_answer(E.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return _init_answer(E.INVALID_TRANSACTION_TIMEOUT)
        shard, error = self._shard(transactional_id)
        if shard is None:
            return _init_answer(error)
        now = self.clock.now_ms()
        meta = shard.txns.get(transactional_id)
        if meta is None:
            if fresh_pid is None:
                return NEED_PRODUCER_ID
            meta = shard.txns[transactional_id] = TxnMetadata(
                transactional_id, producer_id=fresh_pid, producer_epoch=NO_EPOCH, timeout_ms=timeout_ms,
                state=S.EMPTY)
            fresh_pid = None
        if meta.pending_state is not None:
            return _init_answer(E.CONCURRENT_TRANSACTIONS)
        has_expected = expected_pid != NO_PRODUCER_ID
        if has_expected and not (meta.producer_epoch == NO_EPOCH or expected_pid == meta.producer_id or (
                expected_pid == meta.previous_producer_id and exhausted(expected_epoch))):
            return _init_answer(E.PRODUCER_FENCED)
        state = meta.state
        if state.is_prepare:
            return _init_answer(E.CONCURRENT_TRANSACTIONS)
        if state is S.ONGOING:
            # fence: abort the open transaction with a bumped epoch; the caller retries (51)
            return _then(self._fence_and_abort(shard, meta),
                         lambda error: _init_tuple(E.CONCURRENT_TRANSACTIONS if error is E.NONE else error))
        if state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return _init_answer(E.INVALID_TXN_STATE)
        if exhausted(meta.producer_epoch) and (not has_expected or expected_epoch == meta.producer_epoch):
            if fresh_pid is None:
                return NEED_PRODUCER_ID
            # epoch overflow: a new producer id at epoch 0 (``prepareProducerIdRotation``)
            new_pid, new_epoch = fresh_pid, 0
            last_epoch = meta.producer_epoch if has_expected else NO_EPOCH
            previous_pid = meta.producer_id
        else:
            bumped = meta.producer_epoch + 1
            if not has_expected:
                new_epoch, last_epoch = bumped, NO_EPOCH
            elif meta.producer_epoch == NO_EPOCH or expected_epoch == meta.producer_epoch:
                new_epoch, last_epoch = bumped, meta.producer_epoch
            elif expected_epoch == meta.last_epoch:  # a retry whose answer was lost: no bump
                new_epoch, last_epoch = meta.producer_epoch, meta.last_epoch
            else:
                return _init_answer(E.PRODUCER_FENCED)
            new_pid, previous_pid = meta.producer_id, meta.previous_producer_id
        value = meta.value(state=S.EMPTY, producer_id=new_pid, producer_epoch=new_epoch,
                           timeout_ms=timeout_ms, partitions=set(), now=now, start_ms=-1)

        def done(error: ErrorCode) -> tuple[ErrorCode, int, int]:
            if error is not E.NONE:
                return _init_tuple(error)
            meta.last_epoch = last_epoch
            meta.previous_producer_id = previous_pid
            return E.NONE, new_pid, new_epoch

        return _then(self._transition(shard, meta, value), done)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_tv: int = 0) -> Promise:
        """AddPartitionsToTxn's coordinator part (``handleAddPartitionsToTransaction``): a promise
        of one error code for the whole request.  ``client_tv``: 2 for a transactions-v2 client
        (an implicit add, AddPartitionsToTxn v4+), recorded in the Ongoing record."""
        if transactional_id == "":
            return Promise.resolved(E.INVALID_REQUEST)
        shard, meta, error = self._lookup(transactional_id, producer_id)
        if meta is None:
            return Promise.resolved(error)
        if meta.producer_epoch != producer_epoch:
            return Promise.resolved(E.PRODUCER_FENCED)
        if meta.pending_state is not None or meta.state.is_prepare:
            return Promise.resolved(E.CONCURRENT_TRANSACTIONS)
        wanted = set(partitions)
        if meta.state is S.ONGOING and wanted <= meta.partitions:
            return Promise.resolved(E.NONE)
        if meta.state not in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return Promise.resolved(E.INVALID_TXN_STATE)
        now = self.clock.now_ms()
        if meta.state is S.ONGOING:
            value = meta.value(state=S.ONGOING, partitions=meta.partitions | wanted, now=now, client_tv=client_tv)
        else:  # a new transaction starts with its first partition
            value = meta.value(state=S.ONGOING, partitions=wanted, now=now, start_ms=now, client_tv=client_tv)
        return self._transition(shard, meta, value)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    group_id: str, client_tv: int = 0) -> Promise:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        if transactional_id == "":
            return Promise.resolved(E.INVALID_REQUEST)
        partition = (self.offsets_topic, self.group_partition(group_id))
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [partition], client_tv)

    def _lookup(self, transactional_id: str, producer_id: int,
                allow_previous: bool = False) -> tuple[TxnShard | None, TxnMetadata | None, ErrorCode]:
        """The id's shard and metadata, checked for load state, existence and producer id
        (``allow_previous``: the caller checks the producer id itself)."""
        shard, error = self._shard(transactional_id)
        if shard is None:
            return None, None, error
        meta = shard.txns.get(transactional_id)
        if meta is None or meta.last_update_ms == -1 or (meta.producer_id != producer_id and not allow_previous):
            return shard, None, E.INVALID_PRODUCER_ID_MAPPING
        return shard, meta, E.NONE

    # --- EndTxn -------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool) -> Promise:
        """EndTxn on the classic protocol (``handleEndTransaction``, TV1): a promise of the error."""
        if transactional_id == "":
            return Promise.resolved(E.INVALID_REQUEST)
        shard, meta, error = self._lookup(transactional_id, producer_id)
        if meta is None:
            return Promise.resolved(error)
        if producer_epoch != meta.producer_epoch:
            return Promise.resolved(E.PRODUCER_FENCED)
        if meta.pending_state is not None:
            return Promise.resolved(E.CONCURRENT_TRANSACTIONS)
        state = meta.state
        if state is S.ONGOING:
            return self._end(shard, meta, commit)
        if state is S.PREPARE_COMMIT:
            return Promise.resolved(E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        if state is S.PREPARE_ABORT:
            return Promise.resolved(E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS)
        if state is S.COMPLETE_COMMIT:
            return Promise.resolved(E.NONE if commit else E.INVALID_TXN_STATE)
        if state is S.COMPLETE_ABORT:
            return Promise.resolved(E.INVALID_TXN_STATE if commit else E.NONE)
        return Promise.resolved(E.INVALID_TXN_STATE)  # Empty (nothing to end), Dead

    def end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                   fresh_pid: int | None = None) -> Any:
        """EndTxn v5 (Kafka's ``endTransaction`` for a TransactionVersion 2 client): a promise of
        ``(error, producer_id, epoch)`` to continue with, or NEED_PRODUCER_ID when the epoch is
        exhausted and a new producer id is needed first (then call again with ``fresh_pid``)."""
        if transactional_id == "":
            return _init_answer(E.INVALID_REQUEST)
        shard, meta, error = self._lookup(transactional_id, producer_id, allow_previous=True)
        if meta is None:
            return _init_answer(error)
        retry_on_overflow = (meta.previous_producer_id == producer_id and producer_epoch == EPOCH_EXHAUSTED
                             and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_epoch == producer_epoch + 1
        retry = retry_on_bump or retry_on_overflow
        state = meta.state
        if state.is_prepare:
            valid = retry_on_bump
        elif state.is_complete:
            valid = retry or producer_epoch == meta.producer_epoch
        else:
            valid = producer_epoch == meta.producer_epoch
        if meta.pending_state is not None:
            return _init_answer(E.CONCURRENT_TRANSACTIONS)
        if meta.producer_id != producer_id and not retry_on_overflow:
            return _init_answer(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return _init_answer(E.PRODUCER_FENCED)
        current = Promise.resolved((E.NONE, meta.producer_id, meta.producer_epoch))
        if state is S.ONGOING:
            return self._end_v2(shard, meta, commit, fresh_pid)
        if state is S.COMPLETE_COMMIT and commit or state is S.COMPLETE_ABORT and not commit:
            if retry:
                return current
            if commit:
                return _init_answer(E.INVALID_TXN_STATE)
        if state.is_prepare:
            same = (state is S.PREPARE_COMMIT) == commit
            return _init_answer(E.CONCURRENT_TRANSACTIONS if same else E.INVALID_TXN_STATE)
        if not commit and (state is S.EMPTY or state.is_complete) and not retry:
            return self._end_v2(shard, meta, commit, fresh_pid, nothing_added=True)
        return _init_answer(E.INVALID_TXN_STATE)

    def _end_v2(self, shard: TxnShard, meta: TxnMetadata, commit: bool, fresh_pid: int | None,
                nothing_added: bool = False, fence: bool = False) -> Any:
        """``prepareAbortOrCommit`` at TV2: the epoch bumped (a new producer id allocated for the
        Complete record when it is exhausted, not on a fence), then ``_end``; a promise of the
        (error, producer id, epoch) the Complete record will carry."""
        next_pid = NO_PRODUCER_ID
        if not fence and exhausted(meta.producer_epoch):
            if fresh_pid is None:
                return NEED_PRODUCER_ID
            next_pid = fresh_pid
        epoch = meta.producer_epoch + 1
        now = self.clock.now_ms()
        answer = (next_pid, 0) if next_pid != NO_PRODUCER_ID else (meta.producer_id, epoch)
        return _then(self._end(shard, meta, commit, epoch, tv=TV2, next_pid=next_pid,
                               start_ms=now if nothing_added else None),
                     lambda error: (E.NONE, *answer) if error is E.NONE else _init_tuple(error))

    def _end(self, shard: TxnShard, meta: TxnMetadata, commit: bool, epoch: int | None = None,
             tv: int = 0, next_pid: int = NO_PRODUCER_ID, start_ms: int | None = None) -> Promise:
        """Write Prepare*; once durable start the markers.  A promise of NONE or the append error.
        ``tv``: the transaction version of this end (2: the epoch is bumped, ``epoch``)."""
        value = meta.value(state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, producer_epoch=epoch,
                           now=self.clock.now_ms(), start_ms=start_ms,
                           client_tv=tv)  # the classic path records TV_0 (endTransactionWithTV1)
        old_epoch = meta.producer_epoch

        def prepared(error: ErrorCode) -> ErrorCode:
            if error is E.NONE:
                if tv >= TV2:  # lastProducerEpoch: the epoch before the bump
                    meta.last_epoch, meta.next_producer_id = old_epoch, next_pid
                elif epoch is not None:
                    meta.last_epoch = NO_EPOCH
                self._start_completion(shard, meta)
            return error

        return _then(self._transition(shard, meta, value), prepared)

    def _fence_and_abort(self, shard: TxnShard, meta: TxnMetadata) -> Promise:
        """Abort the open transaction with the epoch raised by one, which fences its producer
        (``prepareFenceProducerEpoch``; the in-memory PrepareEpochFence step is never written).
        The abort is at the cluster's transaction version (TV2: recorded as a v2 end)."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < INT16_MAX else meta.producer_epoch
        log.info("txn.fence", transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                 epoch=epoch)
        if self.transaction_version() >= TV2 and meta.producer_epoch < INT16_MAX:
            return _then(self._end_v2(shard, meta, False, None, fence=True), lambda answer: answer[0])
        return self._end(shard, meta, False, epoch)

    # --- markers, then the Complete record ---------------------------------------------------

    def _start_completion(self, shard: TxnShard, meta: TxnMetadata) -> None:
        if self._stopped:
            return
        self.pending_markers[meta.transactional_id] = set(meta.partitions)
        task = asyncio.get_running_loop().create_task(self._complete(shard, meta))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, shard: TxnShard, meta: TxnMetadata) -> None:
        """Markers to every partition, then CompleteCommit/CompleteAbort.

        The task starts right after the turn that answered EndTxn.  Local
        appends that need no fsync wait never suspend, so one after the other
        they all land, with the Complete record, in that same loop iteration:
        the client's next AddPartitionsToTxn does not meet the window in which
        Kafka answers CONCURRENT_TRANSACTIONS (its clients back off 20-100 ms).
        When appends wait for fsync (``parallel_markers``) the markers go in
        parallel, as Kafka sends them, so one transaction costs one fsync round.
        """
        tid = meta.transactional_id
        commit = meta.state is S.PREPARE_COMMIT
        marker = TxnMarker(meta.producer_id, meta.producer_epoch, COORDINATOR_EPOCH, commit, meta.client_tv)
        pending = self.pending_markers.get(tid, set())
        try:
            if self.parallel_markers:
                await asyncio.gather(*(self._send_marker(tid, tp, marker, pending) for tp in sorted(pending)))
            else:
                for tp in sorted(pending):
                    await self._send_marker(tid, tp, marker, pending)
            target = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
            while not self._stopped:
                if shard.status is not ShardStatus.ACTIVE or shard.txns.get(tid) is not meta \
                        or meta.state is not (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                    return  # unloaded or superseded: a reload finishes it
                value = self._complete_value(meta, target)
                old_pid = meta.producer_id
                error = await wait_promise(self._transition(shard, meta, value))
                if error is E.NONE:
                    if old_pid != meta.producer_id:  # TV2 epoch overflow: a new producer id
                        meta.previous_producer_id = old_pid
                    meta.next_producer_id = NO_PRODUCER_ID
                    log.debug("txn.completed", transactional_id=tid, commit=commit)
                    return
                await self._sleep(self.config.marker_retry_backoff_ms)
        finally:
            if self.pending_markers.get(tid) is pending:
                del self.pending_markers[tid]

    def _complete_value(self, meta: TxnMetadata, target: TxnState) -> TxnValue:
        """``prepareComplete``: a TV2 end that exhausted the epoch continues with the next
        producer id at epoch 0."""
        if meta.client_tv >= TV2 and meta.next_producer_id != NO_PRODUCER_ID:
            return meta.value(state=target, producer_id=meta.next_producer_id, producer_epoch=0,
                              partitions=set(), now=self.clock.now_ms())
        return meta.value(state=target, partitions=set(), now=self.clock.now_ms())

    async def _send_marker(self, tid: str, tp: TopicPartition, marker: TxnMarker,
                           pending: set[TopicPartition]) -> None:
        topic, partition = tp
        while not self._stopped:
            try:
                error = await self.markers.write_txn_marker(topic, partition, marker)
            except Exception as exc:  # a bug on the other side must not leave the txn stuck
                log.error("txn.marker_failed", transactional_id=tid, topic=topic, partition=partition,
                          error=repr(exc))
                error = E.UNKNOWN_SERVER_ERROR
            if error is E.NONE or error == E.NONE:
                break
            if error == E.UNKNOWN_TOPIC_OR_PARTITION:
                log.info("txn.marker_partition_gone", transactional_id=tid, topic=topic, partition=partition)
                break
            if error not in RETRIABLE_MARKER_ERRORS and error != E.UNKNOWN_SERVER_ERROR:
                # superseded (47/52) or unsupported (43/35): Kafka stops sending to this partition
                log.warning("txn.marker_dropped", transactional_id=tid, topic=topic, partition=partition,
                            error=ErrorCode(error).name)
                break
            await self._sleep(self.config.marker_retry_backoff_ms)
        pending.discard(tp)

    # --- the data plane's check (KIP-890 verification, locally) ------------------------------

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> ErrorCode:
        """Is ``(topic, partition)`` in this producer's ongoing transaction?  (``TxnVerifier``)

        NONE if so; INVALID_TXN_STATE if not (Produce v11+ callers answer
        TRANSACTION_ABORTABLE); PRODUCER_FENCED for another epoch;
        CONCURRENT_TRANSACTIONS while it completes; else the lookup error.
        Pending writes are ignored, as Kafka's verify-only path ignores them.
        """
        shard, meta, error = self._lookup(transactional_id, producer_id)
        if meta is None:
            return error
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if meta.state.is_prepare:
            return E.CONCURRENT_TRANSACTIONS
        if meta.state is S.ONGOING and (topic, partition) in meta.partitions:
            return E.NONE
        return E.INVALID_TXN_STATE

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with ``verify_only`` (``handleVerifyPartitionsInTransaction``):
        per partition NONE or TRANSACTION_ABORTABLE, or one coordinator error for all."""
        wanted = list(partitions)
        if transactional_id == "":
            return dict.fromkeys(wanted, E.INVALID_REQUEST)
        out = {}
        for topic, partition in wanted:
            code = self.verify_partition(transactional_id, producer_id, producer_epoch, topic, partition)
            if code not in (E.NONE, E.INVALID_TXN_STATE):
                return dict.fromkeys(wanted, code)
            out[(topic, partition)] = E.TRANSACTION_ABORTABLE if code == E.INVALID_TXN_STATE else E.NONE
        return out

    # --- DescribeTransactions / ListTransactions ---------------------------------------------

    def describe(self, transactional_id: str) -> dict:
        """One DescribeTransactions entry (``TransactionStateManager`` as Kafka's describe reads it)."""
        entry = {"error_code": E.NONE, "transactional_id": transactional_id, "transaction_state": "",
                 "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                 "producer_epoch": -1, "topics": []}
        if not transactional_id:
            entry["error_code"] = E.INVALID_REQUEST
            return entry
        shard, error = self._shard(transactional_id)
        if shard is None:
            entry["error_code"] = error
            return entry
        meta = shard.txns.get(transactional_id)
        if meta is None or meta.state is S.DEAD or meta.pending_state is S.DEAD:
            entry["error_code"] = E.TRANSACTIONAL_ID_NOT_FOUND
            return entry
        partitions = self.pending_markers.get(transactional_id, meta.partitions) \
            if meta.state.is_prepare else meta.partitions
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            topics.setdefault(topic, []).append(p)
        entry.update(transaction_state=meta.state.kafka_name, transaction_timeout_ms=meta.timeout_ms,
                     transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
                     producer_epoch=meta.producer_epoch,
                     topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()])
        return entry

    def list_transactions(self, state_filters: list[str], producer_id_filters: list[int],
                          duration_filter_ms: int = -1, id_pattern: str | None = None) -> dict:
        """ListTransactions (``listTransactionStates``): error, unknown filters, matching ids.

        ``id_pattern`` (v2, KIP-1152) must match the whole transactional id (Kafka's RE2J
        ``matcher(id).matches()``); null or empty filters nothing, one that does not compile is
        INVALID_REGULAR_EXPRESSION for the whole answer."""
        if self.loading():
            return {"error_code": E.COORDINATOR_LOAD_IN_PROGRESS, "unknown_state_filters": [],
                    "transaction_states": []}
        try:
            pattern = _re2_pattern(id_pattern) if id_pattern else None
        except re.error:
            return {"error_code": E.INVALID_REGULAR_EXPRESSION, "unknown_state_filters": [],
                    "transaction_states": []}
        states: set[TxnState] = set()
        unknown = []
        for name in state_filters:
            state = TxnState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        pids = set(producer_id_filters)
        now = self.clock.now_ms()
        out = []
        for shard in self.shards:
            if shard.status is not ShardStatus.ACTIVE:
                continue
            for tid, meta in sorted(shard.txns.items()):
                if meta.state is S.DEAD or meta.last_update_ms == -1:
                    continue
                if pids and meta.producer_id not in pids:
                    continue
                if state_filters and meta.state not in states:
                    continue
                if duration_filter_ms >= 0 and now - meta.start_ms <= duration_filter_ms:
                    continue
                if pattern is not None and pattern.fullmatch(tid) is None:
                    continue
                out.append({"transactional_id": tid, "producer_id": meta.producer_id,
                            "transaction_state": meta.state.kafka_name})
        return {"error_code": E.NONE, "unknown_state_filters": unknown, "transaction_states": out}

    # --- loading and the sweeps ---------------------------------------------------------------

    async def load(self) -> None:
        """Replay every shard; then finish what a crash left in Prepare*, and start the sweeps."""
        self._arm(self.config.abort_timed_out_interval_ms, self.abort_timed_out)
        self._arm(self.config.remove_expired_interval_ms, self.remove_expired)
        await asyncio.gather(*(self._load_shard(s) for s in self.shards))

    async def _load_shard(self, shard: TxnShard) -> None:
        await shard.load()
        for meta in list(shard.txns.values()):
            if meta.state.is_prepare:
                log.info("txn.resume_completion", transactional_id=meta.transactional_id,
                         state=meta.state.kafka_name)
                self._start_completion(shard, meta)

    def _arm(self, interval: int, sweep: Callable[[], Any]) -> None:
        if self._stopped:
            return

        def fire() -> None:
            if self._stopped:
                return
            try:
                sweep()
            except Exception as exc:  # a sweep's bug must not stop the next sweeps
                log.error("txn.sweep_failed", sweep=sweep.__name__, error=repr(exc))

        self._timers[sweep.__name__] = self.clock.call_every(interval, fire)

    def abort_timed_out(self) -> int:
        """Abort (and fence) every Ongoing transaction past its timeout (``abortTimedOutTransactions``)."""
        now = self.clock.now_ms()
        count = 0
        for shard, meta in self._settled_txns():
            if meta.state is S.ONGOING and meta.start_ms + meta.timeout_ms < now:
                log.info("txn.timed_out", transactional_id=meta.transactional_id,
                         producer_id=meta.producer_id, epoch=meta.producer_epoch)
                self._fence_and_abort(shard, meta)
                count += 1
        return count

    def remove_expired(self) -> int:
        """Tombstone ids idle longer than ``transactional.id.expiration.ms`` (Empty/Complete* only)."""
        now = self.clock.now_ms()
        count = 0
        for shard, meta in self._settled_txns():
            if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and meta.last_update_ms != -1 \
                    and meta.last_update_ms + self.config.id_expiration_ms <= now:
                log.info("txn.id_expired", transactional_id=meta.transactional_id)
                self._transition(shard, meta, None)
                count += 1
        return count

    def _settled_txns(self) -> list[tuple[TxnShard, TxnMetadata]]:
        """What the sweeps look at: every id of an active shard with no transition in flight
        (a snapshot, since a sweep's transitions change the shards' maps)."""
        return [(shard, meta) for shard in self.shards if shard.status is ShardStatus.ACTIVE
                for meta in list(shard.txns.values()) if meta.pending_state is None]

    async def _sleep(self, ms: int) -> None:
        """Wait ``ms`` on the broker clock (tests move it)."""
        fut = asyncio.get_running_loop().create_future()
        handle = self.clock.call_at(self.clock.now_ms() + ms,
                                    lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            handle.cancel()

    def unload(self) -> None:
        """Stop answering at once (NOT_COORDINATOR) and start nothing new; ``stop`` then ends
        what runs.  A test's reset replaces the coordinator this way, without yielding."""
        self._stopped = True
        for shard in self.shards:
            shard.status = ShardStatus.FAILED

    async def stop(self) -> None:
        self._stopped = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def idle(self) -> None:
        """Until no completion is under way (tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _init_tuple(error: ErrorCode) -> tuple[ErrorCode, int, int]:
    return error, NO_PRODUCER_ID, NO_EPOCH


def _init_answer(error: ErrorCode) -> Promise:
    return Promise.resolved(_init_tuple(error))


def wait_promise(promise: Promise) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    promise.add_done_callback(lambda result: fut.done() or fut.set_result(result))
    return fut


# what RE2 (Kafka's RE2J) refuses and Python's re accepts: backreferences and lookaround
_NOT_RE2 = re.compile(r"\\[1-9]|\(\?P=|\(\?[=!]|\(\?<[=!]")


def _re2_pattern(text: str) -> re.Pattern:
    """``text`` compiled as RE2J would accept it: a backreference or a lookaround does not compile
    there (and is what makes a match slower than linear here)."""
    if _NOT_RE2.search(text):
        raise re.error(f"not an RE2 pattern: {text}")
    return re.compile(text)
