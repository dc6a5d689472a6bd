"""Parsing a schema of any type: the one entry point the operations use.

Each type's module (``avro``, ``json_schema``, ``protobuf``) parses with a well-kept library,
imported on first use (the broker's start-up never pays for them), and offers the same three
things: ``parse`` (canonical text, or :class:`SchemaParseError` with the parser's reason),
``normalize`` (Confluent's ``normalize=true`` form) and ``compatibility`` (the reasons a new
schema cannot read, or be read by, an old one; empty when compatible).
"""

from __future__ import annotations

import importlib
from dataclasses import field
from typing import Any

from odradek.protocol.lean_dataclass import dataclass

TYPES = ("AVRO", "JSON", "PROTOBUF")
_MODULES = {"AVRO": "avro", "JSON": "json_schema", "PROTOBUF": "protobuf"}


class SchemaParseError(ValueError):
    """The schema does not parse: the reason is the parser's."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """A referenced schema, resolved: the name it is imported as, and its own text and type."""

    name: str
    schema_type: str
    schema: str
    subject: str = ""
    version: int = 0


@dataclass(slots=True)
class ParsedSchema:
    """A parsed schema: its canonical text (what is stored and hashed) and the library's model."""

    schema_type: str
    canonical: str
    model: Any = field(repr=False)
    dependencies: tuple[Dependency, ...] = ()


def type_module(schema_type: str):
    return importlib.import_module(f"{__package__}.{_MODULES[schema_type]}")


def parse(schema_type: str, text: str, dependencies: tuple[Dependency, ...] = (), *,
          normalize: bool = False) -> ParsedSchema:
    """Parse ``text`` as ``schema_type`` (a name of ``TYPES``), its references resolved to
    ``dependencies`` (deepest first); raises SchemaParseError."""
    if schema_type not in _MODULES:
        raise SchemaParseError(f"Invalid schema type {schema_type}")
    module = type_module(schema_type)
    try:
        parsed = module.parse(text, dependencies)
        if normalize:
            parsed.canonical = module.normalize(parsed)
    except RecursionError:  # the parsers (and our renderers) recurse per level of nesting
        raise SchemaParseError(f"Invalid schema of type {schema_type}, details: the schema nests too deeply") from None
    return parsed


def formatted(parsed: ParsedSchema, fmt: str | None) -> str:
    """The schema as ``?format=`` asks (each type knows its formats; an unknown one is the
    canonical text, as Confluent's ``formattedString``)."""
    if not fmt:
        return parsed.canonical
    return type_module(parsed.schema_type).formatted(parsed, fmt.lower())
