"""JSON Schema compatibility against Confluent's documented verdicts (STRICT policy)."""

from __future__ import annotations

import json

import pytest

from odradek.registry.compatibility import check
from odradek.registry.schemas import parse

from .registry_levels import assert_levels


def obj(props: dict, required=(), closed: bool = False) -> str:
    schema = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return json.dumps(schema)


S, INT = {"type": "string"}, {"type": "integer"}

# (case, old, new, BACKWARD ok, FORWARD ok)
CASES = [
    ("add an optional property, open model", obj({"a": S}), obj({"a": S, "b": S}), False, True),
    ("add an optional property, closed model", obj({"a": S}, closed=True), obj({"a": S, "b": S}, closed=True),
     True, False),
    ("add a property with an empty schema, open model", obj({"a": S}), obj({"a": S, "b": {}}), True, True),
    ("add a required property, closed model", obj({"a": S}, closed=True),
     obj({"a": S, "b": S}, required=["b"], closed=True), False, False),
    ("remove an optional property, open model", obj({"a": S, "b": S}), obj({"a": S}), True, False),
    ("make a property required", obj({"a": S}), obj({"a": S}, required=["a"]), False, True),
    ("integer to number", json.dumps({"type": "integer"}), json.dumps({"type": "number"}), True, False),
    ("string to integer", json.dumps(S), json.dumps(INT), False, False),
    ("maxLength 10 to 20", json.dumps({"type": "string", "maxLength": 10}),
     json.dumps({"type": "string", "maxLength": 20}), True, False),
    ("an enum gains a value", json.dumps({"enum": ["a"]}), json.dumps({"enum": ["a", "b"]}), True, False),
    ("additionalProperties false to true", obj({"a": S}, closed=True), obj({"a": S}), True, False),
    ("title and description only", obj({"a": S}), json.dumps({**json.loads(obj({"a": S})), "title": "T"}),
     True, True),
]


@pytest.mark.parametrize("case, old, new, backward, forward", CASES, ids=[c[0] for c in CASES])
def test_levels(case, old, new, backward, forward):
    assert_levels("JSON", old, new, backward, forward)


def test_invalid_json_schemas_do_not_parse():
    from odradek.registry.schemas import SchemaParseError

    for text in ('{"type": 5}', "[1]", "{not json"):
        with pytest.raises(SchemaParseError):
            parse("JSON", text)


def enum(*values: str, **extra: str) -> str:
    return json.dumps({"enum": list(values), **extra})


@pytest.mark.parametrize("level, v1, v2, v3", [
    ("BACKWARD", enum("x"), enum("y"), enum("y", "z")),   # v3 reads v2's data, not v1's
    ("FORWARD", enum("x"), enum("y", "z"), enum("y")),    # v2 reads v3's data, v1 does not
    ("FULL", enum("x"), enum("y"), enum("y", title="T")),  # v3 and v2 read each other, not v1
])
def test_transitive_levels_check_every_version(level, v1, v2, v3):
    """The plain level checks the latest version only; its transitive variant every one, and names
    the version that fails."""
    previous = [(2, parse("JSON", v2)), (1, parse("JSON", v1))]
    assert check(level, parse("JSON", v3), previous) == []
    messages = check(f"{level}_TRANSITIVE", parse("JSON", v3), previous)
    assert messages and "{oldSchemaVersion: 1}" in messages
