"""Produce (v0-v13); InitProducerId is served with the transactional APIs (``transactions.py``).

Produce v0-2 carry magic 0/1 message sets: they are up-converted to one
magic-2 batch before validation (``protocol/record_conversion.py``).

Transactional batches (Kafka's ``KafkaApis.handleProduceRequest`` and
``ReplicaManager.appendRecords``): a request holding any needs a
``transactional_id`` (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the
whole request, as Kafka's authorisation check answers) and may carry only one
producer id (else INVALID_PRODUCER_ID_MAPPING); each partition is verified
with the transaction coordinator before the producer's first batch of a
transaction there (``DataPlane.append_now``); from v12 (transactions v2) such a
partition is first added to the transaction, as the producer no longer sends
AddPartitionsToTxn (``dataplane/implicit_add.py``).  Idempotent producers: ids from
InitProducerId, sequence checks and dedupe on Produce.  acks=0 gets no
response at all, as clients expect (errors are logged; Kafka would close the
connection).

Produce v13 names topics by id (KIP-516): each is resolved to its name first, as
``KafkaApis.handleProduceRequest`` does through ``metadataCache.getTopicName``; an id no
topic has (the zero uuid included) is UNKNOWN_TOPIC_ID for its partitions, never
auto-created, and the answer is keyed by the request's ids.  v10's leader hints (KIP-951)
go only beside NOT_LEADER_OR_FOLLOWER, which this one always-leading node never answers
itself; v12 has v11's layout, and in a transaction adds its partitions (above).
"""

from __future__ import annotations

import asyncio
import struct
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.record_conversion import is_legacy, up_convert
from ...protocol.records import (
    CorruptRecordError,
)
from ...storage.log import Log
from ..dataplane import AppendResult
from ..dataplane.batches import BatchRejected, Prechecked, is_heavy
from ..dataplane.implicit_add import (
    IMPLICIT_ADD_FROM_VERSION,
    add_implicitly,
    partitions_to_add,
    transactional_producer,
)
from ..dataplane.topics import INTERNAL_TOPICS, TopicError
from ..dispatch import NO_RESPONSE, HandlerTable, RequestContext

if TYPE_CHECKING:
    from ...storage.log_manager import LogManager
    from ..config import Config
    from ..dataplane import DataPlane, TopicRegistry
    from ..txn import TransactionCoordinator


class ProduceServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the topics and the data
    plane's appends."""

    config: Config
    topics: TopicRegistry
    dataplane: DataPlane
    logs: LogManager  # a new partition's config before its log exists
    txn_coordinator: TransactionCoordinator | None  # verifies a transactional batch's partition (KIP-890)
    cluster_id: str  # the internal topics' derived ids (``TopicRegistry.name_by_id``)


log = structlog.get_logger("odradek.produce")

TXN_ERROR = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
TOPIC_ID_VERSION = 13  # Produce names topics by id from here on (KIP-516)
UNKNOWN_ID = (ErrorCode.UNKNOWN_TOPIC_ID, None)  # Kafka's PartitionResponse(UNKNOWN_TOPIC_ID): no message
PRODUCER_ID_OFFSET = 43
_PID = struct.Struct(">q")


def register(table: HandlerTable, app: ProduceServices) -> None:
    table.register(0, partial(produce, app))


# --- Produce --------------------------------------------------------------------------

def _partition(index: int, code: ErrorCode = ErrorCode.NONE, message: str | None = None,
               result: AppendResult | None = None, record_errors: list | None = None) -> dict:
    return {"index": index, "error_code": code,
            "base_offset": result.base_offset if result else -1,
            "log_append_time_ms": result.log_append_time if result else -1,
            "log_start_offset": result.log_start_offset if result else -1,
            "record_errors": record_errors or [], "error_message": message}


def produce(app: ProduceServices, ctx: RequestContext, req):
    """Answer synchronously on the common path (no await needed), else through a task."""
    if ctx.api_version >= TOPIC_ID_VERSION:  # a topic no id resolved to keeps name None
        app.topics.name_items_by_id(req.topic_data, app.cluster_id)
    refused = _refused(req)
    if refused is not None:
        code, message = refused
        return _finish(app, req, [(td.name, [_partition(pd.index, code, message) for pd in td.partition_data])
                                  for td in req.topic_data])
    if ctx.api_version < 3:
        _up_convert(req)
    heavy = [(td.name, pd) for td in req.topic_data if td.name is not None for pd in td.partition_data
             if isinstance(pd.records, (bytes, bytearray, memoryview)) and is_heavy(pd.records)]
    adds = _implicit_adds(app, ctx, req)
    if heavy or adds or app.dataplane.turn_pending(ctx.connection_id):
        return _produce_checked(app, ctx, req, heavy, adds)
    plan = _plan(app, req)
    if plan is not None and app.dataplane.fast_path_ok(_logs(plan)):
        return _finish(app, req, _append_all(app, plan, ctx.api_version, req))
    return _produce_ordered(app, ctx, req)


async def _produce_checked(app: ProduceServices, ctx: RequestContext, req, heavy: list,
                           adds: list | None = None) -> dict:
    """A request with big batches to check (in worker threads, ``DataPlane.precheck``), or with
    partitions to add to its transaction first (``adds``), or one behind such a request on its
    connection: appended in the connection's order once checked."""
    dp = app.dataplane
    async with dp.connection_turn(ctx.connection_id) as wait_earlier:
        results = await asyncio.gather(*(_precheck(app, ctx.api_version, name, pd) for name, pd in heavy))
        checked: dict = {id(pd): result for (_name, pd), result in zip(heavy, results, strict=True)}
        if adds:
            checked.update(await _add_to_transaction(app, req.transactional_id, adds))
        await wait_earlier()
        plan = _plan(app, req, checked=checked)
        if plan is not None and dp.fast_path_ok(_logs(plan)):
            answers = _append_all(app, plan, ctx.api_version, req)
        else:
            answers = await _append_ordered(app, ctx, req, checked)
    out = _finish(app, req, answers)
    return await out if asyncio.iscoroutine(out) else out


async def _precheck(app: ProduceServices, version: int, topic: str, pd) -> Prechecked:
    lg = app.topics.log(topic, pd.index)
    config = lg.config if lg is not None else app.logs.config_for(topic)
    return await app.dataplane.precheck(pd.records, api_version=version, max_bytes=config.max_message_bytes,
                                        config=config)


class _Refusal(tuple):
    """(code, message) standing in for a partition's records that cannot be appended."""


def _implicit_adds(app: ProduceServices, ctx: RequestContext, req) -> list:
    """Produce v12+ in a transaction (transactions v2): the partitions to add to it before the
    append (``implicit_add.partitions_to_add``)."""
    coordinator = app.txn_coordinator
    if ctx.api_version < IMPLICIT_ADD_FROM_VERSION or req.transactional_id is None or coordinator is None:
        return []
    return partitions_to_add(app.dataplane, coordinator, req.transactional_id,
                             [(td.name, pd) for td in req.topic_data if td.name is not None
                              for pd in td.partition_data])


async def _add_to_transaction(app: ProduceServices, transactional_id: str, adds: list) -> dict:
    """Add the partitions (one coordinator call, as Kafka's one AddPartitionsToTxn per
    transaction); the ones that failed refused with the leader's code, by ``id`` of their data."""
    _name, _pd, pid, epoch = adds[0]
    error = await add_implicitly(app.txn_coordinator, transactional_id, pid, epoch,
                                 [(name, pd.index) for name, pd, _p, _e in adds])
    if error == ErrorCode.NONE:
        return {}
    message = "Partition was not added to the transaction" if error == ErrorCode.INVALID_TXN_STATE else None
    return {id(pd): _Refusal((error, message)) for _n, pd, _p, _e in adds}


def _up_convert(req) -> None:
    """Produce v0-2: magic 0/1 message sets become one magic-2 batch, as Kafka's
    LogValidator up-converts on append; one that does not decode is CORRUPT_MESSAGE."""
    for td in req.topic_data:
        for pd in td.partition_data:
            if not is_legacy(pd.records):
                continue
            try:
                pd.records = up_convert(pd.records)
            except CorruptRecordError as exc:
                pd.records = _Refusal((ErrorCode.CORRUPT_MESSAGE, f"legacy message set: {exc}"))


def _refused(req) -> tuple[ErrorCode, str] | None:
    """A request-wide refusal (bad acks, transactional batches without a transactional id or
    of several producers), or None."""
    if req.acks not in (0, 1, -1):
        return ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {req.acks}"
    pids = _transactional_producers(req)
    if pids and req.transactional_id is None:
        return TXN_ERROR, "transactional records need a transactional id"
    if len(pids) > 1:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING, "Transactional records contained more than one producer ID"
    return None


def _transactional_producers(req) -> set[int]:
    """Producer ids of the request's transactional magic-2 batches (header bytes only)."""
    return {p[0] for td in req.topic_data for pd in td.partition_data
            if (p := transactional_producer(pd.records)) is not None}


Plan = list[tuple[str, list[tuple[int, "Log | tuple[ErrorCode, str]", bytes | None]]]]


def _plan(app: ProduceServices, req, *, may_create: bool = True, checked: dict | None = None) -> Plan | None:
    """Each partition's log or error; None when a topic is to be auto-created first (an await).
    ``checked``: the partitions' batches already checked off the loop, by ``id`` of their
    partition data (the request itself is left as it came: the capture shows it)."""
    plan: Plan = []
    for td in req.topic_data:
        if td.name is None:  # v13: an id no topic has
            plan.append((td.name, [(pd.index, UNKNOWN_ID, None) for pd in td.partition_data]))
            continue
        topic = app.topics.get(td.name)
        if topic is None:
            err = _topic_refusal(app, td.name)
            if err is None and may_create:
                return None
            err = err or (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {td.name!r} could not be created")
            plan.append((td.name, [(pd.index, err, None) for pd in td.partition_data]))
            continue
        parts = []
        for pd in td.partition_data:
            lg = app.topics.log(td.name, pd.index) if 0 <= pd.index < topic.partitions else None
            target = lg if lg is not None else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                f"{td.name} has no partition {pd.index}")
            data = checked.get(id(pd), pd.records) if checked else pd.records
            if lg is not None and isinstance(data, _Refusal):
                target = data
            parts.append((pd.index, target, data))
        plan.append((td.name, parts))
    return plan


def _logs(plan: Plan) -> list[Log]:
    return [target for _t, parts in plan for _i, target, _d in parts if isinstance(target, Log)]


def _topic_refusal(app: ProduceServices, name: str) -> tuple[ErrorCode, str] | None:
    """Why an unknown topic cannot be produced to, or None when it may be auto-created."""
    if name in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"clients may not produce to internal topic {name}"
    try:
        app.topics.check_name(name)
    except TopicError as exc:
        return exc.code, exc.message
    if not app.config["auto.create.topics.enable"]:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
    return None


async def _produce_ordered(app: ProduceServices, ctx: RequestContext, req):
    """Requests that must await (auto-create, producer-state rebuild) run in arrival order."""
    results = await _append_ordered(app, ctx, req)
    out = _finish(app, req, results)
    return await out if asyncio.iscoroutine(out) else out


async def _append_ordered(app: ProduceServices, ctx: RequestContext, req,
                          checked: dict | None = None) -> list[tuple[str, list[dict]]]:
    dp = app.dataplane
    async with dp.ordered():
        for td in req.topic_data:
            if td.name is not None and app.topics.get(td.name) is None and _topic_refusal(app, td.name) is None:
                try:
                    await app.topics.ensure(td.name)
                except TopicError as exc:
                    log.warning("topic.auto_create_failed", topic=td.name, error=exc.message)
        plan = _plan(app, req, may_create=False, checked=checked)
        assert plan is not None
        for target in _logs(plan):
            await dp.load_producers(target)
        return _append_all(app, plan, ctx.api_version, req)


def _append_all(app: ProduceServices, plan: Plan, version: int, req) -> list[tuple[str, list[dict]]]:
    dp = app.dataplane
    acks, txn_id = req.acks, req.transactional_id
    verifier = getattr(app, "txn_coordinator", None)  # the transaction coordinator (TxnVerifier)
    out = []
    for name, parts in plan:
        responses = []
        for index, target, data in parts:
            if not isinstance(target, Log):
                responses.append(_partition(index, *target))
                continue
            try:
                result = dp.append_now(target, data, api_version=version, acks=acks,
                                       transactional_id=txn_id, verifier=verifier)
            except BatchRejected as exc:
                errors = [{"batch_index": e.batch_index, "batch_index_error_message": e.message}
                          for e in exc.record_errors]
                responses.append(_partition(index, exc.code, exc.message, record_errors=errors))
                continue
            responses.append(_partition(index, result=result))
        out.append((name, responses))
    return out


def _finish(app: ProduceServices, req, results):
    """The response, or an awaitable of it when fsync mode ``always`` must be waited for."""
    if req.acks == 0:
        _log_unacknowledged(results)
        return NO_RESPONSE
    if any(app.dataplane.needs_sync(lg, req.acks) for lg in _ok_logs(app, results)):
        return _await_durable(app, req, results)
    return _body(req, results)


def _body(req, results) -> dict:
    """The answer: one entry per request topic, in its order, by name (v0-12) or id (v13)."""
    return {"responses": [{"name": n, "topic_id": td.get("topic_id"), "partition_responses": p}
                          for td, (n, p) in zip(req.topic_data, results, strict=True)],
            "throttle_time_ms": 0}


async def _await_durable(app: ProduceServices, req, results):
    logs = [lg for lg in _ok_logs(app, results) if app.dataplane.needs_sync(lg, req.acks)]
    outcomes = await asyncio.gather(*(app.dataplane.durable(lg) for lg in logs), return_exceptions=True)
    failed = {(lg.topic, lg.partition): o for lg, o in zip(logs, outcomes, strict=True)
              if isinstance(o, BaseException)}
    if failed:
        for name, parts in results:
            for i, p in enumerate(parts):
                exc = failed.get((name, p["index"]))
                if exc is not None:
                    code = exc.code if isinstance(exc, BatchRejected) else ErrorCode.KAFKA_STORAGE_ERROR
                    parts[i] = _partition(p["index"], code, str(exc))
    return _body(req, results)


def _ok_logs(app: ProduceServices, results) -> list[Log]:
    out = []
    for name, parts in results:
        for p in parts:
            if p["error_code"] == ErrorCode.NONE:
                lg = app.topics.log(name, p["index"])
                if lg is not None:
                    out.append(lg)
    return out


def _log_unacknowledged(results) -> None:
    for name, parts in results:
        for p in parts:
            if p["error_code"] != ErrorCode.NONE:
                log.info("produce.acks0_rejected", topic=name, partition=p["index"],
                         error=ErrorCode(p["error_code"]).name, message=p["error_message"])
