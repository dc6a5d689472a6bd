"""Partition-level admin APIs: CreatePartitions, ElectLeaders, DescribeTopicPartitions,
AlterPartitionReassignments and ListPartitionReassignments.

One node leads every partition with the constant leader epoch of
``topics.py``, so a valid manual assignment is ``[node_id]`` per new
partition and every election is ``ELECTION_NOT_NEEDED``, as Kafka answers
when the desired leader already leads.  Reassignments are answered as
Kafka's controller answers them for a cluster of one registered broker: the
only valid target is ``[node_id]``, already the replica set, so a change is
a no-op success.  With several brokers (``cluster/``) manual assignments and
reassignments name any of them and change the layout; as storage is shared, a
reassignment completes in its answer, so nothing is ever in progress either.
Consumer groups notice new partitions through Metadata, as with Kafka (their
leader rejoins when a subscribed topic's partition count changes); the
broker pushes nothing.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode, clip_message
from ...protocol.primitives import ZERO_UUID
from ..dataplane.topics import INTERNAL_TOPICS, OFFSETS_TOPIC, TopicError, name_error
from ..dispatch import HandlerTable, RequestContext
from .fetch import LEADER_EPOCH
from .topics import TOPIC_OPERATIONS

if TYPE_CHECKING:
    from ..cluster import Cluster
    from ..dataplane import TopicRegistry


class PartitionServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the topics and this node's
    identity."""

    node_id: int
    cluster_id: str
    topics: TopicRegistry
    cluster: Cluster | None  # several brokers: the layout; None: this node leads everything


log = structlog.get_logger("odradek.topics")

PREFERRED, UNCLEAN = 0, 1
MAX_PARTITIONS_PER_ANSWER = 2000
OMITTED = -2147483648  # Kafka's max.request.partition.size.limit


def register(table: HandlerTable, app: PartitionServices) -> None:
    table.register(37, partial(create_partitions, app))
    table.register(43, partial(elect_leaders, app))
    table.register(75, partial(describe_topic_partitions, app))
    table.register(45, partial(alter_partition_reassignments, app))
    table.register(46, list_partition_reassignments)


# --- CreatePartitions -------------------------------------------------------------------

async def create_partitions(app: PartitionServices, ctx: RequestContext, req) -> dict:
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        try:
            if counts[t.name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            await _grow_one(app, t, req.validate_only)
            results.append({"name": t.name, "error_code": ErrorCode.NONE, "error_message": None})
        except TopicError as exc:
            log.info("topic.create_partitions_refused", topic=t.name, count=t.count, error=exc.code.name,
                     reason=exc.message)
            results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
    return {"throttle_time_ms": 0, "results": results}


async def _grow_one(app: PartitionServices, t, validate_only: bool) -> None:
    if t.name in INTERNAL_TOPICS:
        # committed offsets and transactions are placed by a hash of the partition count
        raise TopicError(ErrorCode.INVALID_REQUEST, f"{t.name} is an internal topic; its partition count is fixed")
    registry = app.topics
    assignments = t.assignments
    registry.check_grow(t.name, t.count, None if assignments is None else len(assignments))
    replication = _replication(app, t.name, 0)
    for a in assignments or ():
        _check_assignment(_registered(app), list(a.broker_ids), replication)
    before = registry.partition_count(t.name) or 0
    await registry.grow(t.name, t.count, new_assignments=None if assignments is None else len(assignments),
                        validate_only=validate_only)
    if app.cluster is not None and assignments and not validate_only:
        await app.cluster.placed(t.name, t.count, replication,
                                 {before + i: list(a.broker_ids) for i, a in enumerate(assignments)})


def _registered(app: PartitionServices) -> list[int]:
    return [app.node_id] if app.cluster is None else app.cluster.nodes


def _replication(app: PartitionServices, topic: str, partition: int) -> int:
    """How many replicas the partition has (one without a cluster)."""
    state = None if app.cluster is None else app.cluster.state(topic, partition)
    return 1 if state is None else len(state.replicas)


def _check_assignment(registered: list[int], brokers: list[int], replication: int | None = None) -> None:
    """Kafka's checks of a manual assignment (``validateManualPartitionAssignment``); ``replication``:
    the replica count the topic's partitions already have, for new partitions."""
    if not brokers:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    previous = None
    for b in sorted(brokers):  # checked sorted, as Kafka does
        if b not in registered:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {b}, but no such broker "
                             "is registered.")
        if b == previous:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {b} more than once.")
        previous = b
    if replication is not None and len(brokers) != replication:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes a partition with {len(brokers)} replica(s), "
                         f"but this is not consistent with previous partitions, which have {replication} "
                         "replica(s).")


# --- AlterPartitionReassignments / ListPartitionReassignments -------------------------------

async def alter_partition_reassignments(app: PartitionServices, ctx: RequestContext, req) -> dict:
    """``ReplicationControlManager.alterPartitionReassignments``: each partition on its own."""
    allow_rf_change = req.allow_replication_factor_change if ctx.api_version >= 1 else True
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                await _reassign(app, t.name, p.partition_index, p.replicas, allow_rf_change)
                code, message = ErrorCode.NONE, None
            except TopicError as exc:
                code, message = exc.code, exc.message
                log.info("partitions.reassignment_refused", topic=t.name, partition=p.partition_index,
                         replicas=p.replicas, error=code.name, reason=message, client=ctx.client_id)
            parts.append({"partition_index": p.partition_index, "error_code": code, "error_message": message})
        responses.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change,
            "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


async def _reassign(app: PartitionServices, topic: str, partition: int, replicas: list[int] | None,
                    allow_rf_change: bool) -> None:
    count = app.topics.partition_count(topic)
    if count is None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
    if not 0 <= partition < count:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}.")
    if replicas is None:  # cancel: a reassignment completes in its answer, so none is in progress
        raise TopicError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    _check_assignment(_registered(app), list(replicas))
    current = _replication(app, topic, partition)
    if not allow_rf_change and len(replicas) != current:  # validatePartitionReplicationFactorUnchanged
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"The replication factor is changed from {current} to {len(replicas)}")
    if app.cluster is not None:
        await app.cluster.reassign(topic, partition, list(replicas))
    # one broker: the target is the current replica set, no change record, success


def list_partition_reassignments(ctx: RequestContext, req) -> dict:
    """Only partitions being reassigned are listed: none, as every reassignment completes at once."""
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": []}


# --- ElectLeaders ------------------------------------------------------------------------

async def elect_leaders(app: PartitionServices, ctx: RequestContext, req) -> dict:
    """Every existing partition already has its only possible leader: ELECTION_NOT_NEEDED,
    left out when all partitions were asked for (``topic_partitions`` null), as Kafka does."""
    if ctx.api_version >= 1 and req.election_type not in (PREFERRED, UNCLEAN):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "replica_election_results": []}
    if app.cluster is not None:
        return await _elect_in_cluster(app.cluster, app, ctx, req)
    results = []
    for t in req.topic_partitions or ():
        count = app.topics.partition_count(t.topic) or 0
        parts = []
        for p in dict.fromkeys(t.partitions):  # Kafka reads the request into a set
            if 0 <= p < count:
                parts.append({"partition_id": p, "error_code": ErrorCode.ELECTION_NOT_NEEDED,
                              "error_message": "Leader election not needed for topic partition."})
            else:
                parts.append({"partition_id": p, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "error_message": clip_message(f"The partition {t.topic}-{p} does not exist.")})
        results.append({"topic": t.topic, "partition_result": parts})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": results}


ELECTION_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "Failed to elect leader for partition {tp} under strategy PREFERRED",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Failed to elect leader for partition {tp} under strategy UNCLEAN",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "The partition {tp} does not exist.",
}


async def _elect_in_cluster(cluster: Cluster, app: PartitionServices, ctx: RequestContext, req) -> dict:
    """Each partition elected by Kafka's rules (``ReplicationControlManager.electLeaders``); with
    every partition asked for (null), those needing no election are left out."""
    unclean = ctx.api_version >= 1 and req.election_type == UNCLEAN
    asked = req.topic_partitions
    if asked is None:  # every partition, the internal topics' too
        every: dict[str, list[int]] = {}
        for name, p in cluster.all_partitions():
            every.setdefault(name, []).append(p)
        wanted = list(every.items())
    else:
        wanted = [(t.topic, list(dict.fromkeys(t.partitions))) for t in asked]
    results = []
    for topic, indexes in wanted:
        parts = []
        for p in indexes:
            code = await cluster.elect(topic, p, unclean)
            if asked is None and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            message = ELECTION_MESSAGES.get(code)
            parts.append({"partition_id": p, "error_code": code,
                          "error_message": None if message is None else clip_message(message.format(tp=f"{topic}-{p}"))})
        if parts or asked is not None:
            results.append({"topic": topic, "partition_result": parts})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": results}


# --- DescribeTopicPartitions ---------------------------------------------------------------

async def describe_topic_partitions(app: PartitionServices, ctx: RequestContext, req) -> dict:
    """Topics in name order from the cursor, at most ``response_partition_limit`` partitions
    (``DescribeTopicPartitionsRequestHandler``): a topic cut short is continued by ``next_cursor``."""
    named = [t.name for t in req.topics]
    cursor = req.cursor
    if cursor is not None and (cursor.partition_index < 0 or (named and cursor.topic_name not in named)):
        # Kafka fails the request: every requested topic answers INVALID_REQUEST
        return {"throttle_time_ms": 0, "next_cursor": None,
                "topics": [dict(_unknown(n, ErrorCode.INVALID_REQUEST), topic_authorized_operations=OMITTED)
                           for n in named]}
    names = sorted(set(named)) if named else _all_topics(app)
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(1, min(req.response_partition_limit, MAX_PARTITIONS_PER_ANSWER))
    topics: list[dict] = []
    next_cursor = None
    for i, name in enumerate(names):
        count = _count(app, name)
        if count is None:
            if named:
                code = ErrorCode.INVALID_TOPIC_EXCEPTION if name_error(name) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(_unknown(name, code))
            continue
        if budget == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        first = cursor.partition_index if cursor is not None and i == 0 and name == cursor.topic_name else 0
        last = min(count, first + budget)
        topics.append(_described(app, name, range(first, last)))
        budget -= last - first
        if last < count:
            next_cursor = {"topic_name": name, "partition_index": last}
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}


def _all_topics(app: PartitionServices) -> list[str]:
    names = app.topics.names()
    if app.topics.partition_count(OFFSETS_TOPIC):
        names.append(OFFSETS_TOPIC)
    return sorted(names)


def _count(app: PartitionServices, name: str) -> int | None:
    return app.topics.partition_count(name)


def _topic_id(app: PartitionServices, name: str):
    topic = app.topics.get(name)
    return topic.topic_id if topic is not None else app.topics.internal_topic_id(name, app.cluster_id)


def _described(app: PartitionServices, name: str, indexes: range) -> dict:
    node = app.node_id
    cluster = app.cluster
    # a leaderless partition keeps error 0 here (KRaftMetadataCache.describeTopicResponse)
    partitions = [{"error_code": ErrorCode.NONE, "partition_index": p, "leader_id": node,
                   "leader_epoch": LEADER_EPOCH, "replica_nodes": [node], "isr_nodes": [node],
                   "eligible_leader_replicas": [], "last_known_elr": [], "offline_replicas": []}
                  if cluster is None else
                  {"error_code": ErrorCode.NONE, "partition_index": p, **cluster.describe(name, p),
                   "eligible_leader_replicas": [], "last_known_elr": []}
                  for p in indexes]
    return {"error_code": ErrorCode.NONE, "name": name, "topic_id": _topic_id(app, name),
            "is_internal": name in INTERNAL_TOPICS,
            "partitions": partitions,
            "topic_authorized_operations": TOPIC_OPERATIONS}


def _unknown(name: str | None, code: ErrorCode) -> dict:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": [],
            "topic_authorized_operations": TOPIC_OPERATIONS}
