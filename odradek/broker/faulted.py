"""Applying a test-control fault rule (``control/faults.py``) to one request, instead of or around its handler.

The connection (``server.Connection._process``) asks ``BrokerControl.on_request`` for the rule a
request matches, and hands it here with the request's handler: what comes back is answered like
any handler's answer (a dict, ``NO_RESPONSE`` or an awaitable), so a delay or a close after
handling waits on its own, without blocking other connections.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from . import partition_errors
from .dispatch import NO_RESPONSE, CloseConnection, Later, RequestContext, after, decoded
from .error_answers import error_answer
from .leader_hints import add_leader_hints, hinted

if TYPE_CHECKING:
    from .security.listeners import Endpoint


def apply_fault(rule: Any, api_key: int, handler: Any, ctx: RequestContext, body: Any, log: Any,
                api: str, leader: Callable[[str], Endpoint] | None = None) -> Any:
    """Apply ``rule`` to the request ``body`` whose handler is ``handler(ctx, body)``.

    An error answer is Kafka's error response for the request
    (``error_answers``) and the handler does not run; closing before
    means the handler does not run either; closing after runs it (a
    commit lands) and closes instead of answering; a delay or throttle
    wraps the handler's answer in a coroutine the connection waits on,
    as on any slow request, without blocking other connections.  ``leader``
    (this node's endpoint by listener) fills KIP-951's hints beside an
    injected NOT_LEADER_OR_FOLLOWER (``leader_hints``).
    """
    log.info("request.fault", api=api, version=ctx.api_version, rule=rule.id,
             error=rule.error, delay_ms=rule.delay_ms, close=rule.close, throttle_ms=rule.throttle_ms)
    if rule.close == "before":
        raise CloseConnection(f"fault rule {rule.id}: close before handling")
    if rule.error is not None and rule.per_partition:  # the chosen partitions fail, the rest is handled
        lay = partition_errors.layout(api_key, ctx.api_version)
        rest, chosen = partition_errors.split(lay, body, rule.topic, rule.partition)
        result = _with_partition_errors(handler(ctx, rest), lay, chosen, rule.error)
    elif rule.error is not None:
        answer = error_answer(api_key, ctx.api_version, body, rule.error)
        result = NO_RESPONSE if answer is None else answer
    else:
        result = handler(ctx, body)
    if leader is not None and hinted(api_key, ctx.api_version, rule.error):  # KIP-951, as Kafka answers
        result = after(result, partial(add_leader_hints, api_key, leader(ctx.listener)))
    if not rule.delay_ms and rule.close is None:
        if rule.throttle_ms is None or result is NO_RESPONSE:
            return result
        result = decoded(ctx, result)
        if type(result) is dict:
            return {**result, "throttle_time_ms": rule.throttle_ms}
    return _fault_later(rule, result, ctx)


def _with_partition_errors(result: Any, lay: Any, chosen: list, code: int) -> Any:
    """The handler's answer to the rest of a request, with the chosen partitions' errors added."""
    if type(result) is dict:
        return partition_errors.merge(lay, result, chosen, code)
    if result is NO_RESPONSE:
        return result

    async def later() -> Any:
        answer = await (result.as_future() if type(result) is Later else result)
        return partition_errors.merge(lay, answer, chosen, code) if type(answer) is dict else answer
    return later()


async def _fault_later(rule: Any, result: Any, ctx: RequestContext) -> Any:
    """The handler's answer, then the rule's delay, throttle or close (see ``apply_fault``)."""
    if type(result) is Later:
        result = await result.as_future()
    elif inspect.isawaitable(result):
        result = await result
    if rule.delay_ms:
        await asyncio.sleep(rule.delay_ms / 1000)
    if rule.close == "after":
        raise CloseConnection(f"fault rule {rule.id}: close after handling")
    if rule.throttle_ms is not None:
        result = decoded(ctx, result)
        if type(result) is dict:
            result = {**result, "throttle_time_ms": rule.throttle_ms}
    return result
