"""structlog set-up: key=value on a terminal, JSON lines otherwise."""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


class _Stderr:
    """Resolves ``sys.stderr`` at each write, so test capture and redirection work."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure(fmt: str = "auto", level: str = "info", stream=None) -> None:
    stream = stream or _Stderr()
    if fmt == "auto":
        fmt = "text" if getattr(stream, "isatty", lambda: False)() else "json"
    renderer = (structlog.processors.JSONRenderer() if fmt == "json"
                else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"],
                                                           drop_missing=True))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
