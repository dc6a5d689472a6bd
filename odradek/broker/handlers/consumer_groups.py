"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (keys 68, 69; KIP-848): wire glue over
``coordinator/consumer_heartbeat.py`` and ``coordinator/consumer_admin.py``.

The answer of a heartbeat leaves once its records are durable and replayed (a ``Later``); a
Stable member's steady heartbeat is answered at once, already encoded (``steady_body``).
"""

from __future__ import annotations

import asyncio
import struct
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.fastcodec import DefaultTail
from ...protocol.primitives import encode_uvarint
from ..coordinator.consumer_admin import describe_consumer_groups
from ..coordinator.consumer_heartbeat import (
    HeartbeatRequest,
    HeartbeatResult,
    consumer_heartbeat,
    steady_member,
)
from ..dispatch import HandlerTable, RequestContext, answer_when
from ..runtime.runtime import ShardStatus

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator


class ConsumerGroupServices(Protocol):
    """What these handlers use of the broker: the group coordinator (None until it starts)."""

    coordinator: Coordinator | None


def register(table: HandlerTable, app: ConsumerGroupServices) -> None:
    table.register(68, partial(handle_consumer_group_heartbeat, app))
    table.register(69, partial(handle_consumer_group_describe, app))


def handle_consumer_group_heartbeat(app: ConsumerGroupServices, ctx: RequestContext,
                                    req) -> dict | bytes | asyncio.Future:
    coordinator = app.coordinator
    if coordinator is None:
        return heartbeat_response(HeartbeatResult.failed(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    group_id = req["group_id"]
    # the steady shape (nothing owned to report, no subscription change): a read whose default tail
    # matched has it by construction (instance id to owned partitions all null or -1)
    if type(req) is DefaultTail or (req["topic_partitions"] is None and req["rebalance_timeout_ms"] == -1
                                    and req["subscribed_topic_names"] is None
                                    and req["subscribed_topic_regex"] is None
                                    and req["server_assignor"] is None and req["rack_id"] is None):
        # the steady heartbeat, hot: ``GroupShards.check`` inlined for its one outcome that can be
        # steady (a non-empty group id on an active shard), the answer encoded from a template
        # (``steady_body``) once and kept on the member's ``Steady`` while it stays steady
        shards = coordinator.shards
        shard = shards[0] if len(shards) == 1 else coordinator.shard_for(group_id)
        if group_id and shard.status is _ACTIVE and coordinator.consumer_protocol_enabled():
            member_id, epoch = req["member_id"], req["member_epoch"]
            steady = steady_member(shard, coordinator.topics, group_id, member_id, epoch, req["instance_id"],
                                   ctx.client_id or "", ctx.client_host)
            if steady is not None:
                answer = steady.answer
                if answer is None:
                    answer = steady.answer = steady_body(member_id, epoch, steady.interval_ms)
                return answer
    owned = req["topic_partitions"]
    request = HeartbeatRequest(
        group_id=group_id, member_id=req["member_id"], member_epoch=req["member_epoch"],
        instance_id=req["instance_id"], rack_id=req["rack_id"], rebalance_timeout_ms=req["rebalance_timeout_ms"],
        subscribed_topic_names=None if req["subscribed_topic_names"] is None else list(req["subscribed_topic_names"]),
        subscribed_topic_regex=req["subscribed_topic_regex"], server_assignor=req["server_assignor"],
        owned=None if owned is None else _assignment(owned),
        version=ctx.api_version, client_id=ctx.client_id or "", client_host=ctx.client_host)
    return answer_when(consumer_heartbeat(coordinator, coordinator.topics, request), heartbeat_response)


_ACTIVE = ShardStatus.ACTIVE
# the steady answer's bytes around the member's id: no throttle, no error, a null message, then
# after the id its epoch and interval, a null assignment, no tagged fields (v0 and v1 alike)
_STEADY_HEAD = bytes(7)
_STEADY_TAIL = struct.Struct(">iiBB")
_COMPACT_LENGTHS = tuple(encode_uvarint(n + 1) for n in range(127))


def steady_body(member_id: str, epoch: int, interval: int) -> bytes:
    """``ConsumerGroupHeartbeatResponse`` (v0, v1) of no error for ``member_id`` at ``epoch``, as
    its generated writer encodes ``{"member_id", "member_epoch", "heartbeat_interval_ms"}``
    (checked equal in ``test_consumer_steady_answer``) in a third of its time."""
    name = member_id.encode()
    n = len(name)
    return b"".join((_STEADY_HEAD, _COMPACT_LENGTHS[n] if n < 127 else encode_uvarint(n + 1), name,
                     _STEADY_TAIL.pack(epoch, interval, 0xFF, 0)))


def _assignment(rows) -> dict:
    out: dict = {}
    for r in rows:
        out[r["topic_id"]] = out.get(r["topic_id"], frozenset()) | frozenset(r["partitions"])
    return out


def heartbeat_response(result: HeartbeatResult) -> dict:
    assignment = None
    if result.assignment is not None:  # the whole set the member may own now, by topic id
        assignment = {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                           for t, ps in sorted(result.assignment.items(), key=lambda i: i[0].bytes)
                                           if ps]}
    return {"throttle_time_ms": 0, "error_code": result.error, "error_message": result.message,
            "member_id": result.member_id, "member_epoch": result.member_epoch,
            "heartbeat_interval_ms": result.heartbeat_interval_ms, "assignment": assignment}


def handle_consumer_group_describe(app: ConsumerGroupServices, ctx: RequestContext, req) -> dict:
    coordinator = app.coordinator
    ids = list(req["group_ids"])
    if coordinator is None:
        groups = [{"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "group_id": g, "group_state": "",
                   "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []} for g in ids]
    else:
        groups = describe_consumer_groups(coordinator, ids, bool(req["include_authorized_operations"]))
    return {"throttle_time_ms": 0, "groups": groups}
