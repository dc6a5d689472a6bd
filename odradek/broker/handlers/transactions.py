"""Transactional APIs: InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26), DescribeTransactions (65), ListTransactions (66).

Wire glue only: decoded request -> transaction coordinator -> response for the
request's version.  The coordinator answers Kafka's current codes; older
versions get what Kafka's ``KafkaApis`` rewrites them to (PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH for InitProducerId v0-3 and for
AddPartitions/AddOffsets/EndTxn v0-1).  InitProducerId without a
transactional id is the idempotent producer's: a fresh producer id, epoch 0.

Transactions v2 (KIP-890) is chosen by the request version, as Kafka's
``TransactionVersion.transactionVersionForEndTxn`` does: EndTxn v5 ends with
an epoch bump and answers the producer id and epoch to continue with;
AddPartitionsToTxn v4+ is the broker-to-broker batch (each transaction
verified, or added to as a v2 client's).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ..dataplane.topics import INTERNAL_TOPICS
from ..dispatch import HandlerTable, RequestContext, answer_when
from ..txn.coordinator import NEED_PRODUCER_ID, TV2, wait_promise

if TYPE_CHECKING:
    from ..dataplane import DataPlane, TopicRegistry
    from ..txn import TransactionCoordinator


class TxnServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the transaction coordinator,
    the topics, the data plane's producer ids."""

    txn_coordinator: TransactionCoordinator | None
    topics: TopicRegistry
    dataplane: DataPlane


log = structlog.get_logger("odradek.txn")

E = ErrorCode


def register(table: HandlerTable, app: TxnServices) -> None:
    table.register(22, partial(init_producer_id, app))
    table.register(24, partial(add_partitions_to_txn, app))
    table.register(25, partial(add_offsets_to_txn, app))
    table.register(26, partial(end_txn, app))
    table.register(65, partial(describe_transactions, app))
    table.register(66, partial(list_transactions, app))


def _fenced(error: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED as versions older than ``first_fenced_version`` know it (47)."""
    if error == E.PRODUCER_FENCED and version < first_fenced_version:
        return E.INVALID_PRODUCER_EPOCH
    return error


# --- InitProducerId ----------------------------------------------------------------------

def _init_response(error: ErrorCode, pid: int = -1, epoch: int = -1) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": pid, "producer_epoch": epoch}


async def _allocate(app: TxnServices) -> int | None:
    try:
        return await app.dataplane.producer_ids.allocate()
    except OSError as exc:
        log.error("producer_id.allocate_failed", error=str(exc))
        return None


async def init_producer_id(app: TxnServices, ctx: RequestContext, req) -> dict:
    """Kafka's ``handleInitProducerIdRequest``: the pid/epoch pair check, then the idempotent
    or the transactional path."""
    pid, epoch = req.producer_id, req.producer_epoch
    if (pid == -1) != (epoch == -1):
        return _init_response(E.INVALID_REQUEST)
    tid = req.transactional_id
    if tid is None:  # idempotent producer: always a new id, whatever it sent
        new = await _allocate(app)
        if new is None:
            return _init_response(E.KAFKA_STORAGE_ERROR)
        return _init_response(E.NONE, new, 0)
    coordinator = app.txn_coordinator
    if coordinator is None:
        return _init_response(E.COORDINATOR_NOT_AVAILABLE)
    timeout = req.transaction_timeout_ms
    answer = coordinator.init_producer_id(tid, timeout, pid, epoch)
    if answer is NEED_PRODUCER_ID:
        fresh = await _allocate(app)
        if fresh is None:
            return _init_response(E.COORDINATOR_NOT_AVAILABLE)
        answer = coordinator.init_producer_id(tid, timeout, pid, epoch, fresh_pid=fresh)
        if answer is NEED_PRODUCER_ID:  # cannot happen: a fresh id was given
            return _init_response(E.UNKNOWN_SERVER_ERROR)
    error, new_pid, new_epoch = answer.result() if answer.done else await wait_promise(answer)
    return _init_response(_fenced(error, ctx.api_version, 4), new_pid, new_epoch)


# --- AddPartitionsToTxn ----------------------------------------------------------------------

def _partitions_response(topics: dict[str, dict[int, ErrorCode]]) -> dict:
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": name, "results_by_partition": [{"partition_index": p, "partition_error_code": code}
                                                for p, code in parts.items()]}
        for name, parts in topics.items()]}


def _prechecked(app: TxnServices, topics, internal_allowed: bool) -> tuple[dict[str, dict[int, ErrorCode]], bool]:
    """Each requested partition with its pre-check error (internal topics 29 from clients, unknown
    3, the others then 55) and whether any failed."""
    requested: dict[str, dict[int, ErrorCode]] = {}
    for t in topics:
        parts = requested.setdefault(t.name, {})
        for p in t.partitions:
            parts[p] = E.NONE
    failed = False
    for name, parts in requested.items():
        internal = name in INTERNAL_TOPICS
        count = app.topics.partition_count(name) if internal_allowed or not internal else None
        for p in parts:
            if internal and not internal_allowed:
                parts[p] = E.TOPIC_AUTHORIZATION_FAILED
            elif count is None or not 0 <= p < count:
                parts[p] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                continue
            failed = True
    if failed:
        for parts in requested.values():
            for p, code in parts.items():
                if code == E.NONE:
                    parts[p] = E.OPERATION_NOT_ATTEMPTED
    return requested, failed


def add_partitions_to_txn(app: TxnServices, ctx: RequestContext, req):
    """Pre-checks per partition, then one coordinator answer for every partition
    (``KafkaApis.handleAddPartitionsToTxnRequest``); v4+ per transaction of the batch."""
    if ctx.api_version >= 4:
        return _add_partitions_batch(app, req)
    requested, failed = _prechecked(app, req.v3_and_below_topics, internal_allowed=False)
    if failed:
        return _partitions_response(requested)
    coordinator = app.txn_coordinator
    version = ctx.api_version

    def shape(error: ErrorCode) -> dict:
        code = _fenced(error, version, 2)
        return _partitions_response({name: dict.fromkeys(parts, code) for name, parts in requested.items()})

    if coordinator is None:
        return shape(E.COORDINATOR_NOT_AVAILABLE)
    tps = [(name, p) for name, parts in requested.items() for p in parts]
    return answer_when(coordinator.add_partitions(req.v3_and_below_transactional_id,
                                                  req.v3_and_below_producer_id,
                                                  req.v3_and_below_producer_epoch, tps), shape)


def _topic_results(topics: dict[str, dict[int, ErrorCode]]) -> list[dict]:
    return [{"name": name, "results_by_partition": [{"partition_index": p, "partition_error_code": code}
                                                    for p, code in parts.items()]}
            for name, parts in topics.items()]


async def _add_partitions_batch(app: TxnServices, req) -> dict:
    """v4+: each transaction verified (``verify_only``) or added to as a v2 client's; one result
    per transaction.  (An empty batch is answered at once; Kafka never answers it.)"""
    results = []
    for txn in req.transactions:
        requested, failed = _prechecked(app, txn.topics, internal_allowed=True)
        if not failed:
            requested = await _batch_entry(app, txn, requested)
        results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(requested)})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "results_by_transaction": results}


async def _batch_entry(app: TxnServices, txn, requested: dict[str, dict[int, ErrorCode]]) -> dict:
    coordinator = app.txn_coordinator
    tps = [(name, p) for name, parts in requested.items() for p in parts]
    if coordinator is None:
        codes = dict.fromkeys(tps, E.COORDINATOR_NOT_AVAILABLE)
    elif txn.verify_only:
        codes = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, tps)
    else:
        error = await wait_promise(coordinator.add_partitions(txn.transactional_id, txn.producer_id,
                                                              txn.producer_epoch, tps, client_tv=TV2))
        codes = dict.fromkeys(tps, error)
    return {name: {p: codes[(name, p)] for p in parts} for name, parts in requested.items()}


# --- AddOffsetsToTxn / EndTxn ------------------------------------------------------------------

def _error_response(error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error}


def add_offsets_to_txn(app: TxnServices, ctx: RequestContext, req):
    coordinator = app.txn_coordinator
    if coordinator is None:
        return _error_response(E.COORDINATOR_NOT_AVAILABLE)
    version = ctx.api_version
    return answer_when(coordinator.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch,
                                               req.group_id),
                       lambda error: _error_response(_fenced(error, version, 2)))


def end_txn(app: TxnServices, ctx: RequestContext, req):
    coordinator = app.txn_coordinator
    if coordinator is None:
        return _error_response(E.COORDINATOR_NOT_AVAILABLE)
    version = ctx.api_version
    if version >= 5:
        answer = coordinator.end_txn_v2(req.transactional_id, req.producer_id, req.producer_epoch,
                                        bool(req.committed))
        if answer is NEED_PRODUCER_ID:  # the epoch is exhausted: a new producer id first (an await)
            return _end_txn_v2(app, coordinator, req)
        return answer_when(answer, _end_txn_v2_response)
    return answer_when(coordinator.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                           bool(req.committed)),
                       lambda error: _error_response(_fenced(error, version, 2)))


def _end_txn_v2_response(answer: tuple[ErrorCode, int, int]) -> dict:
    error, pid, epoch = answer
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": pid, "producer_epoch": epoch}


async def _end_txn_v2(app: TxnServices, coordinator: TransactionCoordinator, req) -> dict:
    """EndTxn v5 (transactions v2) whose epoch is exhausted: a new producer id first, then the end
    (the answer carries that id at epoch 0)."""
    fresh = await _allocate(app)
    if fresh is None:
        return _error_response(E.COORDINATOR_NOT_AVAILABLE)
    answer = coordinator.end_txn_v2(req.transactional_id, req.producer_id, req.producer_epoch,
                                    bool(req.committed), fresh_pid=fresh)
    if answer is NEED_PRODUCER_ID:  # cannot happen: a fresh id was given
        return _error_response(E.UNKNOWN_SERVER_ERROR)
    return _end_txn_v2_response(answer.result() if answer.done else await wait_promise(answer))


# --- DescribeTransactions / ListTransactions -----------------------------------------------

def describe_transactions(app: TxnServices, ctx: RequestContext, req) -> dict:
    coordinator = app.txn_coordinator
    states = []
    for tid in req.transactional_ids:
        if coordinator is None:
            states.append({"error_code": E.COORDINATOR_NOT_AVAILABLE, "transactional_id": tid,
                           "transaction_state": "", "transaction_timeout_ms": 0,
                           "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1,
                           "topics": []})
        else:
            states.append(coordinator.describe(tid))
    return {"throttle_time_ms": 0, "transaction_states": states}


def list_transactions(app: TxnServices, ctx: RequestContext, req) -> dict:
    coordinator = app.txn_coordinator
    if coordinator is None:
        body = {"error_code": E.COORDINATOR_NOT_AVAILABLE, "unknown_state_filters": [],
                "transaction_states": []}
    else:
        duration = req.duration_filter if ctx.api_version >= 1 else -1
        pattern = req.transactional_id_pattern if ctx.api_version >= 2 else None
        body = coordinator.list_transactions(list(req.state_filters), list(req.producer_id_filters), duration,
                                             pattern)
    body["throttle_time_ms"] = 0
    return body
