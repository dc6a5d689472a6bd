"""Avro compatibility per level, against Confluent's documented verdicts (Avro's schema resolution)."""

from __future__ import annotations

import json

import pytest

from odradek.registry.compatibility import check
from odradek.registry.schemas import parse

from .registry_levels import assert_levels


def record(*fields, name="R", **extra) -> str:
    return json.dumps({"type": "record", "name": name, **extra, "fields": list(fields)})


def f(name, type_, **extra) -> dict:
    return {"name": name, "type": type_, **extra}


A = f("a", "int")
ENUM2 = {"type": "enum", "name": "E", "symbols": ["X", "Y"]}
ENUM3 = {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"]}

# (case, old, new, BACKWARD ok, FORWARD ok)
CASES = [
    ("add a field with a default", record(A), record(A, f("b", "string", default="")), True, True),
    ("add a field without a default", record(A), record(A, f("b", "string")), False, True),
    ("remove a field with a default", record(A, f("b", "string", default="")), record(A), True, True),
    ("remove a field without a default", record(A, f("b", "string")), record(A), True, False),
    ("int to long", record(f("a", "int")), record(f("a", "long")), True, False),
    ("long to int", record(f("a", "long")), record(f("a", "int")), False, True),
    ("float to double", record(f("a", "float")), record(f("a", "double")), True, False),
    ("string to bytes", record(f("a", "string")), record(f("a", "bytes")), True, True),
    ("string to a nullable union", record(f("a", "string")), record(f("a", ["null", "string"])), True, False),
    ("a nullable union to string", record(f("a", ["null", "string"])), record(f("a", "string")), False, True),
    ("a union gains a branch", record(f("a", ["null", "string"])), record(f("a", ["null", "string", "int"])),
     True, False),
    ("an enum gains a symbol", record(f("e", ENUM2)), record(f("e", ENUM3)), True, False),
    ("an enum loses a symbol", record(f("e", ENUM3)), record(f("e", ENUM2)), False, True),
    ("an enum loses a symbol, the new one has a default", record(f("e", ENUM3)),
     record(f("e", {**ENUM2, "default": "X"})), True, True),
    ("rename a record", record(A), record(A, name="S"), False, False),
    ("rename a record with an alias", record(A), record(A, name="S", aliases=["R"]), True, False),
    ("rename a field with an alias", record(A), record(f("b", "int", aliases=["a"])), True, False),
    ("fixed size changes", record(f("x", {"type": "fixed", "name": "F", "size": 16})),
     record(f("x", {"type": "fixed", "name": "F", "size": 32})), False, False),
    ("doc only", record(A), record(A, doc="hello"), True, True),
    ("array items int to long", record(f("a", {"type": "array", "items": "int"})),
     record(f("a", {"type": "array", "items": "long"})), True, False),
    ("map values string to int", record(f("a", {"type": "map", "values": "string"})),
     record(f("a", {"type": "map", "values": "int"})), False, False),
    ("a recursive record", record(f("next", ["null", "R"])), record(f("next", ["null", "R"]), f("b", "int", default=0)),
     True, True),
]


@pytest.mark.parametrize("case, old, new, backward, forward", CASES, ids=[c[0] for c in CASES])
def test_levels(case, old, new, backward, forward):
    assert_levels("AVRO", old, new, backward, forward)


def test_transitive_levels_check_every_version():
    """v1 {a}; v2 {a, b default ""}; v3 {a, b} (no default): v3 reads v2 but not v1."""
    v1, v2, v3 = record(A), record(A, f("b", "string", default="")), record(A, f("b", "string"))
    previous = [(2, parse("AVRO", v2)), (1, parse("AVRO", v1))]
    assert check("BACKWARD", parse("AVRO", v3), previous) == []
    messages = check("BACKWARD_TRANSITIVE", parse("AVRO", v3), previous)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in messages[0] and "{oldSchemaVersion: 1}" in messages
    assert check("FULL_TRANSITIVE", parse("AVRO", v3), previous) != []


def test_the_message_names_the_field_and_path():
    messages = check("BACKWARD", parse("AVRO", record(A, f("f2", "string"))), [(1, parse("AVRO", record(A)))])
    assert messages[0] == ("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
                           "'/fields/1' in the new schema has no default value and is missing in the old schema', "
                           "additionalInfo:'f2'}")
    compact = record(A).replace(": ", ":").replace(", ", ",")
    assert messages[1:] == ["{oldSchemaVersion: 1}", f"{{oldSchema: '{compact}'}}"]


def test_different_schema_types_are_incompatible():
    assert check("BACKWARD", parse("JSON", '{"type":"string"}'), [(1, parse("AVRO", '"string"'))]) == [
        "Incompatible because of different schema type", "{oldSchemaVersion: 1}", "{oldSchema: '\"string\"'}"]
