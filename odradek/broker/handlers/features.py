"""UpdateFeatures (57): change the finalized feature levels, as a KRaft controller answers.

The rules are ``features.py``'s (``FeatureControlManager``); here the wire
glue of ``QuorumController.updateFeatures``: the first refusal answers the
whole request with a top-level INVALID_UPDATE_VERSION ("The update failed for
all features since ...") and no results; a success answers error 0 and, up to
v1, one result per feature.  v0's ``allow_downgrade`` is not read: the
controller reads ``upgrade_type``, whose default (upgrade) is what a v0
request carries.  Accepted levels are stored durably, off the loop, before
the answer, and the features epoch moves on.  The authorization (ALTER on the
cluster) is the guard's (``security/guards.py``).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ..dispatch import HandlerTable, RequestContext
from ..features import UPGRADE, FeatureError

if TYPE_CHECKING:
    from ..features import Features


class FeatureServices(Protocol):
    """What this handler uses of the broker (``BrokerApp`` wires it): the features and their lock."""

    features: Features
    features_lock: asyncio.Lock


log = structlog.get_logger("odradek.features")


def register(table: HandlerTable, app: FeatureServices) -> None:
    table.register(57, partial(update_features, app))


def _answer(code: ErrorCode, message: str | None, results: list[dict]) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "results": results}


async def update_features(app: FeatureServices, ctx: RequestContext, req) -> dict:
    updates = [(u.feature, u.max_version_level, u.upgrade_type if ctx.api_version >= 1 else UPGRADE)
               for u in req.feature_updates]
    features = app.features
    async with app.features_lock:
        try:
            levels = features.validate(updates)
        except FeatureError as exc:
            return _answer(exc.code, "The update failed for all features since the following feature had "
                                     f"an error: {exc}", [])
        if updates and not req.validate_only:
            try:
                await asyncio.to_thread(features.save, levels, features.epoch + 1)
            except OSError as exc:
                log.error("features.write_failed", error=str(exc))
                return _answer(ErrorCode.UNKNOWN_SERVER_ERROR, None, [])
            features.apply(levels)
            log.info("features.updated", principal=ctx.principal, levels=levels, epoch=features.epoch)
    # each result's message is Errors.NONE.message(), i.e. "NONE" (QuorumController.updateFeatures)
    return _answer(ErrorCode.NONE, None, [{"feature": u.feature, "error_code": ErrorCode.NONE, "error_message": "NONE"}
                                          for u in req.feature_updates])
