"""ACL APIs: DescribeAcls, CreateAcls, DeleteAcls (keys 29-31), as Kafka's ``AclApis``.

Without an authorizer every answer is SECURITY_DISABLED; with one, describing
needs DESCRIBE on the cluster and changing needs ALTER on it.  A change is
written to the ACL file before it is applied and answered.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ..dispatch import HandlerTable, RequestContext

if TYPE_CHECKING:
    from ..security.acls import AclBinding, AclFilter
    from ..security.authorizer import Authorizer


class AclServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the ACL store and its
    decisions."""

    authorizer: Authorizer | None


log = structlog.get_logger("odradek.authorizer")

NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_DENIED = "Cluster authorization failed."


def register(table: HandlerTable, app: AclServices) -> None:
    table.register(29, partial(describe_acls, app))
    table.register(30, partial(create_acls, app))
    table.register(31, partial(delete_acls, app))


def _filter(f) -> AclFilter:
    from ..security.acls import AclFilter  # noqa: PLC0415 - ACL code only with an authorizer

    return AclFilter.of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                        f.principal_filter, f.host_filter, f.operation, f.permission_type)


# --- DescribeAcls -------------------------------------------------------------------------

def describe_acls(app: AclServices, ctx: RequestContext, req) -> dict:
    authz = app.authorizer
    if authz is None:
        return _described(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    from ..security.acls import AclOperation  # noqa: PLC0415 - loaded with the authorizer

    if not authz.cluster(ctx, AclOperation.DESCRIBE):
        return _described(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
    flt = _filter(req)
    bad = flt.unknown_field()
    if bad is not None:
        return _described(ErrorCode.INVALID_REQUEST, bad)
    groups: dict[tuple, list[AclBinding]] = {}
    for acl in authz.acls.matching(flt):
        groups.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    resources = [{"resource_type": t, "resource_name": n, "pattern_type": p,
                  "acls": [{"principal": a.principal, "host": a.host, "operation": a.operation,
                            "permission_type": a.permission} for a in acls]}
                 for (t, n, p), acls in groups.items()]
    return _described(ErrorCode.NONE, None, resources)


def _described(code: ErrorCode, message: str | None, resources: list | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "resources": resources or []}


# --- CreateAcls ---------------------------------------------------------------------------

async def create_acls(app: AclServices, ctx: RequestContext, req) -> dict:
    authz = app.authorizer
    if authz is None:
        return _created([(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)] * len(req.creations))
    from ..security.acls import AclOperation, InvalidAcl, binding, validate_binding  # noqa: PLC0415 - loaded with the authorizer

    if not authz.cluster(ctx, AclOperation.ALTER):
        return _created([(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)] * len(req.creations))
    results: list[tuple[ErrorCode, str | None]] = []
    new: list[AclBinding] = []
    for c in req.creations:
        b = binding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                    c.operation, c.permission_type)
        try:
            validate_binding(b)
        except InvalidAcl as exc:
            results.append((ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        new.append(b)
        results.append((ErrorCode.NONE, None))
    if new:
        try:
            await authz.create(new)
        except OSError as exc:
            log.error("acls.write_failed", error=str(exc))
            results = [(ErrorCode.UNKNOWN_SERVER_ERROR, f"could not store the ACLs: {exc}")
                       if code is ErrorCode.NONE else (code, m) for code, m in results]
        else:
            log.info("acls.created", principal=ctx.principal, acls=[str(b) for b in new])
    return _created(results)


def _created(results: list[tuple[ErrorCode, str | None]]) -> dict:
    return {"throttle_time_ms": 0,
            "results": [{"error_code": code, "error_message": message} for code, message in results]}


# --- DeleteAcls ---------------------------------------------------------------------------

async def delete_acls(app: AclServices, ctx: RequestContext, req) -> dict:
    authz = app.authorizer
    if authz is None:
        return _deleted([_filter_error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)] * len(req.filters))
    from ..security.acls import AclOperation  # noqa: PLC0415 - loaded with the authorizer

    if not authz.cluster(ctx, AclOperation.ALTER):
        return _deleted([_filter_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)]
                        * len(req.filters))
    results = []
    doomed: set[AclBinding] = set()
    for f in req.filters:
        flt = _filter(f)
        bad = flt.unknown_field()
        if bad is not None:
            results.append(_filter_error(ErrorCode.INVALID_REQUEST, bad))
            continue
        matched = authz.acls.matching(flt)
        doomed.update(matched)
        results.append({"error_code": ErrorCode.NONE, "error_message": None,
                        "matching_acls": [_matching(a) for a in matched]})
    if doomed:
        try:
            await authz.delete(list(doomed))
        except OSError as exc:
            log.error("acls.write_failed", error=str(exc))
            return _deleted([_filter_error(ErrorCode.UNKNOWN_SERVER_ERROR, f"could not store the ACLs: {exc}")]
                            * len(req.filters))
        log.info("acls.deleted", principal=ctx.principal, acls=[str(b) for b in sorted(doomed, key=str)])
    return _deleted(results)


def _filter_error(code: ErrorCode, message: str) -> dict:
    return {"error_code": code, "error_message": message, "matching_acls": []}


def _matching(a: AclBinding) -> dict:
    return {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": a.resource_type,
            "resource_name": a.resource_name, "pattern_type": a.pattern_type, "principal": a.principal,
            "host": a.host, "operation": a.operation, "permission_type": a.permission}


def _deleted(results: list[dict]) -> dict:
    return {"throttle_time_ms": 0, "filter_results": results}
