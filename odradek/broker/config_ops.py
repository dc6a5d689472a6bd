"""The checks and arithmetic of AlterConfigs / IncrementalAlterConfigs, free of I/O.

Kafka splits the work between the broker (``ConfigAdminManager.preprocess``:
duplicates, null values, resource types, broker names and values) and the
controller (``ControllerConfigurationValidator`` and
``ConfigurationControlManager``: topic names, existence, config names and
values, APPEND/SUBTRACT).  The functions here are those rules; the handler
runs them in Kafka's order and stores the outcome.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from ..protocol.errors import ErrorCode, clip_message
from ..protocol.lean_dataclass import dataclass

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


class ConfigOpError(Exception):
    """A resource's change refused with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        message = clip_message(message)
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Op:
    name: str
    op: int
    value: str | None


def ops_of(configs: Iterable, incremental: bool) -> list[Op]:
    """The request's configs as operations (legacy AlterConfigs: every entry is a SET)."""
    return [Op(c.name, c.config_operation if incremental else SET, c.value) for c in configs]


def duplicate_resources(resources: Iterable) -> set[tuple[int, str]]:
    """(type, name) pairs listed more than once: every copy is refused (INVALID_REQUEST)."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {k for k, n in counts.items() if n > 1}


def check_shape(ops: list[Op]) -> None:
    """``ConfigAdminManager.preprocess``: no duplicate keys, no null values (but for DELETE)."""
    if len({o.name for o in ops}) != len(ops):
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [o.name for o in ops if o.value is None and o.op != DELETE]
    if nulls:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    bad = [o for o in ops if o.op not in OP_NAMES]
    if bad:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {bad[0].op}")


def _items(value: str | None) -> list[str]:
    return [] if not value else value.split(",")


def apply_ops(current: Mapping[str, str], ops: list[Op], *, legacy: bool, is_list: Callable[[str], bool],
              start: Callable[[str], str | None], not_list: ErrorCode, dedupe: bool) -> dict[str, str]:
    """The override set after ``ops``.

    Legacy AlterConfigs replaces the whole set.  Incremental: SET replaces one
    key, DELETE drops it (back to the inherited value), APPEND/SUBTRACT edit a
    LIST value starting from the override or, without one, ``start(name)``.
    Topics (the controller) add only items not yet present (``dedupe``) and
    refuse APPEND/SUBTRACT on other types with INVALID_CONFIG; brokers
    (``prepareIncrementalConfigs``) append as given and refuse with
    INVALID_REQUEST (``not_list``).
    """
    if legacy:
        return {o.name: o.value for o in ops if o.value is not None}
    out = dict(current)
    for o in ops:
        if o.op == SET:
            out[o.name] = o.value  # type: ignore[assignment]
        elif o.op == DELETE:
            out.pop(o.name, None)
        else:
            if not is_list(o.name):
                verb = OP_NAMES[o.op]
                msg = (f"Can't {verb} to key {o.name} because its type is not LIST." if dedupe
                       else f"Config value {verb.lower()} is not allowed for config key: {o.name}")
                raise ConfigOpError(not_list, msg)
            items = _items(out[o.name] if o.name in out else start(o.name))
            given = _items(o.value)
            if o.op == APPEND:
                items += [v for v in given if v not in items] if dedupe else given
            else:
                items = [v for v in items if v not in given]
            out[o.name] = ",".join(items)
    return out
