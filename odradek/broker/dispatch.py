"""The handler table: which API versions this broker serves, and who serves them.

Only APIs with a handler are advertised in ApiVersions, so the table is the
one truth about what works end to end; the docs compatibility table and the
tests read it too.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from ..protocol.lean_dataclass import dataclass
from ..protocol.registry import APIS, ApiSpec
from ..protocol.schema import Versions

# A handler returns the response body as a dict, NO_RESPONSE, a ``Later``, or an awaitable; or
# the body already encoded (``bytes``: a hot answer built from a template), which code amending
# answers (a quota's or a fault rule's throttle time) reads back first (``decoded``).
HandlerFn = Callable[["RequestContext", Any], Any]


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = _NoResponse()  # acks=0 Produce: the client expects nothing back
# an answer's key (never encoded) holding ``fn(body)``, which turns it into what Kafka sends when the
# request is throttled (a Fetch: no partitions, no new session; ``quota_enforcer``)
ON_THROTTLE = "_on_throttle"
# a decoded Fetch's key set by the ACL guard: ``fn(topic names) -> the allowed ones``, asked by the
# handler for every partition it reads (an incremental session's cached ones included)
AUTHORIZED_TOPICS = "_authorized_topics"
# a decoded Fetch's key set by a cluster's leadership guard (``cluster/guard.py``): ``fn(topic, partition,
# current leader epoch) -> the error this node answers instead, None to serve it``, asked by the
# handler for every partition it reads, an incremental session's cached ones included
LED_PARTITIONS = "_led_partitions"


class CloseConnection(Exception):
    """The request is one Kafka answers by closing the connection."""


class Later:
    """An answer the coordinator completes later: a parked JoinGroup, a commit awaiting fsync.

    Wraps the coordinator's (synchronous) promise and the function that
    shapes its result into the response body.  The server queues it and is
    called back when the promise completes, so no asyncio future is made
    per request.  The few methods are the ones the server uses on futures.
    """

    __slots__ = ("_promise", "_shape", "_cancelled")

    def __init__(self, promise: Any, shape: Callable[[Any], Any]) -> None:
        self._promise = promise
        self._shape = shape
        self._cancelled = False

    def done(self) -> bool:
        return self._promise.done

    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """The connection went away: the answer is dropped when it comes."""
        self._cancelled = True

    def result(self) -> Any:
        return self._shape(self._promise.result())

    def add_done_callback(self, callback: Callable[[Later], None]) -> None:
        self._promise.add_done_callback(lambda _result: callback(self))

    def as_future(self) -> asyncio.Future:
        """An asyncio future completed with the shaped answer, for the few callers that await one
        (a fault rule's delay, the console's in-process requests); the server never needs it."""
        future = asyncio.get_running_loop().create_future()

        def done(_later: Later) -> None:
            if future.done():
                return
            try:
                future.set_result(self.result())
            except Exception as exc:
                future.set_exception(exc)

        self.add_done_callback(done)
        return future


def answer_when(promise: Any, shape: Callable[[Any], Any]) -> Any:
    """The shaped answer now if the coordinator's promise is done, else a ``Later``."""
    if promise.done:
        return shape(promise.result())
    return Later(promise, shape)


def after(result: Any, fn: Callable[[dict], dict]) -> Any:
    """Apply ``fn`` to the handler's answer, whatever form it comes in (the guards' and quotas' one
    way to amend an answer: dict, coroutine or ``Later``)."""
    if result is NO_RESPONSE:
        return result
    if type(result) is Later:
        shape = result._shape
        return Later(result._promise, lambda r: _apply(fn, shape(r)))
    if inspect.isawaitable(result):
        async def chained() -> Any:
            return _apply(fn, await result)
        return chained()
    return _apply(fn, result)


def _apply(fn: Callable[[dict], dict], body: Any) -> Any:
    return body if body is NO_RESPONSE or body is None else fn(body)


def decoded(ctx: RequestContext, body: Any) -> Any:
    """A handler's answer as the dict it stands for: a body answered already encoded (``bytes``)
    is read back with the request's response codec; any other answer is returned as it is."""
    if type(body) is not bytes:
        return body
    return dict(APIS[ctx.api_key].response.codec(ctx.api_version)[0](body, 0)[0])


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    header: Any = None
    # who sent it and where: set by the connection once it is authenticated (Kafka's
    # ``RequestContext.principal`` / ``listenerName``); ANONYMOUS on PLAINTEXT
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
    node_id: int = -1  # the node whose listener it came in on (a cluster's nodes share one process)


@dataclass
class Handler:
    spec: ApiSpec
    versions: Versions
    fn: HandlerFn


class HandlerTable:
    def __init__(self, limits: dict[int, tuple[int, int]] | None = None,
                 advertised_floors: dict[int, int] | None = None) -> None:
        """``limits``: the {api key: (min, max)} of an emulated Kafka release (``emulation.py``);
        ``advertised_floors``: minimum versions its ApiVersions listed below what it served."""
        self._handlers: dict[int, Handler] = {}
        self.limits = limits
        self.advertised_floors = advertised_floors or {}
        # the server's per-(api key, version) lookups, built on first use; emptied by register()
        self.routes: dict[tuple[int, int], Any] = {}

    def register(self, api_key: int, fn: HandlerFn, versions: str | None = None) -> None:
        """Serve ``api_key`` (by default over its whole declared range)."""
        spec = APIS[api_key]
        served = spec.declared if versions is None else Versions.parse(versions)
        if served.lo < spec.declared.lo or served.hi is None or served.hi > spec.declared.hi:
            raise ValueError(f"{spec.name}: served {served} outside declared {spec.declared}")
        if self.limits is not None:
            limit = self.limits.get(api_key)
            lo, hi = (max(served.lo, limit[0]), min(served.hi, limit[1])) if limit else (1, 0)
            if lo > hi:  # the emulated release did not serve this API (or none of our versions)
                self._handlers.pop(api_key, None)
                self.routes.clear()
                return
            served = Versions(lo, hi)
        self._handlers[api_key] = Handler(spec, served, fn)
        self.routes.clear()

    def get(self, api_key: int) -> Handler | None:
        return self._handlers.get(api_key)

    def served(self) -> list[tuple[int, int, int]]:
        """(api key, min, max) for every served API, in key order."""
        return [(k, h.versions.lo, h.versions.hi) for k, h in sorted(self._handlers.items())]

    def advertised(self) -> list[tuple[int, int, int]]:
        """What ApiVersions lists: ``served()``, but for an emulated Kafka 4 Produce from v0,
        as its ``ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION`` (KAFKA-18659) does."""
        return [(k, min(lo, self.advertised_floors.get(k, lo)), hi) for k, lo, hi in self.served()]

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._handlers

