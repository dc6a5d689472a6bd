"""The one HTTP stack of every HTTP surface: an aiohttp application served on the broker's loop.

The schema registry's REST API uses it today; the control endpoint and the console are meant
to as well.  aiohttp is imported only by the modules of this package, which the broker loads
after its Kafka listeners answer, so the broker's start-up does not pay for it.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import socket
from collections.abc import Awaitable, Callable, Mapping

import structlog
from aiohttp import web

log = structlog.get_logger("odradek.web")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PRINCIPAL = web.RequestKey("principal", str)  # ``User:<name>`` of a request basic auth let in


class HttpListener:
    """An aiohttp application listening on one address of the running loop."""

    def __init__(self, application: web.Application, name: str):
        self.application = application
        self.name = name
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; the address bound (port 0 picks one)."""
        runner = web.AppRunner(self.application, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound = runner.addresses[0]
        log.info("http.listening", surface=self.name, host=bound[0], port=bound[1])
        return bound[0], bound[1]

    async def start_on(self, sock: socket.socket) -> None:
        """Serve on a socket already bound and listening (``deferred.DeferredListener``'s)."""
        runner = web.AppRunner(self.application, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("http.serving", surface=self.name, address=str(sock.getsockname()))

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def basic_auth(users: Mapping[str, str], realm: str, unauthorized: Callable[[], web.StreamResponse]
               ) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """A middleware asking for HTTP basic auth (RFC 7617) with one of ``users`` (name -> password);
    ``unauthorized()`` renders the 401 in the surface's own error shape."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "basic":
            try:
                name, _, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                name = password = ""
            expected = users.get(name)
            if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
                request[PRINCIPAL] = f"User:{name}"
                return await handler(request)
        response = unauthorized()
        response.headers["WWW-Authenticate"] = f'Basic realm="{realm}"'
        return response

    return middleware
