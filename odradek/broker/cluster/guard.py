"""The one leadership check of a cluster: each node answers only for what it leads or coordinates.

Installed around the handlers only when there are several brokers, so one
broker pays nothing.  A partition request (Produce, Fetch, ListOffsets,
DeleteRecords, OffsetForLeaderEpoch) is split: the partitions the node may
serve go to the handler, the others are answered with Kafka's error
(``Cluster.partition_error``) -- with the KIP-951 leader hint where the
version carries it (Produce v10+, Fetch v16+) -- and merged into its answer
(``partition_errors``).  A group or transaction request for a key another
node coordinates is answered NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE while
no node leads its partition), as ``CoordinatorRuntime`` and
``TransactionStateManager`` do.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.fastcodec import EncodedArray
from .. import partition_errors
from ..dispatch import LED_PARTITIONS, CloseConnection, HandlerTable, RequestContext, after
from ..error_answers import error_answer
from ..leader_hints import HINTED, hinted
from .layout import NO_LEADER

if TYPE_CHECKING:
    from .service import Cluster

# Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch, DescribeProducers, ShareFetch,
# ShareAcknowledge
PARTITION_APIS = (0, 1, 2, 21, 23, 61, 78, 79)
# APIs whose handler sees every request even when all its partitions are refused: the session's epoch
# moves on (Fetch's KIP-227 session, the share session of ShareFetch / ShareAcknowledge)
SESSION_APIS = frozenset({1, 78, 79})
# api key -> its session epoch field: above 0, the handler also serves the session's cached partitions,
# which it checks itself (``LED_PARTITIONS``) and the guard hints
SESSION_EPOCHS = {1: "session_epoch", 78: "share_session_epoch"}
LIST_GROUPS = 16
# api key -> the request's list of group ids, each answered by its own coordinator (DescribeGroups,
# ConsumerGroupDescribe, ShareGroupDescribe)
DESCRIBED: dict[int, str] = {15: "groups", 69: "group_ids", 77: "group_ids"}
# api key -> (the request's key field, transactional?) for requests a coordinator must answer
COORDINATED: dict[int, tuple[str, bool]] = {
    8: ("group_id", False), 9: ("group_id", False), 11: ("group_id", False), 12: ("group_id", False),
    13: ("group_id", False), 14: ("group_id", False), 28: ("group_id", False), 47: ("group_id", False),
    68: ("group_id", False), 76: ("group_id", False), 90: ("group_id", False), 91: ("group_id", False),
    92: ("group_id", False),
    22: ("transactional_id", True), 24: ("transactional_id", True), 25: ("transactional_id", True),
    26: ("transactional_id", True),
}


def install(table: HandlerTable, cluster: Cluster) -> None:
    """Wrap the served partition and coordinator APIs (before the ACL guards: authorization first)."""
    for key in PARTITION_APIS:
        handler = table.get(key)
        if handler is not None:
            handler.fn = partial(_partition_guard, cluster, handler.fn)
    for key, (field, transactional) in COORDINATED.items():
        handler = table.get(key)
        if handler is not None:
            handler.fn = partial(_coordinator_guard, cluster, handler.fn, field, transactional)
    for key, field in DESCRIBED.items():
        handler = table.get(key)
        if handler is not None:
            handler.fn = partial(_own_described, cluster, handler.fn, field)
    handler = table.get(LIST_GROUPS)
    if handler is not None:
        handler.fn = partial(_own_groups, cluster, handler.fn)
    table.routes.clear()


def _own_groups(cluster: Cluster, inner: Callable, ctx: RequestContext, req: Any) -> Any:
    """ListGroups lists the groups this node coordinates (Kafka's brokers list their coordinator
    partitions' groups; admin clients ask every broker and put the lists together)."""
    def mine(answer: dict) -> dict:
        groups = answer.get("groups")
        if isinstance(groups, list):
            answer["groups"] = [g for g in groups if cluster.coordinator(g["group_id"], False) == ctx.node_id]
        return answer

    return after(inner(ctx, req), mine)


def _own_described(cluster: Cluster, inner: Callable, field: str, ctx: RequestContext, req: Any) -> Any:
    """A describe of several groups: the ones another node coordinates are answered NOT_COORDINATOR
    (COORDINATOR_NOT_AVAILABLE without a leader) in their place, the rest by the handler, as the
    group coordinator answers each group from its own partition (``GroupCoordinatorService``)."""
    ids = list(req[field] or ())
    refused = {g: c for g in ids if (c := _coordinator_code(cluster, ctx, g, False)) is not None}
    if not refused:
        return inner(ctx, req)
    mine = type(req)(req)
    mine[field] = [g for g in ids if g not in refused]
    errors = {}
    for g, code in refused.items():
        one = type(req)(req)
        one[field] = [g]
        errors[g] = error_answer(ctx.api_key, ctx.api_version, one, code)["groups"][0]

    def merged(answer: dict) -> dict:
        served = iter(answer.get("groups") or ())
        answer["groups"] = [errors[g] if g in errors else next(served) for g in ids]
        return answer

    return after(inner(ctx, mine) if mine[field] else {"throttle_time_ms": 0, "groups": []}, merged)


def _coordinator_code(cluster: Cluster, ctx: RequestContext, key: str, transactional: bool) -> ErrorCode | None:
    """NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE while nobody leads its partition) unless this node
    coordinates ``key``; None when it does."""
    node = cluster.coordinator(key, transactional)
    if node == ctx.node_id:
        return None
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if node == NO_LEADER else ErrorCode.NOT_COORDINATOR


def _coordinator_key(req: Any, field: str) -> str | None:
    key = req.get(field) if hasattr(req, "get") else getattr(req, field, None)
    if key is None:  # batched versions (OffsetFetch v8+, AddPartitionsToTxn v4+): their first key
        for items, inner in (("groups", "group_id"), ("transactions", "transactional_id")):
            listed = req.get(items) if hasattr(req, "get") else None
            if listed:
                return listed[0][inner]
    return key


def _coordinator_guard(cluster: Cluster, inner: Callable, field: str, transactional: bool,
                       ctx: RequestContext, req: Any) -> Any:
    key = _coordinator_key(req, field)
    code = None if key is None else _coordinator_code(cluster, ctx, key, transactional)
    if code is not None:
        answer = error_answer(ctx.api_key, ctx.api_version, req, code)
        if answer is not None:
            return answer
    return inner(ctx, req)


def _partition_guard(cluster: Cluster, inner: Callable, ctx: RequestContext, req: Any) -> Any:
    layout = partition_errors.layout(ctx.api_key, ctx.api_version)
    if layout is None:
        return inner(ctx, req)
    session_epoch = SESSION_EPOCHS.get(ctx.api_key)
    if session_epoch is not None:  # an incremental session's partitions are checked by the handler
        req[LED_PARTITIONS] = partial(cluster.partition_error, ctx.node_id)
    refused: dict[int, list] = {}  # error code -> [(request topic, [partition indexes])]
    kept_topics = []
    names_by_id = cluster.app.topics.name_by_id
    for t in req[layout.request_topics] or ():
        name = partition_errors._topic_name(t)
        if name is None and t.get("topic_id") is not None:
            name = names_by_id(t["topic_id"], cluster.app.cluster_id)
        parts = t[layout.request_partitions] or []
        kept, chosen = [], {}
        for p in parts:
            index = p if layout.request_index is None else p[layout.request_index]
            epoch = -1 if layout.request_index is None else p.get("current_leader_epoch", -1)
            code = None if name is None else cluster.partition_error(ctx.node_id, name, index, epoch)
            if code is None:
                kept.append(p)
                continue
            chosen.setdefault(code, []).append(index)
        if not chosen:
            kept_topics.append(t)
            continue
        for code, indexes in chosen.items():
            refused.setdefault(code, []).append((t, indexes))
        if kept:
            rest = type(t)(t)
            rest[layout.request_partitions] = kept
            kept_topics.append(rest)
    hint = hinted(ctx.api_key, ctx.api_version, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if not refused:
        if hint and session_epoch is not None and req[session_epoch] > 0:  # cached partitions it refused
            return after(inner(ctx, req), partial(_hints, cluster, ctx, layout))
        return inner(ctx, req)
    remaining = type(req)(req)
    remaining[layout.request_topics] = kept_topics
    if ctx.api_key == 0 and req["acks"] == 0:
        _unanswered(inner, ctx, remaining, kept_topics)
    if ctx.api_key == 1:
        remaining["max_wait_ms"] = 0  # an error answers at once (Kafka's errorReadingData)
    if not kept_topics and ctx.api_key not in SESSION_APIS:
        result: Any = {"throttle_time_ms": 0, layout.answer_topics: []}
    else:
        result = inner(ctx, remaining)

    def amend(answer: dict) -> dict:
        for code, chosen in refused.items():
            answer = partition_errors.merge(layout, answer, chosen, code)
        return _hints(cluster, ctx, layout, answer) if hint else answer

    return after(result, amend)


def _unanswered(inner: Callable, ctx: RequestContext, remaining: Any, kept: list) -> None:
    """An acks=0 Produce with a partition this node does not lead: the others are written, then the
    connection is closed, the one signal such a producer gets (``KafkaApis.handleProduceRequest``)."""
    if kept:
        result = inner(ctx, remaining)
        if inspect.iscoroutine(result):
            task = asyncio.ensure_future(result)
            _WRITING.add(task)
            task.add_done_callback(_WRITING.discard)
    raise CloseConnection("acks=0 Produce to a partition this node does not lead")


_WRITING: set[asyncio.Future] = set()  # acks=0 writes finishing after their connection closed


def _hints(cluster: Cluster, ctx: RequestContext, layout: Any, answer: dict) -> dict:
    """KIP-951: each refused partition's current leader, and the live leaders' endpoints, from the
    layout as the answer leaves (Kafka's metadata cache): the request's refused partitions and an
    incremental fetch session's cached ones alike."""
    _first, parts_field, codes = HINTED[ctx.api_key]
    names_by_id = cluster.app.topics.name_by_id
    nodes = {}
    for topic in answer.get(layout.answer_topics) or ():
        name = partition_errors._topic_name(topic)
        if name is None and topic.get("topic_id") is not None:
            name = names_by_id(topic["topic_id"], cluster.app.cluster_id)
        parts = topic[parts_field]
        for p in parts.rows if type(parts) is EncodedArray else parts:
            if p.get("error_code") not in codes or name is None:
                continue
            state = cluster.state(name, p.get(layout.answer_index))
            if state is None:
                continue
            p["current_leader"] = {"leader_id": state.leader, "leader_epoch": state.epoch}
            ep = cluster.endpoint(state.leader, ctx.listener)
            if ep is not None:
                nodes[ep.node_id] = {"node_id": ep.node_id, "host": ep.host, "port": ep.port, "rack": None}
    if nodes:
        answer["node_endpoints"] = list(nodes.values())
    return answer
