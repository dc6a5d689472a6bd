"""The compatibility tables' one check: a case's verdict at every non-transitive level."""

from __future__ import annotations

from odradek.registry.compatibility import check
from odradek.registry.schemas import parse


def verdict(schema_type: str, level: str, old: str, new: str) -> bool:
    """Whether ``new`` may follow ``old`` at ``level``."""
    return not check(level, parse(schema_type, new), [(1, parse(schema_type, old))])


def assert_levels(schema_type: str, old: str, new: str, backward: bool, forward: bool) -> None:
    """BACKWARD and FORWARD as the table says, FULL when both hold, NONE always."""
    assert verdict(schema_type, "BACKWARD", old, new) is backward
    assert verdict(schema_type, "FORWARD", old, new) is forward
    assert verdict(schema_type, "FULL", old, new) is (backward and forward)
    assert verdict(schema_type, "NONE", old, new) is True
