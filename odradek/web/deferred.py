"""A listening socket whose HTTP application is built on its first connection.

An HTTP surface that is on by default (the schema registry) must not cost a broker that never
uses it: binding a socket is cheap, importing aiohttp and the routes is not (start-up time
and ~10 MB of memory).  So the socket is bound and listening at start, and the first
connection (waiting in the backlog meanwhile) has the application built and served on that
same socket, aiohttp imported in a worker thread so the loop keeps serving Kafka.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from ..broker.lazy_import import import_off_loop

log = structlog.get_logger("odradek.web")

BACKLOG = 128


class DeferredListener:
    """``bind`` now; ``build()`` (the surface's aiohttp application) on the first connection."""

    def __init__(self, build: Callable[[], Awaitable[Any]], name: str):
        self.build = build
        self.name = name
        self._sock: socket.socket | None = None
        self._serving: asyncio.Task | None = None
        self._listener: Any = None  # web.http.HttpListener once serving

    def bind(self, host: str, port: int) -> tuple[str, int]:
        """Bind and listen (port 0 picks one); the address bound.  Raises OSError."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._first_connection)
        bound = sock.getsockname()
        log.info("http.bound", surface=self.name, host=bound[0], port=bound[1], note="served on first connection")
        return bound[0], bound[1]

    def _first_connection(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._sock.fileno())
        self._serving = loop.create_task(self.serve())

    async def serve(self) -> None:
        """Build the application and serve it on the socket (at once, for a caller that wants it warm)."""
        if self._listener is not None or self._sock is None:
            return
        try:
            application = await self.build()
            http = await import_off_loop(f"{__package__}.http")
            listener = http.HttpListener(application, self.name)
            await listener.start_on(self._sock)
            self._listener = listener
        except Exception:
            log.exception("http.start_failed", surface=self.name)
            self._close_socket()

    def _close_socket(self) -> None:
        if self._sock is not None:
            try:
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
            except (ValueError, OSError):
                pass
            self._sock.close()
            self._sock = None

    async def stop(self) -> None:
        if self._serving is not None:
            self._serving.cancel()
            await asyncio.gather(self._serving, return_exceptions=True)
            self._serving = None
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        self._close_socket()
