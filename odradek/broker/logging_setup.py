"""structlog set-up: key=value on a terminal, JSON lines otherwise, levels per component.

Every module logs through ``structlog.get_logger("odradek.<component>")``;
``log.levels`` (e.g. ``coordinator=debug,storage=warning``) sets a level per
component on top of the global ``log.level``.  Events below their
component's level are dropped before rendering.
"""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                  "warn": logging.WARNING, "error": logging.ERROR, "exception": logging.ERROR,
                  "critical": logging.CRITICAL, "msg": logging.INFO}


class _Stderr:
    """Resolves ``sys.stderr`` at each write, so test capture and redirection work."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


class _NamedLogger(structlog.PrintLogger):
    """A PrintLogger that remembers which component asked for it."""

    def __init__(self, file, name: str):
        super().__init__(file)
        self.name = name


def parse_levels(text: str) -> dict[str, int]:
    """``coordinator=debug,storage=warning`` -> {"odradek.coordinator": 10, ...}."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, level = item.partition("=")
        if not sep or level.strip().lower() not in _LEVELS:
            raise ValueError(f"{item!r} is not component=level (levels: {', '.join(_LEVELS)})")
        name = name.strip()
        out[name if name.startswith("odradek") else f"odradek.{name}"] = _LEVELS[level.strip().lower()]
    return out


_threshold: dict[str, int] = {}  # what configure() set: per component, and "" for the rest
_DEFAULT_THRESHOLD = logging.INFO


def enabled(component: str, level: int) -> bool:
    """Would an event of ``level`` from ``component`` ("odradek.x") be written?  For hot
    paths (the authorizer's per-request audit line) that would otherwise build a message
    only to have it dropped."""
    return level >= _threshold.get(component, _threshold.get("", _DEFAULT_THRESHOLD))


def configure(fmt: str = "auto", level: str = "info", stream=None, levels: str = "") -> None:
    stream = stream or _Stderr()
    if fmt == "auto":
        fmt = "text" if getattr(stream, "isatty", lambda: False)() else "json"
    default = _LEVELS[level]
    per_component = parse_levels(levels)
    _threshold.clear()
    _threshold.update(per_component)
    _threshold[""] = default

    def component_filter(logger, method_name, event_dict):
        name = getattr(logger, "name", "")
        wanted = per_component.get(name, default)
        if _METHOD_LEVELS.get(method_name, logging.INFO) < wanted:
            raise structlog.DropEvent
        event_dict.setdefault("logger", name.removeprefix("odradek.") or None)
        return event_dict

    renderer = (structlog.processors.JSONRenderer() if fmt == "json"
                else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"],
                                                           drop_missing=True))
    floor = min([default, *per_component.values()])
    structlog.configure(
        processors=[
            component_filter,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(floor),
        logger_factory=lambda *args: _NamedLogger(stream, args[0] if args else ""),
        cache_logger_on_first_use=False,
    )
