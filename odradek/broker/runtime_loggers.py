"""BROKER_LOGGER config resources: this broker's log levels, read and changed at run time.

Kafka's rules (``ConfigHelper.describeConfigs`` for the describe side,
``RuntimeLoggerManager`` for IncrementalAlterConfigs): the resource name is
this node's id; every logger is listed with its effective level, source
DYNAMIC_BROKER_LOGGER_CONFIG; SET takes one of Kafka's six levels, DELETE
returns a logger to its parent's (root's) level; a logger that does not exist
or a level Kafka does not know is INVALID_CONFIG, APPEND/SUBTRACT and
removing root's level INVALID_REQUEST.  Every operation of a resource is
checked before any applies.  Levels are not stored: a restart goes back to
``log.level``/``log.levels``, as Kafka goes back to its log4j file.

Our loggers are the components of :mod:`logging_setup` (``odradek.storage``,
``odradek.coordinator``, ...) and ``root``, the global level.
"""

from __future__ import annotations

import logging

import structlog

from ..protocol.errors import ErrorCode
from . import logging_setup
from .config_ops import APPEND, DELETE, SET, SUBTRACT, ConfigOpError, Op
from .dataplane.topic_configs import ConfigEntry, ConfigSource, ConfigType

log = structlog.get_logger("odradek.configs")

TRACE = 5  # below the standard library's DEBUG, as log4j's TRACE is below its DEBUG
LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
          "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}  # LogLevelConfig.VALID_LOG_LEVELS
_VALID = ", ".join(sorted(LEVELS))


def level_name(level: int) -> str:
    """Kafka's name of the nearest level at or below ``level``."""
    return max(((v, n) for n, v in LEVELS.items() if v <= level), default=(TRACE, "TRACE"))[1]


def check_node(name: str, node_id: int, *, describe: bool) -> None:
    """The resource must name this node (DescribeConfigs and RuntimeLoggerManager word it apart)."""
    if describe and not name:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        node = int(name)
    except ValueError:
        what = "Broker" if describe else "Node"
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"{what} id must be an integer, but it is: {name}") \
            from None
    if node != node_id:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST,
                            f"Unexpected broker id, expected {node_id} but received {name}" if describe
                            else f"Unexpected node id. Expected {node_id}, but received {node}")


def entries() -> list[ConfigEntry]:
    """Every logger with its effective level (``LoggingController.loggers``)."""
    src = ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
    return [ConfigEntry(name, level_name(logging_setup.logger_level(name)), src, ConfigType.UNKNOWN, None, ())
            for name in logging_setup.logger_names()]


def alter(ops: list[Op], *, validate_only: bool) -> None:
    """``RuntimeLoggerManager.applyChangesForResource`` after the authorization check."""
    for o in ops:
        _validate(o)
    if validate_only:
        return
    for o in ops:
        level = None if o.op == DELETE else LEVELS[o.value]  # type: ignore[index]
        logging_setup.set_logger_level(o.name, level)
        if o.op == DELETE:
            log.warning("configs.logger_level_unset", logger=o.name)
        else:
            log.warning("configs.logger_level_set", logger=o.name, level=o.value)


def _validate(o: Op) -> None:
    if o.op in (APPEND, SUBTRACT):
        verb = "APPEND" if o.op == APPEND else "SUBTRACT"
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"{verb} operation is not allowed for the BROKER_LOGGER resource")
    if o.op not in (SET, DELETE):
        raise ConfigOpError(ErrorCode.INVALID_REQUEST,
                            f"Unknown operation type {o.op} is not allowed for the BROKER_LOGGER resource")
    if o.name not in logging_setup.logger_names():
        raise ConfigOpError(ErrorCode.INVALID_CONFIG, f"Logger {o.name} does not exist!")
    if o.op == SET and o.value not in LEVELS:
        raise ConfigOpError(ErrorCode.INVALID_CONFIG,
                            f"Cannot set the log level of {o.name} to {o.value} as it is not a supported "
                            f"log level. Valid log levels are {_VALID}")
    if o.op == DELETE and o.name == logging_setup.ROOT:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
