"""Cluster-level APIs: ApiVersions, Metadata, FindCoordinator, DescribeCluster.

A single node is every partition's leader, the controller and the group
coordinator; the advertised endpoint is the bound listener (or
``advertised.listeners``), never a guess, because clients reconnect to it --
and it is the endpoint of the listener the request arrived on, so a client
that bootstrapped on the TLS port only learns TLS addresses.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.primitives import ZERO_UUID
from ..dispatch import HandlerTable, RequestContext
from ..error_answers import error_answer
from .topics import MetadataServices, topic_metadata

if TYPE_CHECKING:
    from ..features import Features
    from ..security.listeners import Endpoint


class ClusterServices(MetadataServices, Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): who this node is and what
    each listener advertises, what topic metadata reads, and the cluster's feature levels."""

    features: Features

    def endpoint_for(self, listener: str) -> Endpoint: ...


AUTHORIZED_OPERATIONS_OMITTED = -2147483648
GROUP_KEY_TYPE = 0
# no authorizer: every operation a cluster supports, as Kafka reports when asked (CREATE,
# CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE)
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 9, 10, 11, 12, 7, 8))
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE, SHARE_KEY_VERSION = 2, 6  # KIP-932: a share-partition's share coordinator, v6+


def register(table: HandlerTable, app: ClusterServices) -> None:
    table.register(18, partial(api_versions, table, app))
    table.register(3, partial(metadata, app))
    table.register(10, partial(find_coordinator, app))
    table.register(60, partial(describe_cluster, app))


def api_versions(table: HandlerTable, app: ClusterServices, ctx: RequestContext, req) -> dict:
    """The versions served and, from v3, the features (``DefaultApiVersionManager``)."""
    answer = {
        "error_code": ErrorCode.NONE,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                     for k, lo, hi in table.advertised()],
        "throttle_time_ms": 0,
    }
    if ctx.api_version >= 3:
        answer.update(app.features.api_versions_fields(ctx.api_version))
    return answer


def _brokers(app: ClusterServices, ctx: RequestContext) -> list[dict]:
    """The live brokers at the request's listener (``getAliveBrokerNodes``)."""
    eps = [app.endpoint_for(ctx.listener)] if app.cluster is None else app.cluster.live_endpoints(ctx.listener)
    return [{"node_id": ep.node_id, "broker_id": ep.node_id, "host": ep.host, "port": ep.port,
             "rack": None} for ep in eps]


def _controller(app: ClusterServices) -> int:
    return app.node_id if app.cluster is None else app.cluster.controller()


async def metadata(app: ClusterServices, ctx: RequestContext, req) -> dict:
    if ctx.api_version < 12 and any(t.name is None or t.topic_id != ZERO_UUID for t in req.topics or ()):
        # v10/v11 declare topic ids but Kafka refuses them (KafkaApis.handleTopicMetadataRequest):
        # INVALID_REQUEST on every requested topic, a null name answered as ""
        return error_answer(3, ctx.api_version, req, ErrorCode.INVALID_REQUEST)
    return {
        "throttle_time_ms": 0,
        "brokers": _brokers(app, ctx),
        "cluster_id": app.cluster_id,
        "controller_id": _controller(app),
        "topics": await topic_metadata(app, ctx, req),
        "cluster_authorized_operations": _cluster_operations(req.include_cluster_authorized_operations),
    }


def _coordinator_for(app: ClusterServices, ctx: RequestContext, key: str, key_type: int) -> dict:
    """The coordinator of a group, transactional id or share-partition (key types 0, 1, 2): the
    leader of the internal partition the key hashes to (``KafkaApis.getCoordinator``); one node
    leads them all."""
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE) or (
            key_type == SHARE_KEY_TYPE and (ctx.api_version < SHARE_KEY_VERSION or share_key(key) is None)):
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": f"unsupported coordinator key type {key_type}"
                if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE) else None}
    if app.cluster is None:
        ep = app.endpoint_for(ctx.listener)
    else:
        cluster = app.cluster
        node = cluster.share_coordinator(*share_key(key)) if key_type == SHARE_KEY_TYPE else \
            cluster.coordinator(key, key_type == TRANSACTION_KEY_TYPE)
        ep = cluster.endpoint(node, ctx.listener)
        if ep is None:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None}
    return {"key": key, "node_id": ep.node_id, "host": ep.host, "port": ep.port,
            "error_code": ErrorCode.NONE, "error_message": None}


def share_key(key: str) -> tuple[str, uuid.UUID, int] | None:
    """(group, topic id, partition) of a share coordinator key ``"group:topicId:partition"``
    (``SharePartitionKey.getInstance``), None when it is not one."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "==")
        partition = int(parts[2])
    except (ValueError, binascii.Error):
        return None
    if len(raw) != 16 or partition < 0:
        return None
    return parts[0], uuid.UUID(bytes=raw), partition


def find_coordinator(app: ClusterServices, ctx: RequestContext, req) -> dict:
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [_coordinator_for(app, ctx, k, req.key_type) for k in req.coordinator_keys]}
    one = _coordinator_for(app, ctx, req.key, req.key_type)
    one["throttle_time_ms"] = 0
    return one


BROKER_ENDPOINT_TYPE = 1
CONTROLLER_ENDPOINT_TYPE = 2


def describe_cluster(app: ClusterServices, ctx: RequestContext, req) -> dict:
    wrong = _endpoint_type_error(req.endpoint_type)
    if wrong is not None:
        return {"throttle_time_ms": 0, "error_code": wrong[0], "error_message": wrong[1], "cluster_id": "",
                "brokers": []}
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": req.endpoint_type,
        "cluster_id": app.cluster_id,
        "controller_id": _controller(app),
        "brokers": [dict(b, is_fenced=False) for b in _brokers(app, ctx)] + _fenced(app, ctx, req),
        "cluster_authorized_operations": _cluster_operations(req.include_cluster_authorized_operations),
    }


def _fenced(app: ClusterServices, ctx: RequestContext, req) -> list[dict]:
    """Down brokers, listed only when asked (DescribeCluster v2 ``IncludeFencedBrokers``, KIP-1073)."""
    cluster = app.cluster
    if cluster is None or not getattr(req, "include_fenced_brokers", False):
        return []
    out = []
    for node in sorted(cluster.layout.down):
        eps = cluster.endpoints.get(node) or {}
        ep = eps.get(ctx.listener) or next(iter(eps.values()), None)
        if ep is not None:
            out.append({"node_id": ep.node_id, "broker_id": ep.node_id, "host": ep.host, "port": ep.port,
                        "rack": None, "is_fenced": True})
    return out


def _endpoint_type_error(endpoint_type: int) -> tuple[ErrorCode, str] | None:
    """Kafka's ``AuthHelper.computeDescribeClusterResponse`` on a broker listener: an unknown type
    is UNSUPPORTED_ENDPOINT_TYPE, the controllers' type MISMATCHED_ENDPOINT_TYPE (only v1+ can
    send either: v0 has no endpoint type)."""
    if endpoint_type == BROKER_ENDPOINT_TYPE:
        return None
    if endpoint_type != CONTROLLER_ENDPOINT_TYPE:
        return ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint_type}"
    return (ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")


def _cluster_operations(requested: bool) -> int:
    return CLUSTER_OPERATIONS if requested else AUTHORIZED_OPERATIONS_OMITTED
