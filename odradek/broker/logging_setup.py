"""structlog set-up: key=value on a terminal, JSON lines otherwise, levels per component.

Every module logs through ``structlog.get_logger("odradek.<component>")``;
``log.levels`` (e.g. ``coordinator=debug,storage=warning``) sets a level per
component on top of the global ``log.level``.  Events below their
component's level are dropped before rendering.

``odradek serve`` owns its process: :func:`configure` writes to stderr.  A broker
inside someone else's process (``odradek.testing``) is a library there:
:func:`configure_embedded` sends its events to Python's ``logging`` (loggers
``odradek.<component>``), where pytest's capture, ``caplog`` and the host's
handlers see them, and leaves a structlog configuration the host made alone.
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
_EMBEDDED: list[list] = []  # [the processors configure_embedded() installed]: to know its own configuration
_OURS: list[bool] = []  # [True] once configure() or configure_embedded() set structlog up

# Every component that logs (``structlog.get_logger("odradek.<component>")``): the loggers
# DescribeConfigs lists for a BROKER_LOGGER resource, beside "root" (the global level).
# tests/unit/test_broker_loggers.py checks that each logger the package asks for is here.
COMPONENTS = ("authorizer", "broker", "cli", "clock", "cluster", "configs", "control", "coordinator", "dataplane",
              "features", "gc", "produce", "producers", "quotas", "registry", "security", "server", "share", "storage",
              "telemetry", "topics", "txn", "web")
ROOT = "root"
_WRAPPER_FLOORS = (logging.NOTSET, logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR,
                   logging.CRITICAL)  # the levels structlog builds a filtering logger for


def enabled(component: str, level: int) -> bool:
    """Would an event of ``level`` from ``component`` ("odradek.x") be written?  For hot
    paths (the authorizer's per-request audit line) that would otherwise build a message
    only to have it dropped."""
    return level >= _threshold.get(component, _threshold.get("", _DEFAULT_THRESHOLD))


def _thresholds(level: str, levels: str) -> tuple[int, dict[str, int]]:
    """The global level and the per-component ones, also kept for :func:`enabled`."""
    default = _LEVELS[level]
    per_component = parse_levels(levels)
    _threshold.clear()
    _threshold.update(per_component)
    _threshold[""] = default
    return default, per_component


def _component_filter(tag: bool = True):
    """Drops events below their component's level (read at each event from ``_threshold``, so a
    level changed at run time applies at once); ``tag`` names the component in the event (the
    standard library's records carry the logger name already)."""
    def component_filter(logger, method_name, event_dict):
        name = getattr(logger, "name", "")
        wanted = _threshold.get(name, _threshold.get("", _DEFAULT_THRESHOLD))
        if _METHOD_LEVELS.get(method_name, logging.INFO) < wanted:
            raise structlog.DropEvent
        if tag:
            event_dict.setdefault("logger", name.removeprefix("odradek.") or None)
        return event_dict
    return component_filter


def configure(fmt: str = "auto", level: str = "info", stream=None, levels: str = "") -> None:
    stream = stream or _Stderr()
    if fmt == "auto":
        fmt = "text" if getattr(stream, "isatty", lambda: False)() else "json"
    default, per_component = _thresholds(level, levels)
    renderer = (structlog.processors.JSONRenderer() if fmt == "json"
                else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"],
                                                           drop_missing=True))
    floor = min([default, *per_component.values()])
    _EMBEDDED.clear()
    _OURS[:] = [True]
    structlog.configure(
        processors=[
            _component_filter(),
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


def configure_embedded(level: str = "warning", levels: str = "") -> bool:
    """Logging for a broker running inside another program's process (the test fixtures).

    Events at ``level`` and above (``levels`` per component) go to the standard library
    loggers ``odradek.<component>`` as ``event key=value`` messages; the ``odradek`` loggers get
    those levels, nothing else of the host's logging changes.  If structlog was configured by
    anyone else (the host application, or :func:`configure`), that configuration is kept and
    decides; returns whether this call configured anything."""
    if structlog.is_configured() and not (_EMBEDDED and structlog.get_config()["processors"] is _EMBEDDED[0]):
        return False
    default, per_component = _thresholds(level, levels)
    logging.getLogger("odradek").setLevel(default)
    for name, wanted in per_component.items():
        logging.getLogger(name).setLevel(wanted)
    processors = [
        _component_filter(tag=False),
        structlog.contextvars.merge_contextvars,
        structlog.processors.format_exc_info,
        structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True),
    ]
    _EMBEDDED[:] = [processors]
    _OURS[:] = [True]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(min([default, *per_component.values()])),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    return True


# --- levels changed at run time (IncrementalAlterConfigs of BROKER_LOGGER resources) --------

def logger_names() -> list[str]:
    """The loggers that exist: every component, those given a level, and ``root``."""
    named = {f"odradek.{c}" for c in COMPONENTS} | {n for n in _threshold if n}
    return [ROOT, *sorted(named)]


def logger_level(name: str) -> int:
    """A logger's effective level: its own, else the global one (``root``)."""
    default = _threshold.get("", _DEFAULT_THRESHOLD)
    return default if name == ROOT else _threshold.get(name, default)


def set_logger_level(name: str, level: int | None) -> None:
    """Sets (or with None removes, back to ``root``'s) a logger's level for this process.

    Events are filtered twice: structlog's bound logger drops methods below the
    lowest level in use before anything else runs, then the component filter
    applies each logger's own level.  The first floor is rebuilt here, so a
    lowered level reaches the output; the standard library's loggers (embedded
    brokers) get the level too.
    """
    if name == ROOT:
        if level is None:
            raise ValueError("the root logger always has a level")
        _threshold[""] = level
        logging.getLogger("odradek").setLevel(level)
    elif level is None:
        _threshold.pop(name, None)
        logging.getLogger(name).setLevel(logging.NOTSET)
    else:
        _threshold[name] = level
        logging.getLogger(name).setLevel(level)
    if _OURS and structlog.is_configured():
        floor = min([_threshold.get("", _DEFAULT_THRESHOLD), *_threshold.values()])
        floor = max(lv for lv in _WRAPPER_FLOORS if lv <= floor)  # TRACE (5): nothing filtered
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(floor))
