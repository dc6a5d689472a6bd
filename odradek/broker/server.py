"""The TCP shell: frames in, handlers, responses out in request order.

Per connection one reader loop decodes size-prefixed frames and starts each
request's handler at once (clients pipeline; a JoinGroup may be parked for
seconds), while one writer loop sends responses strictly in request order,
because every Kafka client matches responses by order and drops the
connection on a mismatch.  A bad frame costs that connection, never the
broker.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import structlog

from ..protocol import headers
from ..protocol.errors import ErrorCode
from ..protocol.primitives import ProtocolError, Reader
from ..protocol.registry import APIS
from .dispatch import NO_RESPONSE, HandlerTable, RequestContext

log = structlog.get_logger("odradek.server")

_SIZE = struct.Struct(">i")
MAX_IN_FLIGHT = 128  # stop reading a connection that has this many unanswered requests
WRITE_BUFFER_HIGH = 4 << 20
READ_CHUNK = 1 << 18


class CloseConnection(Exception):
    """The request is one Kafka answers by closing the connection."""


@dataclass(frozen=True, slots=True)
class Route:
    """Everything ``_process`` needs for one (API key, version), looked up once per server.

    Saves the registry, handler-table and flexibility lookups on every
    request (a measurable share of a 1-partition OffsetCommit).
    """

    api_key: int
    name: str
    fn: Any
    read_header: Any
    request_header_version: int
    read_request: Any
    build_response: Any
    response_header_version: int


class KafkaServer:
    def __init__(self, handlers: HandlerTable, max_request_bytes: int, metrics=None):
        self.handlers = handlers
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[asyncio.Task] = set()
        self._ids = itertools.count(1)
        self.routes: dict[tuple[int, int], Route] = {}  # filled on first use; handlers are fixed by then
        self.open_connections = 0

    async def listen(self, host: str, port: int) -> tuple[str, int]:
        """Bind one listener; returns the bound (host, port) -- port 0 picks one."""
        server = await asyncio.start_server(self._accept, host or None, port,
                                            reuse_address=True, limit=1 << 16)
        self._servers.append(server)
        sock = server.sockets[0]
        bound = sock.getsockname()
        return bound[0], bound[1]

    async def stop_accepting(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()

    async def close_all(self, grace: float = 0.0) -> None:
        """Close connections, letting in-flight requests finish for ``grace`` seconds."""
        if grace and self._connections:
            await asyncio.wait(self._connections, timeout=grace)
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            await Connection(self, next(self._ids), reader, writer).run()
        except asyncio.CancelledError:
            pass  # broker stopping; a cancelled task here would make asyncio log a traceback
        finally:
            self._connections.discard(task)


class Connection:
    def __init__(self, server: KafkaServer, conn_id: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter):
        self.server = server
        self.id = conn_id
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.client_host = f"/{peer[0]}"
        self.queue: deque[Any] = deque()
        self.wake = asyncio.Event()
        self.room = asyncio.Event()
        self.log = log.bind(conn=conn_id, peer=self.peer)

    async def run(self) -> None:
        self.server.open_connections += 1
        self.log.info("connection.open")
        writer_task = asyncio.create_task(self._write_loop())
        reason = "client closed"
        try:
            reason = await self._read_loop()
        except (asyncio.IncompleteReadError, ConnectionError):
            reason = "client closed"
        except asyncio.CancelledError:
            reason = "broker stopping"
            raise
        finally:
            writer_task.cancel()
            for item in self.queue:
                if isinstance(item, asyncio.Task):
                    item.cancel()
            self.writer.close()
            self.server.open_connections -= 1
            self.log.info("connection.close", reason=reason)

    async def _read_loop(self) -> str:
        """Read whatever arrived, answer every whole frame in it, write the answers at once.

        Clients pipeline: one read often holds many requests, and answering a
        burst with one write (instead of a send per response) halves the
        per-request cost of small requests such as OffsetCommit and Heartbeat.
        """
        read = self.reader.read
        limit = self.server.max_request_bytes
        buf = bytearray()
        while True:
            data = await read(READ_CHUNK)
            if not data:
                return "client closed"
            buf += data
            pos, burst, reason = self._answer_frames(buf, limit)
            del buf[:pos]
            if burst:
                self.writer.writelines(burst)
            if reason is not None:
                return reason
            if len(self.queue) >= MAX_IN_FLIGHT:
                self.room.clear()
                await self.room.wait()
            if self.writer.transport.get_write_buffer_size() > WRITE_BUFFER_HIGH:
                await self.writer.drain()

    def _answer_frames(self, buf: bytearray, limit: int) -> tuple[int, list[bytes], str | None]:
        """Process the whole frames in ``buf``: (bytes consumed, chunks to write now, close reason)."""
        pos = 0
        burst: list[bytes] = []
        end = len(buf)
        while end - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 0 or size > limit:
                self.log.warning("request.refused", reason="frame size", size=size, limit=limit)
                return pos, burst, "frame too large"
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            try:
                out = self._process(frame)
            except CloseConnection as exc:
                return pos, burst, str(exc)
            if out is NO_RESPONSE:
                continue
            if not self.queue and isinstance(out, tuple):
                burst.extend(out)
            else:
                if burst:  # everything answered so far goes out before the queued item
                    self.writer.writelines(burst)
                    burst = []
                self.queue.append(out)
                self.wake.set()
        return pos, burst, None

    async def _write_loop(self) -> None:
        queue = self.queue
        try:
            while True:
                while not queue:
                    self.wake.clear()
                    await self.wake.wait()
                item = queue[0]
                if not isinstance(item, tuple):
                    item = await item
                queue.popleft()
                if len(queue) < MAX_IN_FLIGHT // 2:
                    self.room.set()
                if item is not NO_RESPONSE:
                    self.writer.writelines(item)
                if not queue:
                    await self.writer.drain()
        except (ConnectionError, CloseConnection) as exc:
            self.log.info("connection.write_failed", error=str(exc))
            self.writer.close()
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("request.handler_failed")
            self.writer.close()

    def _process(self, frame: bytes) -> Any:
        """Decode and dispatch one request; returns (head, body), NO_RESPONSE or a task."""
        try:
            api_key, version, correlation_id = headers.peek_request(frame)
        except ValueError:
            self.log.warning("request.refused", reason="short header", size=len(frame))
            raise CloseConnection("malformed header") from None
        route = self.server.routes.get((api_key, version))
        if route is None:
            route = self._route(api_key, version)
            if route is None:
                return self._api_versions_fallback(correlation_id, self.server.handlers.get(api_key).versions.hi)
        reader = Reader(frame)
        try:
            header = route.read_header(reader, route.request_header_version)
            body = route.read_request(reader, version)
        except (ProtocolError, ValueError, UnicodeDecodeError) as exc:
            self.log.warning("request.malformed", api=route.name, version=version, error=str(exc))
            raise CloseConnection("malformed request") from None
        ctx = RequestContext(api_key, version, correlation_id, header.client_id,
                             self.client_host, self.id, header)
        self.log.debug("request", api=route.name, version=version, correlation_id=correlation_id,
                       client_id=header.client_id)
        started = time.perf_counter()
        try:
            result = route.fn(ctx, body)
            if type(result) is not dict and inspect.isawaitable(result):
                return asyncio.ensure_future(self._finish(result, route, version, correlation_id, started))
            out = self._encode(result, route, version, correlation_id)
            self._observe(api_key, version, started)
            return out
        except Exception:
            self.log.exception("request.handler_failed", api=route.name, version=version)
            raise CloseConnection("handler failed") from None

    def _route(self, api_key: int, version: int) -> Route | None:
        """The route for a request kind seen for the first time (None: ApiVersions fallback)."""
        spec = APIS.get(api_key)
        handler = self.server.handlers.get(api_key)
        if handler is None or spec is None:
            self.log.warning("request.refused", reason="unknown api key", api_key=api_key,
                             version=version)
            raise CloseConnection(f"unknown api key {api_key}")
        if version not in handler.versions:
            if api_key == headers.API_VERSIONS_KEY:
                return None
            self.log.warning("request.refused", reason="unsupported version", api=spec.name,
                             version=version)
            raise CloseConnection(f"unsupported version {spec.name} v{version}")
        flexible = spec.is_flexible(version)
        route = Route(api_key, spec.name, handler.fn, headers.REQUEST_HEADER.read,
                      headers.request_header_version(flexible), spec.request.read, spec.response.build,
                      headers.response_header_version(api_key, flexible))
        self.server.routes[(api_key, version)] = route
        return route

    async def _finish(self, pending, route: Route, version: int, correlation_id: int, started: float):
        out = self._encode(await pending, route, version, correlation_id)
        self._observe(route.api_key, version, started)
        return out

    def _observe(self, api_key: int, version: int, started: float) -> None:
        metrics = self.server.metrics
        if metrics is not None:
            metrics.observe(api_key, version, time.perf_counter() - started)

    @staticmethod
    def _encode(result, route: Route, version: int, correlation_id: int):
        if result is NO_RESPONSE:
            return NO_RESPONSE
        return headers.encode_response_parts(correlation_id, route.response_header_version,
                                             route.build_response(result, version))

    def _api_versions_fallback(self, correlation_id: int, max_version: int) -> tuple[bytes, bytes]:
        """An unsupported ApiVersions version gets a v0 body and v0 header naming our range."""
        self.log.info("request.api_versions_fallback", correlation_id=correlation_id)
        body = APIS[headers.API_VERSIONS_KEY].response.build({
            "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": headers.API_VERSIONS_KEY, "min_version": 0,
                          "max_version": max_version}],
        }, 0)
        return headers.encode_response_parts(correlation_id, 0, body)
