"""ShareFetch (v1-2) and ShareAcknowledge (v1-2): the data path of share groups (KIP-932).

Kafka's ``KafkaApis.handleShareFetchRequest`` / ``handleShareAcknowledgeRequest`` over the
share-partition manager (``share/manager.py``) and the share sessions
(``share/sessions.py``).  The order of checks is Kafka's:

1. share groups off (``group.share.enable`` false, ``share.version`` < 1) -> UNSUPPORTED_VERSION
   at the top; READ on the group (the guard) -> GROUP_AUTHORIZATION_FAILED; a member id empty or over 36
   characters -> INVALID_REQUEST; a v2 renew-only request must ask for nothing to fetch;
2. the share session (epoch 0 opens one and may carry no acknowledgements, n > 0 goes on,
   -1 ends it after its acknowledgements) -> SHARE_SESSION_NOT_FOUND,
   INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED at the top;
3. per partition: READ on the topic -> TOPIC_AUTHORIZATION_FAILED, an unknown topic id ->
   UNKNOWN_TOPIC_ID, a partition the topic lacks -> UNKNOWN_TOPIC_OR_PARTITION; in a cluster, a
   partition this node does not lead -> NOT_LEADER_OR_FOLLOWER with the leader hint (the cluster's
   guard; a session's cached partition is checked here, through ``LED_PARTITIONS``);
4. acknowledgement batches checked (first > last, overlapping or out of order, no types,
   a type list of the wrong length, an unknown type, RENEW without IsRenewAck) ->
   INVALID_REQUEST as the partition's acknowledge error, then applied (records not acquired
   by this member -> INVALID_RECORD_STATE);
5. the fetch: MaxRecords is one budget for the request, spent partition by partition; with
   nothing acquired the request waits up to MaxWaitMs (real time, a wait the client asks for)
   for an append, an acknowledgement, a release or a lock expiry on its partitions, without
   holding the event loop.

The member id is not checked against the group: Kafka's data path never asks the group
coordinator (the assignment only steers clients).
"""

from __future__ import annotations

import asyncio
import uuid
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.errors import ErrorCode
from ...shares.partition import AckBatch, AckType
from ..dispatch import AUTHORIZED_TOPICS, LED_PARTITIONS, HandlerTable, RequestContext
from ..share.manager import PartitionFetch, SharePartitionError
from ..share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession

if TYPE_CHECKING:
    from ..coordinator.group_configs import GroupConfigs
    from ..coordinator.service import Coordinator
    from ..dataplane import DataPlane, TopicRegistry
    from ..share.manager import SharePartitionManager
    from ..share.sessions import ShareSessionCache

E = ErrorCode
MAX_MEMBER_ID = 36
RENEW_VERSION = 2
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareAcquireMode (v2)
Partition = tuple[uuid.UUID, int]


class ShareServices(Protocol):
    """What the share data path uses of the broker (``BrokerApp`` wires it)."""

    topics: TopicRegistry
    dataplane: DataPlane
    coordinator: Coordinator | None
    group_configs: GroupConfigs
    cluster_id: str
    share_partitions: SharePartitionManager
    share_sessions: ShareSessionCache


def register(table: HandlerTable, app: ShareServices) -> None:
    table.register(78, partial(share_fetch, app), "1-2")
    table.register(79, partial(share_acknowledge, app), "1-2")


def share_groups_enabled(coordinator: Coordinator | None) -> bool:
    """Kafka's ``isShareGroupProtocolEnabled`` (``group.share.enable`` or ``share.version`` >= 1),
    decided where the group coordinator decides it for the heartbeat."""
    return coordinator is not None and coordinator.share_groups_enabled()


# --- the request, read once -------------------------------------------------------------------

class _Request:
    """The partitions a request names (merged by topic id and partition: librdkafka may list a
    topic twice) with their acknowledgement batches, and the request-level checks."""

    def __init__(self, req: Any, renew_allowed: bool, version: int) -> None:
        self.acks: dict[Partition, list] = {}
        for t in req["topics"]:
            for p in t["partitions"]:
                self.acks.setdefault((t["topic_id"], p["partition_index"]), []).extend(
                    p["acknowledgement_batches"])
        self.renew_allowed = renew_allowed
        self.max_type = AckType.RENEW if version >= RENEW_VERSION else AckType.REJECT

    @property
    def has_acks(self) -> bool:
        return any(self.acks.values())

    def ack_batches(self, raw: list) -> list[AckBatch] | None:
        """The partition's batches, or None when Kafka refuses them as INVALID_REQUEST."""
        out: list[AckBatch] = []
        previous = None
        for b in raw:
            first, last, types = b["first_offset"], b["last_offset"], tuple(b["acknowledge_types"])
            if first > last or (previous is not None and first <= previous) or not types:
                return None
            if len(types) > 1 and len(types) != last - first + 1:
                return None
            if any(not 0 <= t <= self.max_type for t in types):
                return None
            if AckType.RENEW in types and not self.renew_allowed:
                return None
            previous = last
            out.append(AckBatch(first, last, types))
        return out


def _member_error(req: Any) -> ErrorCode | None:
    member = req["member_id"]
    if not member or len(member) > MAX_MEMBER_ID or not req["group_id"]:
        return E.INVALID_REQUEST
    return None


def _resolve(app: ShareServices, topic_id: uuid.UUID, partition: int, denied: set[str]) -> tuple[str | None, ErrorCode]:
    """(topic name, error) of a partition as step 3 of Kafka's checks sees it."""
    name = app.topics.name_by_id(topic_id, app.cluster_id)
    if name is None:
        return None, E.UNKNOWN_TOPIC_ID
    if name in denied:
        return name, E.TOPIC_AUTHORIZATION_FAILED
    count = app.topics.partition_count(name)
    if count is None or not 0 <= partition < count:
        return name, E.UNKNOWN_TOPIC_OR_PARTITION
    return name, E.NONE


def _denied(app: ShareServices, req: Any, keys) -> set[str]:
    authorized = req.get(AUTHORIZED_TOPICS)
    if authorized is None:
        return set()
    names = {n for tid, _p in keys if (n := app.topics.name_by_id(tid, app.cluster_id)) is not None}
    return names - authorized(names)


def _row(partition: int, **fields: Any) -> dict:
    row = {"partition_index": partition, "error_code": E.NONE, "error_message": None,
           "acknowledge_error_code": E.NONE, "acknowledge_error_message": None,
           "current_leader": {"leader_id": -1, "leader_epoch": -1}, "records": b"", "acquired_records": []}
    row.update(fields)
    return row


def _by_topic(rows: dict[Partition, dict]) -> list[dict]:
    out: dict[uuid.UUID, dict] = {}
    for (topic_id, _p), row in rows.items():
        out.setdefault(topic_id, {"topic_id": topic_id, "partitions": []})["partitions"].append(row)
    return list(out.values())


async def _apply_acks(app: ShareServices, group: str, member: str, request: _Request, denied: set[str],
                      rows: dict[Partition, dict], ack_field: str) -> None:
    """Check and apply every partition's acknowledgements; each result lands in its row."""
    for key, raw in request.acks.items():
        if not raw:
            continue
        row = rows.setdefault(key, _row(key[1]))
        _name, error = _resolve(app, key[0], key[1], denied)
        if error is not E.NONE:
            row["error_code"] = error
            continue
        batches = request.ack_batches(raw)
        error = E.INVALID_REQUEST if batches is None else await app.share_partitions.acknowledge(
            group, member, key[0], key[1], batches)
        if error is not E.NONE:
            row[ack_field] = error


async def _end_session(app: ShareServices, session: ShareSession) -> None:
    app.share_sessions.close(session)
    await app.share_partitions.release(session.group, session.member, list(session.partitions))


def _top(code: ErrorCode, lock_ms: int, **extra: Any) -> dict:
    body = {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": [],
            "node_endpoints": [], "acquisition_lock_timeout_ms": lock_ms}
    body.update(extra)
    return body


# --- ShareFetch ------------------------------------------------------------------------------------

async def share_fetch(app: ShareServices, ctx: RequestContext, req: Any) -> dict:
    version = ctx.api_version
    group, member, epoch = req["group_id"], req["member_id"], req["share_session_epoch"]
    lock_ms = app.group_configs.effective(group or "").share_record_lock_duration_ms
    if not share_groups_enabled(app.coordinator):
        return _top(E.UNSUPPORTED_VERSION, 0)
    error = _member_error(req)
    renew = version >= RENEW_VERSION and req["is_renew_ack"]
    if error is None and renew and (req["max_bytes"] or req["min_bytes"] or req["max_records"] or req["max_wait_ms"]):
        error = E.INVALID_REQUEST
    request = _Request(req, renew, version)
    if error is None and epoch == INITIAL_EPOCH and request.has_acks:
        error = E.INVALID_REQUEST
    if error is not None:
        return _top(error, lock_ms)
    forgotten = [(t["topic_id"], p) for t in req["forgotten_topics_data"] for p in t["partitions"]]
    sessions = app.share_sessions
    if epoch == INITIAL_EPOCH:
        session, error = sessions.open(group, member, ctx.connection_id, request.acks)
        if error is E.SHARE_SESSION_LIMIT_REACHED:  # Kafka answers it after MaxWaitMs
            await asyncio.sleep(max(req["max_wait_ms"], 0) / 1000)
    else:
        session, error = sessions.check(group, member, epoch)
    if session is None:
        return _top(error, lock_ms)
    if epoch > INITIAL_EPOCH:
        for key in request.acks:
            session.partitions.setdefault(key)
        for key in forgotten:
            session.partitions.pop(key, None)
    denied = _denied(app, req, list(session.partitions) + list(request.acks))
    rows: dict[Partition, dict] = {}
    await _apply_acks(app, group, member, request, denied, rows, "acknowledge_error_code")
    if epoch == FINAL_EPOCH or renew:
        if epoch == FINAL_EPOCH:
            await _end_session(app, session)
        return _top(E.NONE, lock_ms, responses=_by_topic(rows))
    if epoch == INITIAL_EPOCH:
        for key in session.partitions:
            rows.setdefault(key, _row(key[1]))
    await _fetch(app, group, member, req, session, denied, rows)
    return _top(E.NONE, lock_ms, responses=_by_topic(rows))


async def _fetch(app: ShareServices, group: str, member: str, req: Any, session: ShareSession, denied: set[str],
                 rows: dict[Partition, dict]) -> None:
    """Acquire across the session's partitions within MaxRecords, waiting up to MaxWaitMs for any."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req["max_wait_ms"], 0) / 1000
    max_records, max_bytes, min_bytes = req["max_records"], req["max_bytes"], req["min_bytes"]
    record_limit = req.get("share_acquire_mode", BATCH_OPTIMIZED) == RECORD_LIMIT  # v2, KIP-1206
    if max_records <= 0 or max_bytes <= 0:
        return
    led = req.get(LED_PARTITIONS)  # a cluster's node: a cached partition that moved away is refused
    keys = list(session.partitions)
    if keys:  # Kafka rotates the partitions by session epoch so none starves
        shift = session.epoch % len(keys)
        keys = keys[shift:] + keys[:shift]
    while True:
        budget, got, waitable = max_records, 0, []
        for key in keys:
            name, error = _resolve(app, key[0], key[1], denied)
            if error is E.NONE and led is not None:
                error = led(name, key[1], -1) or E.NONE
            if error is not E.NONE:
                rows.setdefault(key, _row(key[1]))["error_code"] = error
                continue
            waitable.append((name, key[1]))
            if budget <= 0 or got >= max_bytes:
                continue
            try:
                fetched = await app.share_partitions.acquire(
                    group, member, key[0], key[1], name, max_records=budget, batch_size=req["batch_size"],
                    max_bytes=max_bytes - got, record_limit=record_limit)
            except SharePartitionError as exc:
                rows.setdefault(key, _row(key[1]))["error_code"] = exc.code
                continue
            if fetched.acquired:
                _fill(rows.setdefault(key, _row(key[1])), fetched)
                budget -= fetched.count
                got += len(fetched.records)
        remaining = deadline - loop.time()
        if (got and got >= min_bytes) or remaining <= 0 or not waitable:
            return
        await app.dataplane.waiters.wait(waitable, remaining)


def _fill(row: dict, fetched: PartitionFetch) -> None:
    row["records"] = fetched.records
    row["acquired_records"] = [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                "delivery_count": a.delivery_count} for a in fetched.acquired]


# --- ShareAcknowledge ------------------------------------------------------------------------------

async def share_acknowledge(app: ShareServices, ctx: RequestContext, req: Any) -> dict:
    version = ctx.api_version
    group, member, epoch = req["group_id"], req["member_id"], req["share_session_epoch"]
    lock_ms = app.group_configs.effective(group or "").share_record_lock_duration_ms
    if not share_groups_enabled(app.coordinator):
        return _top(E.UNSUPPORTED_VERSION, 0)
    error = _member_error(req)
    if error is not None:
        return _top(error, lock_ms)
    if epoch == INITIAL_EPOCH:
        return _top(E.INVALID_SHARE_SESSION_EPOCH, lock_ms)
    session, error = app.share_sessions.check(group, member, epoch)
    if session is None:
        return _top(error, lock_ms)
    request = _Request(req, version >= RENEW_VERSION and req["is_renew_ack"], version)
    denied = _denied(app, req, list(request.acks))
    rows: dict[Partition, dict] = {}
    await _apply_acks(app, group, member, request, denied, rows, "error_code")
    for key in request.acks:  # a partition named without batches is answered too
        rows.setdefault(key, _row(key[1]))
    if epoch == FINAL_EPOCH:
        await _end_session(app, session)
    responses = [{"topic_id": t["topic_id"], "partitions": [
        {"partition_index": r["partition_index"], "error_code": r["error_code"], "error_message": None,
         "current_leader": r["current_leader"]} for r in t["partitions"]]} for t in _by_topic(rows)]
    return _top(E.NONE, lock_ms, responses=responses)


def connection_closed(app: ShareServices, connection_id: int) -> None:
    """The connection that opened share sessions closed: they end and their records go back."""
    for session in app.share_sessions.closed_connection(connection_id):
        app.share_partitions.release_later(session.group, session.member, list(session.partitions))
