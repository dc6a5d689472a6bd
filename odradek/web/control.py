"""The control endpoint: :class:`BrokerControl`'s operations over a tiny JSON-over-HTTP protocol.

For a broker run as a process or a container (``odradek control`` and
``curl`` talk to it).  A testing tool, never for production: it is off
unless ``odradek.control.listener`` is set, binds to 127.0.0.1 unless that
setting names another host, and has no authentication.

    POST /v1/<operation>   body: a JSON object of keyword arguments (may be empty)
    GET  /v1/              the operation names

Answers are JSON: ``{"result": ...}`` with status 200, or ``{"error": "..."}``
with 400 (bad arguments: the operation's ``ValueError``/``TypeError``), 404
(no such operation), 409 (not in this state: ``captured`` while capture is off) or 500.  Served on the broker's event loop, one request
per connection.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import structlog

from ..broker.control.capture import CaptureOff, to_plain

log = structlog.get_logger("odradek.control")

MAX_BODY = 1 << 20
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
            500: "Internal Server Error"}


class ControlEndpoint:
    """Serves ``control``'s public methods (a ``BrokerControl``) over HTTP on the running loop."""

    def __init__(self, control: Any) -> None:
        self.control = control
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        bound = self._server.sockets[0].getsockname()
        log.warning("control.listening", host=bound[0], port=bound[1],
                    note="test control endpoint: fault injection for tests, never for production")
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, payload = await self._handle(reader)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            status, payload = 400, {"error": "malformed HTTP request"}
        body = json.dumps(payload).encode()
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            writer.write(head + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader) -> tuple[int, dict]:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        length = int(headers.get("content-length", "0"))
        if length > MAX_BODY:
            return 400, {"error": "body too large"}
        raw = await asyncio.wait_for(reader.readexactly(length), timeout=10) if length else b""
        name = path.split("?", 1)[0].strip("/").removeprefix("v1").strip("/")
        operations = self.control.operations()
        if not name:
            return 200, {"result": operations}
        if method != "POST":
            return 405, {"error": "use POST with a JSON object of arguments"}
        if name not in operations:
            return 404, {"error": f"no operation {name!r}; operations: {', '.join(operations)}"}
        try:
            kwargs = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
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
