"""The control endpoint: :class:`BrokerControl`'s operations over a tiny JSON-over-HTTP protocol.

For a broker run as a process or a container (``odradek control`` and
``curl`` talk to it).  A testing tool, never for production: it is off
unless ``odradek.control.listener`` is set, binds to 127.0.0.1 unless that
setting names another host, and has no authentication.

    POST /v1/<operation>   body: a JSON object of keyword arguments (may be empty)
    GET  /v1/              the operation names

Answers are JSON: ``{"result": ...}`` with status 200, or ``{"error": "..."}``
with 400 (bad arguments: the operation's ``ValueError``/``TypeError``), 404
(no such operation), 409 (not in this state: ``captured`` while capture is off) or 500.
Served by the HTTP surfaces' one stack (aiohttp on the broker's loop, ``web/http.py``); the
port is bound at start and aiohttp loaded on its first connection (``web/deferred.py``), so
turning the endpoint on costs the broker's start-up nothing.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import structlog

from ..broker.control.capture import CaptureOff, to_plain
from ..broker.lazy_import import import_off_loop
from .deferred import DeferredListener

log = structlog.get_logger("odradek.control")

MAX_BODY = 1 << 20


class ControlEndpoint:
    """Serves ``control``'s public methods (a ``BrokerControl``) over HTTP on the running loop."""

    def __init__(self, control: Any) -> None:
        self.control = control
        self._listener = DeferredListener(self._application, "control")

    async def start(self, host: str, port: int) -> tuple[str, int]:
        bound = self._listener.bind(host, port)
        log.warning("control.listening", host=bound[0], port=bound[1],
                    note="test control endpoint: fault injection for tests, never for production")
        return bound

    async def stop(self) -> None:
        await self._listener.stop()

    async def _application(self) -> Any:
        web = await import_off_loop("aiohttp.web")
        application = web.Application(client_max_size=MAX_BODY)
        application.router.add_route("*", "/{tail:.*}", self._serve)
        return application

    async def _serve(self, request: Any) -> Any:
        from aiohttp import web  # noqa: PLC0415 - loaded by _application already

        try:
            status, payload = await self._handle(request)
        except web.HTTPRequestEntityTooLarge:
            status, payload = 400, {"error": "body too large"}
        return web.Response(body=json.dumps(payload).encode(), status=status, content_type="application/json")

    async def _handle(self, request: Any) -> tuple[int, dict]:
        name = request.path.strip("/").removeprefix("v1").strip("/")
        operations = self.control.operations()
        if not name:
            return 200, {"result": operations}
        if request.method != "POST":
            return 405, {"error": "use POST with a JSON object of arguments"}
        if name not in operations:
            return 404, {"error": f"no operation {name!r}; operations: {', '.join(operations)}"}
        raw = await request.read()
        try:
            kwargs = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return 400, {"error": f"body is not JSON: {exc}"}
        if not isinstance(kwargs, dict):
            return 400, {"error": "body must be a JSON object of keyword arguments"}
        return await self.call(name, kwargs)

    async def call(self, name: str, kwargs: dict) -> tuple[int, dict]:
        try:
            result = getattr(self.control, name)(**kwargs)
            if inspect.isawaitable(result):
                result = await result
        except (ValueError, TypeError) as exc:
            return 400, {"error": str(exc)}
        except CaptureOff as exc:  # asked for what the broker's state cannot give
            return 409, {"error": str(exc)}
        except Exception as exc:
            log.exception("control.operation_failed", operation=name)
            return 500, {"error": f"{type(exc).__name__}: {exc}"}
        log.info("control.operation", operation=name, arguments=kwargs)
        return 200, {"result": to_plain(result)}
