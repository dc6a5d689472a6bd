"""ShareGroupHeartbeat and ShareGroupDescribe (keys 76, 77; KIP-932): wire glue over
``coordinator/share_heartbeat.py`` and ``coordinator/share_admin.py``.

Both answer UNSUPPORTED_VERSION while share groups are off (``GroupShards.share_groups_enabled``:
``group.share.enable`` or the finalized ``share.version``), as ``KafkaApis`` does: the keys stay
listed in ApiVersions.  A heartbeat's answer leaves once its records are durable (a ``Later``).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ...protocol.errors import ErrorCode
from ..coordinator.share_admin import describe_share_groups, described_error
from ..coordinator.share_heartbeat import (
    MAX_MEMBER_ID_LENGTH,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
    share_heartbeat,
)
from ..dispatch import HandlerTable, RequestContext, answer_when
from .consumer_groups import heartbeat_response  # ShareGroupHeartbeatResponse has the same fields

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator


class ShareGroupServices(Protocol):
    """What these handlers use of the broker: the group coordinator (None until it starts)."""

    coordinator: Coordinator | None


def register(table: HandlerTable, app: ShareGroupServices) -> None:
    table.register(76, partial(handle_share_group_heartbeat, app))
    table.register(77, partial(handle_share_group_describe, app))


def handle_share_group_heartbeat(app: ShareGroupServices, ctx: RequestContext, req) -> dict | asyncio.Future:
    coordinator = app.coordinator
    if coordinator is None:
        return heartbeat_response(ShareHeartbeatResult.failed(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    if not coordinator.share_groups_enabled():
        return heartbeat_response(ShareHeartbeatResult.failed(ErrorCode.UNSUPPORTED_VERSION))
    member_id = req["member_id"]
    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:  # KafkaApis.isMemberIdValid
        return heartbeat_response(ShareHeartbeatResult.failed(
            ErrorCode.INVALID_REQUEST, "MemberId must be non-empty and at most 36 characters."))
    names = req["subscribed_topic_names"]
    request = ShareHeartbeatRequest(
        group_id=req["group_id"], member_id=member_id, member_epoch=req["member_epoch"], rack_id=req["rack_id"],
        subscribed_topic_names=None if names is None else list(names),
        client_id=ctx.client_id or "", client_host=ctx.client_host)
    return answer_when(share_heartbeat(coordinator, request), heartbeat_response)


def handle_share_group_describe(app: ShareGroupServices, ctx: RequestContext, req) -> dict:
    coordinator = app.coordinator
    ids = list(req["group_ids"])
    if coordinator is None:
        groups = [described_error(g, ErrorCode.COORDINATOR_NOT_AVAILABLE) for g in ids]
    elif not coordinator.share_groups_enabled():
        groups = [described_error(g, ErrorCode.UNSUPPORTED_VERSION) for g in ids]
    else:
        groups = describe_share_groups(coordinator, ids, bool(req["include_authorized_operations"]))
    return {"throttle_time_ms": 0, "groups": groups}
