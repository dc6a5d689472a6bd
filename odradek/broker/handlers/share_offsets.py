"""DescribeShareGroupOffsets (v0-1), AlterShareGroupOffsets (v0), DeleteShareGroupOffsets (v0).

Kafka's ``KafkaApis.handle*ShareGroupOffsetsRequest`` over ``GroupCoordinatorService``:
the values come from the share coordinator (ReadShareGroupStateSummary; Initialize for an
alter, Delete for a delete), the "does the group exist, is it empty" from the group
coordinator (``share/groups.share_group_status``).

- Describe: per group (DESCRIBE, else 30 for that group); ``Topics`` null lists every
  share-partition the group has state for; an unknown topic's partitions answer start
  offset -1 with the zero topic id and no error; a topic the caller may not DESCRIBE gets
  29 per partition.  v1 adds ``Lag`` (KIP-1226): the high watermark minus the start offset
  minus the records already acknowledged or archived past it (-1 when either is unknown).
- Alter: READ on the group; the group must have no members (68) and be a share group if it
  exists (69); each partition's state is replaced by a fresh snapshot at the given start
  offset (in-flight state discarded), with the next state epoch, so a stale leader's
  writes are fenced (124) and the live share-partition is reloaded.
- Delete: DELETE on the group; absent or another kind of group -> 69, members -> 68; per
  topic: unknown -> 3, no state -> 3; otherwise every partition's state goes (tombstones).
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.primitives import ZERO_UUID
from ..dispatch import AUTHORIZED_TOPICS, HandlerTable, RequestContext
from ..share.coordinator import wait
from ..share.groups import ShareGroupStatus, initialized_partitions, record_initialized, share_group_status
from .share import share_groups_enabled

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator
    from ..dataplane import TopicRegistry
    from ..share.coordinator import ShareCoordinator
    from ..share.manager import SharePartitionManager

E = ErrorCode


class ShareOffsetServices(Protocol):
    """What the share offset admin APIs use of the broker (``BrokerApp`` wires it)."""

    topics: TopicRegistry
    cluster_id: str
    coordinator: Coordinator | None
    share_coordinator: ShareCoordinator | None
    share_partitions: SharePartitionManager


def register(table: HandlerTable, app: ShareOffsetServices) -> None:
    table.register(90, partial(describe_share_group_offsets, app), "0-1")
    table.register(91, partial(alter_share_group_offsets, app), "0")
    table.register(92, partial(delete_share_group_offsets, app), "0")


def _allowed(req: Any, names: set[str]) -> set[str]:
    authorized = req.get(AUTHORIZED_TOPICS)
    return names if authorized is None else authorized(names)


# --- Describe ----------------------------------------------------------------------------------

async def describe_share_group_offsets(app: ShareOffsetServices, ctx: RequestContext, req: Any) -> dict:
    groups = [_describe_group(app, req, g) for g in req["groups"]]
    return {"throttle_time_ms": 0, "groups": groups}


def _group_error(group_id: str, code: ErrorCode) -> dict:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": None}


def _describe_group(app: ShareOffsetServices, req: Any, g: Any) -> dict:
    group_id = g["group_id"]
    if not share_groups_enabled(app.coordinator):
        return _group_error(group_id, E.UNSUPPORTED_VERSION)
    coordinator = app.share_coordinator
    if not group_id:
        return _group_error(group_id, E.INVALID_GROUP_ID)
    if coordinator is None:
        return _group_error(group_id, E.COORDINATOR_NOT_AVAILABLE)
    if g["topics"] is None:  # every initialized share-partition (those with state, for a group unknown here)
        initialized = initialized_partitions(app.coordinator, group_id)
        if initialized is None:
            initialized = {}
            for _group, tid, partition in coordinator.states_of(group_id):
                initialized.setdefault(tid, set()).add(partition)
        wanted: dict[str, list[int]] = {}
        for tid, partitions in initialized.items():
            name = app.topics.name_by_id(tid, app.cluster_id)
            if name is not None:
                wanted[name] = sorted(partitions)
    else:
        wanted = {}
        for t in g["topics"]:
            wanted.setdefault(t["topic_name"], []).extend(t["partitions"])
    allowed = _allowed(req, set(wanted))
    topics = []
    for name, partitions in wanted.items():
        topic_id = app.topics.id_by_name(name, app.cluster_id)
        rows = [_describe_partition(app, coordinator, group_id, name, topic_id, p, name in allowed)
                for p in partitions]
        topics.append({"topic_name": name, "topic_id": topic_id or ZERO_UUID, "partitions": rows})
    return {"group_id": group_id, "topics": topics, "error_code": E.NONE, "error_message": None}


def _describe_partition(app: ShareOffsetServices, coordinator: ShareCoordinator, group_id: str, name: str,
                        topic_id: uuid.UUID | None, partition: int, allowed: bool) -> dict:
    row = {"partition_index": partition, "start_offset": -1, "leader_epoch": -1, "lag": -1,
           "error_code": E.NONE, "error_message": None}
    if not allowed:
        row["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
        return row
    if topic_id is None:
        return row
    error, summary = coordinator.read_summary((group_id, topic_id, partition))
    if error is not E.NONE:
        row["error_code"] = error
        return row
    row["start_offset"], row["leader_epoch"] = summary.start_offset, summary.leader_epoch
    lg = app.topics.log(name, partition)
    if lg is not None and summary.start_offset >= 0 and summary.delivery_complete_count >= 0:
        row["lag"] = max(lg.log_end_offset - summary.start_offset - summary.delivery_complete_count, 0)
    return row


# --- Alter and Delete ---------------------------------------------------------------------------

def _top(code: ErrorCode, responses: list | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": responses or []}


def _checked_group(app: ShareOffsetServices, group_id: str, absent_ok: bool) -> ErrorCode:
    """The group-level answer before any topic is looked at (Kafka's order)."""
    if not share_groups_enabled(app.coordinator):
        return E.UNSUPPORTED_VERSION
    if not group_id:
        return E.INVALID_GROUP_ID
    if app.share_coordinator is None:
        return E.COORDINATOR_NOT_AVAILABLE
    status, error = share_group_status(app.coordinator, group_id)
    if status is None:
        return error
    if status is ShareGroupStatus.OTHER_KIND or (status is ShareGroupStatus.ABSENT and not absent_ok):
        return E.GROUP_ID_NOT_FOUND
    if status is ShareGroupStatus.ACTIVE:
        return E.NON_EMPTY_GROUP
    return E.NONE


async def alter_share_group_offsets(app: ShareOffsetServices, ctx: RequestContext, req: Any) -> dict:
    group_id = req["group_id"]
    error = _checked_group(app, group_id, absent_ok=True)  # Kafka creates an absent share group
    if error is not E.NONE:
        return _top(error)
    coordinator = app.share_coordinator
    allowed = _allowed(req, {t["topic_name"] for t in req["topics"]})
    responses = []
    for t in req["topics"]:
        name = t["topic_name"]
        topic_id = app.topics.id_by_name(name, app.cluster_id)
        count = app.topics.partition_count(name) if topic_id is not None else None
        rows, done = [], set()
        for p in t["partitions"]:
            index = p["partition_index"]
            if name not in allowed:
                code = E.TOPIC_AUTHORIZATION_FAILED
            elif count is None or not 0 <= index < count:
                code = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                ident = (group_id, topic_id, index)
                code, summary = coordinator.read_summary(ident)
                if code is E.NONE:
                    code = ErrorCode(await wait(coordinator.initialize(ident, state_epoch=summary.state_epoch + 1,
                                                                       start_offset=p["start_offset"])))
                app.share_partitions.forget([ident])
                if code is E.NONE:
                    done.add(index)
            rows.append({"partition_index": index, "error_code": code, "error_message": None})
        if done:  # the group's next heartbeat must not initialize them again (start offset -1)
            await wait(record_initialized(app.coordinator, group_id, topic_id, name, done, initialized=True))
        responses.append({"topic_name": name, "topic_id": topic_id or ZERO_UUID, "partitions": rows})
    return _top(E.NONE, responses)


async def delete_share_group_offsets(app: ShareOffsetServices, ctx: RequestContext, req: Any) -> dict:
    group_id = req["group_id"]
    error = _checked_group(app, group_id, absent_ok=False)
    if error is not E.NONE:
        return _top(error)
    coordinator = app.share_coordinator
    allowed = _allowed(req, {t["topic_name"] for t in req["topics"]})
    states = coordinator.states_of(group_id)
    responses = []
    for t in req["topics"]:
        name = t["topic_name"]
        topic_id = app.topics.id_by_name(name, app.cluster_id)
        keys = [k for k in states if k[1] == topic_id] if topic_id is not None else []
        if name not in allowed:
            code = E.TOPIC_AUTHORIZATION_FAILED
        elif not keys:  # unknown topic, or no offset information for it
            code = E.UNKNOWN_TOPIC_OR_PARTITION
        else:
            code = E.NONE
            for key in keys:
                result = ErrorCode(await wait(coordinator.delete(key)))
                code = result if code is E.NONE else code
            app.share_partitions.forget(keys)
            if code is E.NONE:  # the topic is initialized afresh when a member subscribes it again
                await wait(record_initialized(app.coordinator, group_id, topic_id, name, set(), initialized=False))
        responses.append({"topic_name": name, "topic_id": topic_id or ZERO_UUID, "error_code": code,
                          "error_message": None})
    return _top(E.NONE, responses)
