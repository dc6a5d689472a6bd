"""Kafka requests made in process: an HTTP surface calls the broker's own handlers.

The console creates topics, produces, resets offsets ... through the same handler (and, with an
authorizer, the same guard, as ``principal``) a Kafka client's request reaches: the body is built
and read with the API's codec, so the handler gets exactly the object a connection would hand it,
and its answer is read back the same way.  Nothing of a connection applies: no fault rule, no
capture, no quota (the console is not a client under test).
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any

from ..broker.dispatch import NO_RESPONSE, HandlerTable, Later, RequestContext
from ..protocol.registry import APIS

_BY_NAME = {spec.name: key for key, spec in APIS.items()}


class KafkaCallError(Exception):
    """The API is not served, or the handler gave no answer."""


class LocalKafka:
    """``await kafka.call("CreateTopics", 5, {...})`` -> the decoded answer (attribute access)."""

    def __init__(self, handlers: HandlerTable, principal: str = "User:ANONYMOUS",
                 listener: str = "PLAINTEXT", client_id: str = "odradek-console") -> None:
        self.handlers = handlers
        self.principal = principal
        self.listener = listener
        self.client_id = client_id
        self._ids = itertools.count(1)

    def version(self, api: str, wanted: int) -> int:
        """``wanted``, or the nearest version this broker serves (an emulated release may cap it)."""
        handler = self.handlers.get(_BY_NAME[api])
        if handler is None:
            raise KafkaCallError(f"{api} is not served by this broker")
        return max(handler.versions.lo, min(wanted, handler.versions.hi))

    async def call(self, api: str, wanted: int, body: dict) -> Any:
        key = _BY_NAME[api]
        version = self.version(api, wanted)
        spec = APIS[key]
        read_request = spec.request.codec(version)[0]
        request, _ = read_request(spec.request.build(body, version), 0)
        ctx = RequestContext(key, version, next(self._ids), self.client_id, "127.0.0.1", -1,
                             principal=self.principal, listener=self.listener)
        result = self.handlers.get(key).fn(ctx, request)
        if type(result) is Later:
            result = await result.as_future()
        elif inspect.isawaitable(result):
            result = await result
        if result is NO_RESPONSE or result is None:
            raise KafkaCallError(f"{api} gave no answer")
        body = result if type(result) is bytes else spec.response.build(result, version)  # bytes: encoded
        return spec.response.parse(body, version)
