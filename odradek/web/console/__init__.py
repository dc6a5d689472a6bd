"""The web console: topics, messages, consumer groups and lag, the offsets timeline, test control.

Server-rendered pages (``routes.py``, Jinja2 templates under ``templates/``, the vendored htmx under
``static/`` for the live parts) on the broker's own event loop, served by the one HTTP stack
(``web/http.py``).  The pages read and change the broker the way a Kafka client would, through
its handlers (``web/kafka_local.py``), and what only the broker knows from its domain objects
(``reads.py``).  ``odradek.console.listener`` turns it on (``odradek serve``: http://127.0.0.1:8080);
the broker starts it once its Kafka listeners answer, so aiohttp and Jinja2 are never on the
start-up path.
"""

from __future__ import annotations

import structlog

from ..http import HttpListener
from .routes import ConsolePages, ConsoleServices

log = structlog.get_logger("odradek.console")

__all__ = ["Console", "ConsoleServices"]


class Console:
    """The console's pages on an HTTP listener of their own."""

    def __init__(self, app: ConsoleServices, read_only: bool = False) -> None:
        self.pages = ConsolePages(app, read_only)
        self.listener = HttpListener(self.pages.application(), "console")

    async def start(self, host: str, port: int) -> tuple[str, int]:
        bound = await self.listener.start(host, port)
        log.info("console.listening", url=f"http://{_host(bound[0])}:{bound[1]}/",
                 read_only=self.pages.read_only)
        return bound

    async def stop(self) -> None:
        await self.listener.stop()


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
