"""DescribeClientQuotas (48) and AlterClientQuotas (49), as a KRaft broker answers them.

The rules are ``client_quotas.py``'s; here the wire glue: a describe error
answers the whole request with ``entries`` null, an alter error answers
its entity only (every other entity of the request is still applied, as
``ClientQuotaControlManager.alterClientQuotas`` does), and the accepted
changes are stored durably, off the loop, before the answer.  The
authorization (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster) is the
guard's (``security/guards.py``).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ..client_quotas import QuotaError, QuotaFilter, check_value, entity_of
from ..dispatch import HandlerTable, RequestContext

if TYPE_CHECKING:
    from ..client_quotas import Entity, QuotaStore


class QuotaServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the quota store."""

    client_quotas: QuotaStore
    client_quotas_lock: asyncio.Lock

    def quotas_changed(self) -> None: ...


log = structlog.get_logger("odradek.quotas")


def register(table: HandlerTable, app: QuotaServices) -> None:
    table.register(48, partial(describe_client_quotas, app))
    table.register(49, partial(alter_client_quotas, app))


def describe_client_quotas(app: QuotaServices, ctx: RequestContext, req) -> dict:
    try:
        flt = QuotaFilter([(c.entity_type, c.match_type, c.match) for c in req.components], req.strict)
    except QuotaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": str(exc), "entries": None}
    entries = [{"entity": _wire_entity(entity),
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for entity, values in app.client_quotas.describe(flt)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


def _wire_entity(entity: Entity) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


def _ops(entity: Entity, ops) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for op in ops:
        if not op.remove:  # a removal is not validated: an absent key is simply not there
            check_value(entity, op.key, op.value)
        out[op.key] = None if op.remove else float(op.value)
    return out


async def alter_client_quotas(app: QuotaServices, ctx: RequestContext, req) -> dict:
    results: list[tuple[list, ErrorCode, str | None]] = []
    changes: dict[Entity, dict[str, float | None]] = {}
    for entry in req.entries:
        wire = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        try:
            entity = entity_of([(e.entity_type, e.entity_name) for e in entry.entity])
            ops = _ops(entity, entry.ops)
        except QuotaError as exc:
            results.append((wire, exc.code, str(exc)))
            continue
        changes.setdefault(entity, {}).update(ops)
        results.append((wire, ErrorCode.NONE, None))
    if changes and not req.validate_only:
        store = app.client_quotas
        async with app.client_quotas_lock:
            quotas = store.changed(changes)
            try:
                await asyncio.to_thread(store.save, quotas)
            except OSError as exc:
                log.error("quotas.write_failed", error=str(exc))
                results = [(w, ErrorCode.UNKNOWN_SERVER_ERROR, f"could not store the quotas: {exc}") if c is ErrorCode.NONE else (w, c, m)
                           for w, c, m in results]
            else:
                store.apply(quotas)
                app.quotas_changed()
                log.info("quotas.altered", principal=ctx.principal,
                         entities=[dict(e) for e in changes])
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": message, "entity": wire} for wire, code, message in results]}
