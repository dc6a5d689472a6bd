"""Offset APIs on the wire: OffsetCommit (8) v0-v10, OffsetFetch (9) v0-v10 (v10 of both name
topics by id), OffsetDelete (47) v0,
TxnOffsetCommit (28) v0-v3.

This module only translates between each version's fields and the sans-I/O
coordinator (``coordinator/offsets.py``), and places errors where each
version expects them:

- OffsetCommit has no top-level error in any version: group-level errors
  are repeated on every partition.
- OffsetFetch v0/v1 have no top-level error either: a group-level error is
  put on every requested partition with offset -1; v2-v7 answer it at the
  top level with no partitions; v8+ per group (``KafkaApis.handleOffsetFetchRequest``).  v0 reads the same
  committed offsets as v1 (real Kafka read ZooKeeper for v0 and KRaft
  brokers reject it; a single store is what a dev broker's users expect).
- OffsetCommit v0 likewise stores into ``__consumer_offsets`` (Kafka: ZooKeeper).
- TxnOffsetCommit v0-v1 answer COORDINATOR_NOT_AVAILABLE where v2+ answer
  COORDINATOR_LOAD_IN_PROGRESS (``KafkaApis.handleTxnOffsetCommitRequest``:
  clients before Kafka 2.0 crashed on it).  v4 answers KIP-890's
  TRANSACTION_ABORTABLE where older versions get INVALID_TXN_STATE; v5
  (transactions v2) first adds the group's offsets partition to the
  transaction itself (``txnOffsetCommitRequestVersionToTransactionSupportedOperation``:
  ADD_PARTITION), as AddOffsetsToTxn would.

Responses that wait on a write are answered when the coordinator's promise
completes, i.e. once the batch is durable (``log.fsync.mode=always``: after
fsync); otherwise the answer is built synchronously, without a task.
"""

from __future__ import annotations

from functools import partial
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.fastcodec import CodecCache, EncodedArray, compile_fixed_rows, compile_row_writer
from ...protocol.messages.offset_commit import RESPONSE as OFFSET_COMMIT_RESPONSE
from ...protocol.messages.offset_fetch import RESPONSE as OFFSET_FETCH_RESPONSE
from ..coordinator.offsets import (
    CommitRequest,
    PartitionCount,
    commit_topic_offsets,
    delete_offsets,
    fetch_offset_rows,
    validate_consumer_fetch,
)
from ..coordinator.txn_offsets import TxnCommitRequest, commit_txn_offsets, verification_error
from ..dispatch import HandlerTable, Later, RequestContext, answer_when
from ..runtime.promise import Promise
from ..txn.coordinator import TV2

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator
    from ..dataplane import TopicRegistry
    from ..txn import TransactionCoordinator


class OffsetServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the group coordinator, which
    topics exist, the transaction coordinator's verification."""

    coordinator: Coordinator | None
    topics: TopicRegistry
    txn_coordinator: TransactionCoordinator | None
    cluster_id: str


OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT, OFFSET_DELETE = 8, 9, 28, 47


def register(table: HandlerTable, app: OffsetServices) -> None:
    table.register(OFFSET_COMMIT, partial(offset_commit, app))
    table.register(OFFSET_FETCH, partial(offset_fetch, app))
    table.register(TXN_OFFSET_COMMIT, partial(txn_offset_commit, app))
    table.register(OFFSET_DELETE, partial(offset_delete, app))


def _no_topics(topic: str) -> int | None:
    return None


def partition_counter(app: OffsetServices) -> PartitionCount:
    """The one accessor for "does this topic exist": the data plane's, if it is there.

    Without a data plane every topic is unknown (UNKNOWN_TOPIC_OR_PARTITION).
    """
    topics = getattr(app, "topics", None)
    return _no_topics if topics is None else topics.partition_count


# --- OffsetCommit ---------------------------------------------------------------------------------

# a partition of the request as the coordinator's row (``coordinator.offsets.CommitRow``), read in C
_COMMIT_ROW = itemgetter("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata",
                         "commit_timestamp")

# The hottest request: decoded structs are read by key (``c["x"]``, C speed) rather than
# by attribute (construct's ``Container.__getattr__`` is Python code), and a topic's partitions
# travel as plain tuples under it, read by one ``itemgetter`` (no Python code per partition).

def offset_commit(app: OffsetServices, ctx: RequestContext, req) -> Any:
    if ctx.api_version >= 10:  # KIP-848: topics by id; an id no topic has is UNKNOWN_TOPIC_ID
        app.topics.name_items_by_id(req["topics"], app.cluster_id)
    topics = [(t["name"], list(map(_COMMIT_ROW, t["partitions"]))) for t in req["topics"] if t["name"] is not None]
    coordinator = app.coordinator
    if coordinator is None:
        promise = Promise.resolved([ErrorCode.COORDINATOR_NOT_AVAILABLE] * sum(len(rows) for _t, rows in topics))
    else:
        request = CommitRequest(req["group_id"], req["generation_id_or_member_epoch"], req["member_id"],
                                req["group_instance_id"], req["retention_time_ms"], ctx.api_version)
        promise = commit_topic_offsets(coordinator, request, topics, partition_counter(app))
    version = ctx.api_version
    if promise.done:  # fsync never/interval: answered at once
        return commit_response(req, promise.result(), version)
    return Later(promise, lambda errors: commit_response(req, errors, version))


# OffsetCommitResponse's partitions: (partition_index, error_code) rows, a topic's in one pack
_COMMITTED_ROWS = CodecCache(lambda v: compile_fixed_rows(OFFSET_COMMIT_RESPONSE, v, ("topics", "partitions")),
                             OFFSET_COMMIT_RESPONSE.valid)
_INDEX = itemgetter("partition_index")


def commit_response(req, errors: list[ErrorCode], version: int) -> dict:
    """Per-partition errors in the request's own shape and order (v10: by topic id; a topic no id
    resolved to was not committed: UNKNOWN_TOPIC_ID).  A topic's rows are packed at once from its
    partitions' indexes zipped with their errors: no call per partition."""
    rows = _COMMITTED_ROWS[version]
    topics = []
    at = 0
    for t in req["topics"]:
        parts = t["partitions"]
        n = len(parts)
        if t["name"] is not None:
            errs = errors[at:at + n]
            at += n
        else:
            errs = [ErrorCode.UNKNOWN_TOPIC_ID] * n
        data = rows(n)(*chain.from_iterable(zip(map(_INDEX, parts), errs, strict=True)))
        topics.append({"name": t["name"], "topic_id": t["topic_id"], "partitions": EncodedArray(n, data)})
    return {"throttle_time_ms": 0, "topics": topics}


# --- TxnOffsetCommit ---------------------------------------------------------------------------------

def txn_offset_commit(app: OffsetServices, ctx: RequestContext, req) -> Any:
    partitions = [(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                  for t in req.topics for p in t.partitions]
    coordinator = app.coordinator
    version = ctx.api_version
    if coordinator is None:
        promise = Promise.resolved([ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(partitions))
    else:
        request = TxnCommitRequest(req.transactional_id, req.group_id, req.producer_id, req.producer_epoch,
                                   req.generation_id, req.member_id, req.group_instance_id, version)
        # the transaction coordinator verifies the offsets partition is in the transaction (KIP-890)
        verifier = getattr(app, "txn_coordinator", None)
        if verifier is not None and not hasattr(verifier, "verify_partition"):
            verifier = None
        commit = partial(commit_txn_offsets, coordinator, request, partitions, partition_counter(app), verifier)
        promise = commit() if version < IMPLICIT_ADD_VERSION or verifier is None else \
            _after_implicit_add(verifier, req, version, len(partitions), commit)
    return answer_when(promise, partial(txn_commit_response, req, version))


IMPLICIT_ADD_VERSION = 5


def _after_implicit_add(txn_coordinator: Any, req, version: int, count: int, commit: Any) -> Promise:
    """TxnOffsetCommit v5: the group's offsets partition joins the transaction first (a v2 client's
    add); then the commit, or the add's error on every partition."""
    out = Promise()

    def added(error: ErrorCode) -> None:
        code = verification_error(error, version)
        if code != ErrorCode.NONE:
            out.set([code] * count)
            return
        commit().add_done_callback(out.set)

    txn_coordinator.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id,
                                client_tv=TV2).add_done_callback(added)
    return out


def txn_commit_response(req, version: int, errors: list[ErrorCode]) -> dict:
    """Per-partition errors in the request's shape; 14 becomes 15 for v0-v1."""
    if version < 2:
        errors = [ErrorCode.COORDINATOR_NOT_AVAILABLE if e is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e
                  for e in errors]
    it = iter(errors)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": next(it)}
                                        for p in t.partitions]}
        for t in req.topics]}


# --- OffsetFetch ------------------------------------------------------------------------------------

def offset_fetch(app: OffsetServices, ctx: RequestContext, req) -> dict:
    version = ctx.api_version
    if version >= 8:
        return {"throttle_time_ms": 0,
                "groups": [_member_refused(app, g, version)
                           or _fetch_group(app, g.group_id, g.topics, req.require_stable, version)
                           for g in req.groups]}
    topics = _wanted(req.topics)
    error, parts = _fetch(app, req.group_id, topics, req.require_stable, version)
    if error is not ErrorCode.NONE:
        if version >= 2:
            return {"throttle_time_ms": 0, "error_code": error, "topics": []}
        # v0/v1 have no top-level error: every requested partition carries it
        parts = _error_rows(topics or (), error, version)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": parts}


def _member_refused(app: OffsetServices, g, version: int) -> dict | None:
    """v9+ (KIP-848): a fetch naming a member of a consumer group must carry its current epoch."""
    if version < 9 or app.coordinator is None or (g["member_id"] is None and g["member_epoch"] < 0):
        return None
    error = validate_consumer_fetch(app.coordinator, g["group_id"], g["member_id"], g["member_epoch"])
    return None if error is ErrorCode.NONE else {"group_id": g["group_id"], "error_code": error, "topics": []}


def _fetch_group(app: OffsetServices, group_id: str, topics, require_stable: bool, version: int) -> dict:
    if version < 10:
        error, parts = _fetch(app, group_id, _wanted(topics), require_stable, version)
        return {"group_id": group_id, "error_code": error, "topics": parts}
    return _fetch_group_by_id(app, group_id, topics, require_stable, version)


def _fetch_group_by_id(app: OffsetServices, group_id: str, topics, require_stable: bool, version: int) -> dict:
    """v10 (KIP-848): topics by id, as Kafka's ``fetchOffsetsForGroup``: a listed id no topic has
    is UNKNOWN_TOPIC_ID on each of its partitions; fetching all topics leaves out those whose id
    is unknown (``fetchAllOffsetsForGroup``: a topic deleted since its commit)."""
    unknown = []
    if topics is not None:
        app.topics.name_items_by_id(topics, app.cluster_id)
        unknown = [t for t in topics if t["name"] is None]
        topics = [t for t in topics if t["name"] is not None]
    error, parts = _fetch(app, group_id, _wanted(topics), require_stable, version)
    for part in parts:
        part["topic_id"] = app.topics.id_by_name(part["name"], app.cluster_id)
    if topics is None:
        parts = [part for part in parts if part["topic_id"] is not None]
    elif error is ErrorCode.NONE:
        parts += [dict(entry, topic_id=t["topic_id"]) for t in unknown
                  for entry in _error_rows([("", t["partition_indexes"])], ErrorCode.UNKNOWN_TOPIC_ID, version)]
    return {"group_id": group_id, "error_code": error, "topics": parts}


def _wanted(topics) -> list[tuple[str, list[int]]] | None:
    return None if topics is None else [(t["name"], t["partition_indexes"]) for t in topics]


# OffsetFetchResponse's partition struct, written row by row (``fastcodec.compile_row_writer``):
# a consumer fetches all its partitions at start, 10,000 is a real request
_FETCHED_ROWS = CodecCache(lambda v: compile_row_writer(
    OFFSET_FETCH_RESPONSE, v, ("groups", "topics", "partitions") if v >= 8 else ("topics", "partitions")),
    OFFSET_FETCH_RESPONSE.valid)


def _fetch(app: OffsetServices, group_id: str, topics, require_stable: bool, version: int
           ) -> tuple[ErrorCode, list[dict]]:
    """(group-level error, the response's topics, their partitions already encoded for ``version``)."""
    if app.coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    error, rows = fetch_offset_rows(app.coordinator, group_id, topics, require_stable, _FETCHED_ROWS[version])
    return error, [{"name": topic, "partitions": _partitions(n, parts)} for topic, n, parts in rows]


def _partitions(n: int, parts: list) -> EncodedArray:
    return EncodedArray(n, b"".join(parts))


def _error_rows(topics, error: ErrorCode, version: int) -> list[dict]:
    """Every requested partition carrying ``error``, grouped under its topic (first-seen order)."""
    row = _FETCHED_ROWS[version]
    by_topic: dict[str, list] = {}
    for name, indexes in topics:
        entry = by_topic.setdefault(name, [0, []])
        entry[0] += len(indexes)
        for p in indexes:
            row(entry[1].append, p, -1, -1, "", error)
    return [{"name": name, "partitions": _partitions(n, parts)} for name, (n, parts) in by_topic.items()]


# --- OffsetDelete -------------------------------------------------------------------------------------

def offset_delete(app: OffsetServices, ctx: RequestContext, req) -> Any:
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]
    if app.coordinator is None:
        promise = Promise.resolved((ErrorCode.COORDINATOR_NOT_AVAILABLE, []))
    else:
        promise = delete_offsets(app.coordinator, req.group_id, topics, partition_counter(app))
    return answer_when(promise, delete_response)


def delete_response(result: tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]) -> dict:
    error, parts = result
    by_topic: dict[str, list[dict]] = {}
    for topic, partition, code in parts:
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return {"error_code": error, "throttle_time_ms": 0,
            "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]}
