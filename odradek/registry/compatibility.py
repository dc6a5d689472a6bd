"""Confluent's compatibility levels over the per-type rules (``CompatibilityChecker``).

BACKWARD: the new schema reads data written with the old one; FORWARD: the old reads the
new; FULL: both.  The plain levels compare with the latest live version, the ``_TRANSITIVE``
ones with every live version, newest first, stopping at the first that fails.  The messages
are Confluent's: each type's differences, then the old version and the old schema
(``SchemaValidatorBuilder.formatErrorMessages``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .schemas import ParsedSchema, type_module

NONE = "NONE"
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
OLD_SCHEMA_LIMIT = 10 * 1024  # the old schema is cut after this many characters in a message


def level_named(text: object) -> str | None:
    """The level ``text`` names, case-insensitively (Confluent's ``CompatibilityLevel.forName``), else None."""
    name = str(text).strip().upper() if isinstance(text, str) else ""
    return name if name in LEVELS else None


def directional(new: ParsedSchema, old: ParsedSchema, backward: bool) -> list[str]:
    """The differences that stop ``new`` reading ``old`` (backward) or ``old`` reading ``new``."""
    if new.schema_type != old.schema_type:
        return ["Incompatible because of different schema type"]
    rules = type_module(new.schema_type)
    if backward:
        return rules.compatibility(new, old, "new", "old")
    return rules.compatibility(old, new, "old", "new")


def check(level: str, new: ParsedSchema, previous: Sequence[tuple[int | None, ParsedSchema]]) -> list[str]:
    """Why ``new`` breaks ``level`` against ``previous`` ((version, schema), newest first); empty: compatible."""
    if level == NONE or not previous:
        return []
    targets = previous if level.endswith("_TRANSITIVE") else previous[:1]
    base = level.removesuffix("_TRANSITIVE")
    for version, old in targets:
        found = []
        if base in ("FORWARD", "FULL"):
            found += directional(new, old, backward=False)
        if base in ("BACKWARD", "FULL"):
            backward = directional(new, old, backward=True)
            found += backward
        if found:
            if version is not None:
                found.append(f"{{oldSchemaVersion: {version}}}")
            text = old.canonical
            shown = f"<truncated> '{text[:OLD_SCHEMA_LIMIT]}'" if len(text) > OLD_SCHEMA_LIMIT else f"'{text}'"
            found.append(f"{{oldSchema: {shown}}}")
            return found
    return []
