"""Protobuf schemas: .proto text and base64 descriptors parsed alike, rendered, and compared by
Confluent's Protobuf rules (the documented verdicts per level)."""

from __future__ import annotations

import base64

import pytest

from odradek.registry.compatibility import check
from odradek.registry.schemas import Dependency, SchemaParseError, formatted, parse

from .registry_levels import assert_levels

ORDER = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.example.shop";
// a comment
message Order {
  string id = 1;
  repeated int32 quantities = 2 [packed = true];
  map<string, Item> items = 3;
  google.protobuf.Timestamp at = 4;
  optional string note = 5;
  oneof payment { string card = 6; int64 cash = 7; }
  Status status = 8;
  enum Status { UNKNOWN = 0; OK = 1; }
  message Item { string sku = 1; }
  reserved 10 to 12;
  reserved "old";
}
service Orders { rpc Get(Order) returns (stream Order); }
"""


def test_text_renders_to_text_that_parses_to_itself():
    parsed = parse("PROTOBUF", ORDER)
    assert parse("PROTOBUF", parsed.canonical).canonical == parsed.canonical
    assert "map<string, .shop.v1.Order.Item> items = 3;" in parsed.canonical
    assert "optional string note = 5;" in parsed.canonical


def test_a_base64_descriptor_is_the_same_schema_and_serialized_gives_it_back():
    parsed = parse("PROTOBUF", ORDER)
    serialized = formatted(parsed, "serialized")
    base64.b64decode(serialized, validate=True)
    assert parse("PROTOBUF", serialized).canonical == parsed.canonical


def test_references_resolve_by_import_name():
    common = 'syntax = "proto3"; package c; message Money { int64 units = 1; }'
    main = 'syntax = "proto3"; import "c/money.proto"; message Price { c.Money amount = 1; }'
    with pytest.raises(SchemaParseError, match="c/money.proto"):
        parse("PROTOBUF", main)
    parsed = parse("PROTOBUF", main, (Dependency("c/money.proto", "PROTOBUF", common),))
    assert ".c.Money amount = 1;" in parsed.canonical


@pytest.mark.parametrize("text", [
    'syntax = "proto3"; message A { Missing m = 1; }',  # an unknown type
    'syntax = "proto3"; message A { string a = 1; string b = 1; }',  # a number used twice
    "message {",
    "bm90IGEgZGVzY3JpcHRvcg==",  # base64, but not a descriptor
    'syntax = "proto3"; import "nowhere.proto"; message A {}',
])
def test_invalid_schemas(text):
    with pytest.raises(SchemaParseError):
        parse("PROTOBUF", text)


def msg(body: str, package: str = "p", extra: str = "") -> str:
    return f'syntax = "proto3";\npackage {package};\nmessage M {{ {body} }}\n{extra}'


# (case, old, new, BACKWARD ok, FORWARD ok)
CASES = [
    ("add a field", msg("string a = 1;"), msg("string a = 1; int32 b = 2;"), True, True),
    ("remove a field", msg("string a = 1; int32 b = 2;"), msg("string a = 1;"), True, True),
    ("rename a field", msg("string a = 1;"), msg("string b = 1;"), True, True),
    ("int32 to int64", msg("int32 a = 1;"), msg("int64 a = 1;"), True, True),
    ("int32 to bool", msg("int32 a = 1;"), msg("bool a = 1;"), True, True),
    ("int32 to sint32", msg("int32 a = 1;"), msg("sint32 a = 1;"), False, False),
    ("string to bytes", msg("string a = 1;"), msg("bytes a = 1;"), True, True),
    ("int32 to string", msg("int32 a = 1;"), msg("string a = 1;"), False, False),
    ("scalar to message", msg("int32 a = 1;"), msg("N a = 1;", extra="message N {}"), False, False),
    ("add a message", msg("int32 a = 1;"), msg("int32 a = 1;", extra="message N {}"), True, False),
    ("remove a message", msg("int32 a = 1;", extra="message N {}"), msg("int32 a = 1;"), False, True),
    ("change the package", msg("int32 a = 1;"), msg("int32 a = 1;", package="q"), False, False),
    ("add an enum value", msg("E e = 1;", extra="enum E { A = 0; }"), msg("E e = 1;", extra="enum E { A = 0; B = 1; }"),
     True, True),
    ("remove a field of a oneof", msg("oneof o { int32 a = 1; string b = 2; }"), msg("oneof o { int32 a = 1; }"),
     False, True),
]


@pytest.mark.parametrize("case, old, new, backward, forward", CASES, ids=[c[0] for c in CASES])
def test_levels(case, old, new, backward, forward):
    assert_levels("PROTOBUF", old, new, backward, forward)


def test_transitive_checks_every_version():
    v1 = msg("int32 a = 1;")
    v2 = msg("int32 a = 1;", extra="message N {}")
    v3 = msg("int32 a = 1;", extra="message N {}\nmessage O {}")
    previous = [(2, parse("PROTOBUF", v2)), (1, parse("PROTOBUF", v1))]
    assert check("FORWARD", parse("PROTOBUF", v3), previous[:1]) != []
    assert check("FORWARD_TRANSITIVE", parse("PROTOBUF", v3), previous) != []
    assert check("BACKWARD_TRANSITIVE", parse("PROTOBUF", v3), previous) == []
