"""Group membership and admin APIs: JoinGroup, Heartbeat, LeaveGroup, SyncGroup,
DescribeGroups, ListGroups, DeleteGroups (keys 11-16, 42).

Wire glue only: decoded request -> coordinator call -> response dict shaped
for the request's version.  Parked answers (a JoinGroup waits for the join
phase, a SyncGroup for the leader's durable assignment) come back as
coordinator Promises and are handed to the server as futures, so pipelined
requests behind them keep their order.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ...protocol.errors import ErrorCode
from ..coordinator.admin import delete_groups, describe_groups, list_groups
from ..coordinator.api import (
    GroupDescription,
    JoinRequest,
    JoinResult,
    LeaveMember,
    LeaveResult,
    SyncRequest,
    SyncResult,
)
from ..coordinator.join import join_group
from ..coordinator.membership import heartbeat, leave_group, sync_group
from ..coordinator.state import GroupState
from ..dispatch import HandlerTable, RequestContext, answer_when

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator


class GroupServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the group coordinator (None
    until the broker starts)."""

    coordinator: Coordinator | None


AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# no authorizer: every operation a group supports (READ=3, DELETE=6, DESCRIBE=8) as a bit field
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def register(table: HandlerTable, app: GroupServices) -> None:
    table.register(11, partial(handle_join_group, app))
    table.register(12, partial(handle_heartbeat, app))
    table.register(13, partial(handle_leave_group, app))
    table.register(14, partial(handle_sync_group, app))
    table.register(15, partial(handle_describe_groups, app))
    table.register(16, partial(handle_list_groups, app))
    table.register(42, partial(handle_delete_groups, app))


def _unavailable(app: GroupServices) -> bool:
    return app.coordinator is None


# Decoded requests are dicts (construct Containers): item access is used on the hot paths,
# since attribute access on a Container costs about a microsecond each.

# --- JoinGroup ------------------------------------------------------------------------------


def handle_join_group(app: GroupServices, ctx: RequestContext, req) -> dict | asyncio.Future:
    version = ctx.api_version
    if _unavailable(app):
        return join_response(JoinResult.failed(req.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                             version)
    session = req["session_timeout_ms"]
    request = JoinRequest(
        group_id=req["group_id"], member_id=req["member_id"],
        group_instance_id=req["group_instance_id"], client_id=ctx.client_id or "",
        client_host=ctx.client_host, session_timeout_ms=session,
        # v0 has no rebalance timeout: the session timeout stands in
        rebalance_timeout_ms=req["rebalance_timeout_ms"] if version >= 1 else session,
        protocol_type=req["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in req["protocols"]],
        require_known_member_id=version >= 4, supports_skip_assignment=version >= 9,
        reason=req["reason"])
    return answer_when(join_group(app.coordinator, request), lambda r: join_response(r, version))


def join_response(result: JoinResult, version: int) -> dict:
    # "no protocol" is "" before v7 (non-nullable there), null from v7
    name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation,
        "protocol_type": result.protocol_type,
        "protocol_name": name,
        "leader": result.leader,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": meta}
                    for m, i, meta in result.members],
    }


# --- SyncGroup -------------------------------------------------------------------------------


def handle_sync_group(app: GroupServices, ctx: RequestContext, req) -> dict | asyncio.Future:
    version = ctx.api_version
    if _unavailable(app):
        return sync_response(SyncResult.failed(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    request = SyncRequest(
        group_id=req["group_id"], generation=req["generation_id"], member_id=req["member_id"],
        group_instance_id=req["group_instance_id"], protocol_type=req["protocol_type"],
        protocol_name=req["protocol_name"],
        assignments={a["member_id"]: bytes(a["assignment"]) for a in req["assignments"]},
        require_protocol=version >= 5)
    return answer_when(sync_group(app.coordinator, request), sync_response)


def sync_response(result: SyncResult) -> dict:
    return {"throttle_time_ms": 0, "error_code": result.error,
            "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
            "assignment": result.assignment}


# --- Heartbeat (hot) --------------------------------------------------------------------------


def handle_heartbeat(app: GroupServices, ctx: RequestContext, req) -> dict:
    coordinator = app.coordinator
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    error = heartbeat(coordinator, req["group_id"], req["generation_id"], req["member_id"],
                      req["group_instance_id"])
    return {"throttle_time_ms": 0, "error_code": error}


# --- LeaveGroup -------------------------------------------------------------------------------


def handle_leave_group(app: GroupServices, ctx: RequestContext, req) -> dict:
    version = ctx.api_version
    if version >= 3:
        leaving = [LeaveMember(m.member_id, m.group_instance_id, m.reason) for m in req.members]
    else:
        leaving = [LeaveMember(req.member_id)]
    if _unavailable(app):
        result = LeaveResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        result = leave_group(app.coordinator, req.group_id, leaving)
    return leave_response(result, version)


def leave_response(result: LeaveResult, version: int) -> dict:
    if version < 3:
        # down-conversion: the top-level error, else the (single) member's error
        error = result.error
        if error is ErrorCode.NONE:
            error = next((e for _, e in result.members if e is not ErrorCode.NONE), ErrorCode.NONE)
        return {"throttle_time_ms": 0, "error_code": error}
    return {"throttle_time_ms": 0, "error_code": result.error,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "error_code": e} for m, e in result.members]}


# --- DescribeGroups / ListGroups / DeleteGroups -------------------------------------------------


def handle_describe_groups(app: GroupServices, ctx: RequestContext, req) -> dict:
    with_ops = ctx.api_version >= 3 and bool(req.include_authorized_operations)
    if _unavailable(app):
        described = [GroupDescription(ErrorCode.COORDINATOR_NOT_AVAILABLE, g, "", "", "")
                     for g in req.groups]
    else:
        described = describe_groups(app.coordinator, list(req.groups))
    groups = [_described(d, with_ops) for d in described]
    if ctx.api_version >= 6:
        for g in groups:
            _not_found_when_dead(g, app.coordinator)
    return {"throttle_time_ms": 0, "groups": groups}


def _not_found_when_dead(group: dict, coordinator: Coordinator | None) -> None:
    """v6+ (KIP-1043): a group that does not exist, or is not a classic group (a KIP-848 one), is
    GROUP_ID_NOT_FOUND with the exception's message, still "Dead" (Kafka's
    ``GroupMetadataManager.describeGroups``); v0-5 keep error 0."""
    if group["error_code"] == ErrorCode.NONE and group["group_state"] == GroupState.DEAD.value:
        group_id = group["group_id"]
        group["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
        shard = coordinator.shard_for(group_id) if coordinator is not None else None
        modern = shard is not None and (group_id in shard.consumer_groups or group_id in shard.share_groups)
        group["error_message"] = f"Group {group_id} is not a classic group." if modern \
            else f"Group {group_id} not found."


def _described(d: GroupDescription, with_ops: bool) -> dict:
    ops = GROUP_AUTHORIZED_OPERATIONS if with_ops and d.error is ErrorCode.NONE \
        else AUTHORIZED_OPERATIONS_OMITTED
    return {
        "error_code": d.error, "group_id": d.group_id, "group_state": d.state,
        "protocol_type": d.protocol_type, "protocol_data": d.protocol,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "member_metadata": m.metadata, "member_assignment": m.assignment}
                    for m in d.members],
        "authorized_operations": ops,
    }


def handle_list_groups(app: GroupServices, ctx: RequestContext, req) -> dict:
    version = ctx.api_version
    states = list(req.states_filter) if version >= 4 else None
    types = list(req.types_filter) if version >= 5 else None
    if _unavailable(app):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "groups": []}
    error, groups = list_groups(app.coordinator, states, types)
    return {"throttle_time_ms": 0, "error_code": error,
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type,
                        "group_state": g.state, "group_type": g.group_type} for g in groups]}


def handle_delete_groups(app: GroupServices, ctx: RequestContext, req) -> dict | asyncio.Future:
    names = list(req.groups_names)
    if _unavailable(app):
        return _deleted({g: ErrorCode.COORDINATOR_NOT_AVAILABLE for g in names})
    return answer_when(delete_groups(app.coordinator, names), _deleted)


def _deleted(results: dict[str, ErrorCode]) -> dict:
    return {"throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": e} for g, e in results.items()]}
