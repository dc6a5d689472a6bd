"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

Semantics are KRaft's: describe as ``ScramImage.describe`` (per user: the
mechanisms held with their iterations, RESOURCE_NOT_FOUND for an unknown
user, DUPLICATE_RESOURCE for a user named twice), alter as
``ScramControlManager.alterCredentials`` (DUPLICATE_RESOURCE for a user
touched twice, UNACCEPTABLE_CREDENTIAL for an empty name or iterations
outside 4096..16384, UNSUPPORTED_SASL_MECHANISM for a mechanism type other
than 1/2, RESOURCE_NOT_FOUND when deleting a credential that does not exist),
every accepted change of one request stored at once before the answer.

Authorization (Kafka's ``ControllerApis``/``KafkaApis``): DESCRIBE on CLUSTER
for describe, ALTER on CLUSTER for alter; a denied request gets
CLUSTER_AUTHORIZATION_FAILED.  ``_cluster_allowed`` is that check's one place.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ..dispatch import HandlerTable, RequestContext

if TYPE_CHECKING:
    from ..security.scram_store import ScramCredentialStore


class ScramServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the SCRAM credential store."""

    scram_credentials: ScramCredentialStore

    def authorize_cluster(self, ctx: RequestContext, operation: str) -> bool: ...


log = structlog.get_logger("odradek.security")

DUPLICATE_ALTER = "A user credential cannot be altered twice in the same request"
DUPLICATE_DESCRIBE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
NOT_FOUND_DESCRIBE = "Attempt to describe a user credential that does not exist: "
NOT_FOUND_DELETE = "Attempt to delete a user credential that does not exist"
AUTHZ_DENIED = "Cluster authorization failed."  # Errors.CLUSTER_AUTHORIZATION_FAILED


def register(table: HandlerTable, app: ScramServices) -> None:
    table.register(50, partial(describe_user_scram_credentials, app))
    table.register(51, partial(alter_user_scram_credentials, app))


def _cluster_allowed(app: ScramServices, ctx: RequestContext, operation: str) -> bool:
    """``operation`` (DESCRIBE / ALTER) on the CLUSTER resource for ``ctx.principal``.

    The authorizer (issue 23 item 4) plugs in here; until it does every principal may.
    """
    authorize = getattr(app, "authorize_cluster", None)
    return True if authorize is None else bool(authorize(ctx, operation))


# --- Describe -----------------------------------------------------------------------------

def describe_user_scram_credentials(app: ScramServices, ctx: RequestContext, req) -> dict:
    names = [u.name for u in req.users] if req.users else None
    if not _cluster_allowed(app, ctx, "DESCRIBE"):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": AUTHZ_DENIED,
                "results": [_user_error(u, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, AUTHZ_DENIED)
                            for u in dict.fromkeys(names or [])]}
    store = app.scram_credentials
    if names is None:
        duplicated: dict[str, bool] = dict.fromkeys(store.users(), False)
    else:
        duplicated = {}
        for name in names:
            duplicated[name] = name in duplicated
    results = []
    for user, twice in duplicated.items():
        if twice:
            results.append(_user_error(user, ErrorCode.DUPLICATE_RESOURCE, DUPLICATE_DESCRIBE + user))
            continue
        held = store.mechanisms(user)
        if not held:
            results.append(_user_error(user, ErrorCode.RESOURCE_NOT_FOUND, NOT_FOUND_DESCRIBE + user))
            continue
        infos = [{"mechanism": _type_of(name), "iterations": c.iterations} for name, c in held.items()]
        results.append({"user": user, "error_code": ErrorCode.NONE, "error_message": None,
                        "credential_infos": infos})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}


def _type_of(name: str) -> int:
    from ..security.scram import BY_TYPE  # noqa: PLC0415 - SCRAM code on the first request about it

    return next(m.type for m in BY_TYPE.values() if m.name == name)


def _user_error(user: str, code: ErrorCode, message: str) -> dict:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


# --- Alter --------------------------------------------------------------------------------

def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    """``ScramControlManager.validateScramUsernameAndMechanism``."""
    from ..security.scram import BY_TYPE  # noqa: PLC0415 - see _type_of

    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(u) -> tuple[ErrorCode, str] | None:
    from ..security.scram import BY_TYPE, MAX_ITERATIONS  # noqa: PLC0415 - see _type_of

    error = _check_name_and_mechanism(u.name, u.mechanism)
    if error is not None:
        return error
    if u.iterations < BY_TYPE[u.mechanism].min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def _plan(store, req) -> tuple[dict, dict, dict]:
    """(deletions, upsertions, errors) by user, as ``alterCredentials`` sorts them."""
    from ..security.scram import BY_TYPE  # noqa: PLC0415 - see _type_of

    deletions: dict = {}
    upserts: dict = {}
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for d in req.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = (ErrorCode.DUPLICATE_RESOURCE, DUPLICATE_ALTER)
            continue
        error = _check_name_and_mechanism(d.name, d.mechanism)
        if error is None and store.get(d.name, BY_TYPE[d.mechanism].name) is None:
            error = (ErrorCode.RESOURCE_NOT_FOUND, NOT_FOUND_DELETE)
        if error is not None:
            errors[d.name] = error
        else:
            deletions[d.name] = d
    for u in req.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.DUPLICATE_RESOURCE, DUPLICATE_ALTER)
            continue
        error = _check_upsertion(u)
        if error is not None:
            errors[u.name] = error
        else:
            upserts[u.name] = u
    return deletions, upserts, errors


async def alter_user_scram_credentials(app: ScramServices, ctx: RequestContext, req) -> dict:
    if not _cluster_allowed(app, ctx, "ALTER"):
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return {"throttle_time_ms": 0, "results": [
            {"user": u, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": AUTHZ_DENIED}
            for u in users]}
    from ..security.scram import BY_TYPE, credential_from_salted_password  # noqa: PLC0415 - see _type_of

    store = app.scram_credentials
    async with store.lock:  # one change at a time: validation and write see the same state
        deletions, upserts, errors = _plan(store, req)
        changes = {(u.name, BY_TYPE[u.mechanism].name): credential_from_salted_password(
            BY_TYPE[u.mechanism], u.salted_password, u.salt, u.iterations) for u in upserts.values()}
        removals = [(d.name, BY_TYPE[d.mechanism].name) for d in deletions.values()]
        stored = ErrorCode.NONE
        if changes or removals:
            try:
                await asyncio.to_thread(store.apply, changes, removals)
            except OSError as exc:
                log.error("scram.credentials_write_failed", error=str(exc))
                stored = ErrorCode.KAFKA_STORAGE_ERROR
    for user in list(deletions) + list(upserts):
        log.info("scram.credential_altered", user=user, principal=ctx.principal,
                 deleted=user in deletions, error=stored.name)
    results = [{"user": user, "error_code": stored, "error_message": None}
               for user in list(deletions) + list(upserts)]
    results += [{"user": user, "error_code": code, "error_message": message}
                for user, (code, message) in errors.items()]
    return {"throttle_time_ms": 0, "results": results}
