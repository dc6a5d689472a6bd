"""Topic APIs: Metadata's topic list, CreateTopics, DeleteTopics.

A single node leads every partition with a constant leader epoch 0 (an
advancing epoch would send kafka-python and librdkafka into
OffsetForLeaderEpoch validation for nothing; ``log_admin.py`` answers it
for epoch 0).  The internal topics, ``__consumer_offsets`` and
``__transaction_state``, are listed by an all-topics Metadata and served by
name with IsInternal true, as Kafka lists them once they exist; here their
coordinators own them from start-up, so they always exist.  Clients leave them
out of pattern subscriptions themselves (``exclude.internal.topics``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.primitives import ZERO_UUID
from ..dataplane import topic_configs
from ..dataplane.topics import INTERNAL_TOPICS, TopicError
from ..dispatch import HandlerTable, RequestContext

if TYPE_CHECKING:
    from ...storage.config import LogConfig
    from ..cluster import Cluster
    from ..config import Config
    from ..coordinator.service import Coordinator
    from ..dataplane import DataPlane, TopicRegistry
    from ..dynamic_config import DynamicBrokerConfig


class MetadataServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): what topic metadata reads."""

    config: Config
    node_id: int
    cluster: Cluster | None  # several brokers: the layout; None: this node leads everything
    cluster_id: str
    topics: TopicRegistry


class TopicServices(MetadataServices, Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): what creating and deleting
    topics also uses."""

    log_config: LogConfig
    dynamic_config: DynamicBrokerConfig
    dataplane: DataPlane
    coordinator: Coordinator | None
    coordinator_loaded: asyncio.Event


log = structlog.get_logger("odradek.topics")

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka
# without an authorizer reports for a topic when asked (bit n = AclOperation code n)
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def register(table: HandlerTable, app: TopicServices) -> None:
    table.register(19, partial(create_topics, app))
    table.register(20, partial(delete_topics, app))


# --- Metadata ---------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _partitions(count: int, node_id: int) -> tuple[dict, ...]:
    """Partition entries never change on one node, so they are built once per (count, node)."""
    return tuple({"error_code": ErrorCode.NONE, "partition_index": p, "leader_id": node_id,
                  "leader_epoch": 0, "replica_nodes": [node_id], "isr_nodes": [node_id],
                  "offline_replicas": []} for p in range(count))


def _topic_entry(app: MetadataServices, name: str, topic_id, count: int, ops: int) -> dict:
    cluster = app.cluster
    partitions = list(_partitions(count, app.node_id)) if cluster is None else _cluster_partitions(cluster, name, count)
    return {"error_code": ErrorCode.NONE, "name": name, "topic_id": topic_id,
            "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": ops}


def _cluster_partitions(cluster: Cluster, name: str, count: int) -> list[dict]:
    """A cluster's partitions as laid out; a leaderless one LEADER_NOT_AVAILABLE, as
    ``KRaftMetadataCache.getPartitionMetadata`` answers it."""
    out = []
    for p in range(count):
        entry = cluster.describe(name, p)
        code = ErrorCode.LEADER_NOT_AVAILABLE if entry["leader_id"] < 0 else ErrorCode.NONE
        out.append({"error_code": code, "partition_index": p, **entry})
    return out


def _error_entry(code: ErrorCode, name: str | None, topic_id=ZERO_UUID) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def _describe(app: MetadataServices, name: str, ops: int) -> dict | None:
    topic = app.topics.get(name)
    if topic is not None:
        return _topic_entry(app, name, topic.topic_id, topic.partitions, ops)
    if name in INTERNAL_TOPICS:
        count = app.topics.partition_count(name)
        if count:
            return _topic_entry(app, name, app.topics.internal_topic_id(name, app.cluster_id), count, ops)
    return None


async def topic_metadata(app: MetadataServices, ctx: RequestContext, req) -> list[dict]:
    """The ``topics`` of a Metadata response: null = all, [] = none; auto-creates if allowed.

    v0 has no null: an empty list asks for every topic (``MetadataRequest.isAllTopics``).
    """
    ops = TOPIC_OPERATIONS if req.include_topic_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    if req.topics is None or (ctx.api_version == 0 and not req.topics):
        names = app.topics.names() + list(INTERNAL_TOPICS)
        return [e for n in sorted(names) if (e := _describe(app, n, ops)) is not None]
    out = []
    seen: set = set()
    for t in req.topics:
        key = t.name if t.name is not None else t.topic_id
        if key in seen:
            continue
        seen.add(key)
        out.append(await _requested_topic(app, t, req.allow_auto_topic_creation, ops))
    return out


async def _requested_topic(app: MetadataServices, t, allow_auto: bool, ops: int) -> dict:
    name = t.name
    if name is None:  # v10+: by topic id
        name = app.topics.name_by_id(t.topic_id, app.cluster_id)
        if name is None:
            return _error_entry(ErrorCode.UNKNOWN_TOPIC_ID, None, t.topic_id)
    entry = _describe(app, name, ops)
    if entry is not None:
        return entry
    if not (allow_auto and app.config["auto.create.topics.enable"]) or name in INTERNAL_TOPICS:
        return _error_entry(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    try:
        app.topics.check_name(name)
        topic = await app.topics.ensure(name)
    except TopicError as exc:
        return _error_entry(exc.code, name)
    return _topic_entry(app, name, topic.topic_id, topic.partitions, ops)


# --- CreateTopics -----------------------------------------------------------------------

def _config_entries(app: TopicServices, overrides: dict[str, str]) -> list[dict]:
    entries = topic_configs.describe(overrides, app.log_config, app.dynamic_config)
    return [{"name": e.name, "value": e.value, "read_only": False, "config_source": e.source,
             "is_sensitive": False} for e in entries]


async def create_topics(app: TopicServices, ctx: RequestContext, req) -> dict:
    """Every topic checked first, then the valid ones created together: one registry write and
    one metadata round for the whole request (``TopicRegistry.create_many``)."""
    counts = Counter(t.name for t in req.topics)
    results: list[dict | None] = []
    wanted: list[tuple[str, int, dict[str, str | None]]] = []
    places: list[int] = []
    placements: list[tuple[int, dict[int, list[int]] | None]] = []
    for t in req.topics:
        if counts[t.name] > 1:
            results.append(_create_error(t.name, ErrorCode.INVALID_REQUEST,
                                         f"topic {t.name!r} appears more than once in the request"))
            continue
        try:
            app.topics.check_name(t.name)
            app.topics.check_identity(t.name)
            partitions, rf, assignment = _placement(app, t)
            wanted.append((t.name, partitions, {c.name: c.value for c in t.configs}))
            placements.append((rf, assignment))
        except TopicError as exc:
            results.append(_create_error(t.name, exc.code, exc.message))
            continue
        places.append(len(results))
        results.append(None)
    created = await app.topics.create_many(wanted, validate_only=req.validate_only)
    described: dict[tuple, list[dict]] = {}  # topics with the same overrides report the same configs
    cluster = app.cluster
    for place, (name, n, _c), (rf, assignment), topic in zip(places, wanted, placements, created, strict=True):
        if isinstance(topic, TopicError):
            results[place] = _create_error(name, topic.code, topic.message)
            continue
        if cluster is not None and not req.validate_only:
            await cluster.placed(name, n, rf, assignment)
        key = tuple(sorted(topic.configs.items()))
        if key not in described:
            described[key] = _config_entries(app, topic.configs)
        results[place] = _created(topic, described[key], req.validate_only, rf)
    return {"throttle_time_ms": 0, "topics": results}


def _create_error(name: str, code: ErrorCode, message: str) -> dict:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": code, "error_message": message,
            "topic_config_error_code": 0, "num_partitions": -1, "replication_factor": -1, "configs": None}


def _created(topic, configs: list[dict], validate_only: bool, rf: int = 1) -> dict:
    return {"name": topic.name, "topic_id": ZERO_UUID if validate_only else topic.topic_id,
            "error_code": ErrorCode.NONE, "error_message": None, "topic_config_error_code": 0,
            "num_partitions": topic.partitions, "replication_factor": rf, "configs": configs}


def _nodes(app: TopicServices) -> list[int]:
    return [app.node_id] if app.cluster is None else app.cluster.nodes


def _placement(app: TopicServices, t) -> tuple[int, int, dict[int, list[int]] | None]:
    """(partitions, replication factor, replica assignment if given) asked for; a factor above the
    brokers is INVALID_REPLICATION_FACTOR (``ReplicationControlManager.createTopic``)."""
    nodes = _nodes(app)
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "both num_partitions/replication_factor and replica assignments were given")
        indexes = sorted(a.partition_index for a in t.assignments)
        if indexes != list(range(len(indexes))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "assigned partitions must be numbered 0..n-1, each once")
        for a in t.assignments:
            replicas = list(a.broker_ids)
            if not replicas or len(set(replicas)) != len(replicas) or not set(replicas) <= set(nodes):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {a.partition_index}: replicas {replicas} must be distinct "
                                 f"brokers among {nodes}")
        assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        return len(indexes), len(assignment[0]), assignment
    partitions = app.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
    if partitions <= 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, got {partitions}")
    rf = app.config["default.replication.factor"] if t.replication_factor == -1 else t.replication_factor
    if rf <= 0:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor must be positive, got {rf}")
    if rf > len(nodes):
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {rf} time(s): The target replication factor of "
                         f"{rf} cannot be reached because only {len(nodes)} broker(s) are registered.")
    return partitions, rf, None


# --- DeleteTopics -----------------------------------------------------------------------

async def delete_topics(app: TopicServices, ctx: RequestContext, req) -> dict:
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    counts = Counter(wanted)
    results = []
    for name, topic_id in wanted:
        try:
            if counts[(name, topic_id)] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "topic appears more than once in the request")
            name = await _delete_one(app, name, topic_id)
            results.append({"name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE,
                            "error_message": None})
        except TopicError as exc:
            results.append({"name": name, "topic_id": topic_id, "error_code": exc.code,
                            "error_message": exc.message})
    return {"throttle_time_ms": 0, "responses": results}


async def _delete_one(app: TopicServices, name: str | None, topic_id) -> str:
    if not app.config["delete.topic.enable"]:
        raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
    if name is not None and topic_id != ZERO_UUID:
        raise TopicError(ErrorCode.INVALID_REQUEST, "give a topic name or a topic id, not both")
    if name is None:
        name = app.topics.name_by_id(topic_id, app.cluster_id)
        if name is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {topic_id}")
    await app.topics.delete(name)
    app.dataplane.forget_topic(name)
    return name


OFFSETS_CLEANUP_WAIT_S = 10.0


async def forget_offsets(app: TopicServices, names: list[str]) -> None:
    """Committed offsets of deleted topics go too (the coordinator implements the hook);
    the registry calls this between removing a topic's logs and its deletion marker.

    The hook returns promises of its tombstone writes; waiting for them means
    a client that deletes and re-creates a topic never sees its old offsets.
    """
    hook = getattr(app.coordinator, "on_topics_deleted", None)
    if hook is None:
        return
    try:  # a shard still loading would skip its tombstones
        await asyncio.wait_for(app.coordinator_loaded.wait(), OFFSETS_CLEANUP_WAIT_S)
        result = hook(names)
        pending = [_as_future(p) for p in (result if isinstance(result, list) else [result])]
        pending = [f for f in pending if f is not None]
        if pending:
            await asyncio.wait_for(asyncio.gather(*pending), OFFSETS_CLEANUP_WAIT_S)
    except Exception:
        # the registry keeps the deletion marker, so the next start forgets them again
        log.exception("topic.offsets_cleanup_failed", topics=names)
        raise


def _as_future(promise) -> asyncio.Future | None:
    """An awaitable for a coroutine/future or a coordinator Promise (add_done_callback(result))."""
    if inspect.isawaitable(promise):
        return asyncio.ensure_future(promise)
    if not hasattr(promise, "add_done_callback"):
        return None
    fut = asyncio.get_running_loop().create_future()
    promise.add_done_callback(lambda result: fut.done() or fut.set_result(result))
    return fut
