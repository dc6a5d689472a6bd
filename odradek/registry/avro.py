"""Avro schemas: parsed and checked by fastavro, compared by Avro's schema-resolution rules.

``compatibility`` is Avro's ``SchemaCompatibility.checkReaderWriterCompatibility`` (the rules
Confluent's ``AvroSchema.isBackwardCompatible`` runs): record fields matched by name or the
reader field's aliases, a reader field with no writer field needs a default, names equal or
the writer's full name among the reader's aliases, the promotions int→long→float→double and
string↔bytes, every writer union branch readable, enum symbols (unless the reader enum has a
default), fixed sizes.  Each incompatibility is rendered as Confluent's ``Difference``.
"""

from __future__ import annotations

import json
from typing import Any

from .schemas import Dependency, ParsedSchema, SchemaParseError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})

# reader type -> the writer types it reads besides its own (Avro's promotions)
PROMOTIONS = {"long": {"int"}, "float": {"int", "long"}, "double": {"int", "long", "float"},
              "bytes": {"string"}, "string": {"bytes"}}


class AvroModel:
    """A fastavro-parsed schema and the named types it may refer to, by full name."""

    def __init__(self, schema: Any, named: dict[str, Any]):
        self.schema = schema
        self.named = named


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        # Confluent (Avro's parser) takes a bare name of a primitive type, unquoted, too
        if text.strip() in PRIMITIVES:
            return text.strip()
        raise


def parse(text: str, dependencies: tuple[Dependency, ...] = ()) -> ParsedSchema:
    from fastavro.schema import parse_schema  # noqa: PLC0415 - the first Avro schema pays for it

    named: dict[str, Any] = {}
    try:
        for dep in dependencies:
            parse_schema(_parse_json(dep.schema), named_schemas=named, _write_hint=False)
        referenced = set(named)
        raw = _parse_json(text)
        if not isinstance(raw, dict | list | str):
            raise ValueError("not an Avro schema: a JSON object, array or string")
        schema = parse_schema(raw, named_schemas=named, _write_hint=False)
    except Exception as exc:  # fastavro raises many kinds for a bad schema: each is a reason
        raise SchemaParseError(f"Invalid schema {text}, details: {type(exc).__name__}: {exc}") from None
    canonical = json.dumps(_java_form(raw, None, referenced), separators=(",", ":"), ensure_ascii=False)
    return ParsedSchema("AVRO", canonical, AvroModel(schema, named), dependencies)


# --- the canonical text: Avro Java's Schema.toString() ------------------------------------------------
#
# Confluent stores ``AvroSchema.canonicalString()``, Avro Java's ``Schema.toString(references,
# false)``: compact JSON with each kind's attributes in Avro's order (record: type, name,
# namespace, doc, fields, props, aliases; field: name, type, doc, default, order, aliases,
# props), a namespace only where it differs from the enclosing one, a named type written in
# full once and by name afterwards (relative to the enclosing namespace), and a primitive
# without properties as its bare name.  The same text means the same id as on Confluent.

_NAMED_KEYS = frozenset({"type", "name", "namespace", "doc", "fields", "symbols", "size", "aliases", "default"})
_FIELD_KEYS = frozenset({"name", "type", "doc", "default", "order", "aliases"})


def _split(name: str, namespace: str | None) -> tuple[str, str | None]:
    """(simple name, namespace) of a name as written where ``namespace`` encloses it."""
    if "." in name:
        space, _, simple = name.rpartition(".")
        return simple, space or None
    return name, namespace or None


def _qualified(full: str, space: str | None) -> str:
    """Avro's ``Name.getQualified(space)``: the simple name inside its own namespace (unless it
    would read as a primitive), else the full name."""
    simple_space, _, simple = full.rpartition(".")
    if simple_space and simple_space == space and simple not in PRIMITIVES:
        return simple
    return full


def _java_form(node: Any, space: str | None, known: set[str]) -> Any:
    if isinstance(node, list):
        return [_java_form(n, space, known) for n in node]
    if isinstance(node, str):
        if node in PRIMITIVES:
            return node
        simple, ns = _split(node, space)
        return _qualified(f"{ns}.{simple}" if ns else simple, space)
    kind = node["type"]
    if isinstance(kind, dict | list):
        return _java_form(kind, space, known)
    props = {k: v for k, v in node.items() if k not in _NAMED_KEYS}
    if kind in PRIMITIVES:
        return {"type": kind, **props} if props else kind
    if kind == "array":
        return {"type": "array", "items": _java_form(node["items"], space, known),
                **{k: v for k, v in props.items() if k != "items"}}
    if kind == "map":
        return {"type": "map", "values": _java_form(node["values"], space, known),
                **{k: v for k, v in props.items() if k != "values"}}
    if kind not in NAMED:
        return _java_form(kind, space, known)  # {"type": "SomeName"}: a reference
    simple, ns = _split(node["name"], node.get("namespace") if node.get("namespace") is not None else space)
    full = f"{ns}.{simple}" if ns else simple
    if full in known:
        return _qualified(full, space)
    known.add(full)
    out: dict[str, Any] = {"type": kind, "name": simple}
    if ns is not None and ns != space:
        out["namespace"] = ns
    elif ns is None and space is not None:
        out["namespace"] = ""
    if "doc" in node:
        out["doc"] = node["doc"]
    if kind in ("record", "error"):
        out["fields"] = [_java_field(f, ns, known) for f in node["fields"]]
    elif kind == "enum":
        out["symbols"] = node["symbols"]
        if "default" in node:
            out["default"] = node["default"]
    else:
        out["size"] = node["size"]
    out.update(props)
    if node.get("aliases"):
        out["aliases"] = [_qualified(a if "." in a else (f"{ns}.{a}" if ns else a), ns) for a in node["aliases"]]
    return out


def _java_field(field: dict, space: str | None, known: set[str]) -> dict:
    out: dict[str, Any] = {"name": field["name"], "type": _java_form(field["type"], space, known)}
    for key in ("doc", "default"):
        if key in field:
            out[key] = field[key]
    if field.get("order", "ascending") != "ascending":
        out["order"] = field["order"]
    if field.get("aliases"):
        out["aliases"] = field["aliases"]
    out.update({k: v for k, v in field.items() if k not in _FIELD_KEYS})
    return out


def normalize(parsed: ParsedSchema) -> str:
    """Confluent's normalized Avro (``AvroSchemaUtils.toNormalizedString``): full names, no
    ``namespace``, ``{"type": "int"}`` as ``"int"``, attributes in one order."""
    return json.dumps(_normal(parsed.model.schema), separators=(",", ":"), ensure_ascii=False)


_ORDER = ("name", "type", "fields", "symbols", "items", "values", "size", "default", "aliases", "doc")


def _normal(node: Any) -> Any:
    if isinstance(node, list):
        return [_normal(n) for n in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"type"} and node["type"] in PRIMITIVES:
        return node["type"]
    out = {}
    for key in sorted(node, key=lambda k: (_ORDER.index(k) if k in _ORDER else len(_ORDER), k)):
        if key == "namespace":
            continue
        value = node[key]
        if key == "fields":
            value = [{**{k: _normal(v) if k == "type" else v for k, v in f.items()}} for f in value]
            value = [{k: f[k] for k in sorted(f, key=lambda k: (_ORDER.index(k) if k in _ORDER else 99, k))}
                     for f in value]
        elif key in ("type", "items", "values"):
            value = _normal(value)
        out[key] = value
    return out


def formatted(parsed: ParsedSchema, fmt: str) -> str:
    return parsed.canonical  # "resolved" (references inlined) is not served: the canonical text


# --- compatibility --------------------------------------------------------------------------------


def compatibility(reader: ParsedSchema, writer: ParsedSchema, reader_label: str = "new",
                  writer_label: str = "old") -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    check = _Checker(reader.model, writer.model, reader_label, writer_label)
    check.compare(reader.model.schema, writer.model.schema, "")
    return check.found


def _difference(error: str, description: str, info: str | None = None) -> str:
    text = f"{{errorType:'{error}', description:'{description}'"
    return text + (f", additionalInfo:'{info}'}}" if info is not None else "}")


def _full_name(node: dict) -> str:
    return node["name"]


def _simple_name(full: str) -> str:
    return full.rpartition(".")[2]


def _aliases(node: dict) -> set[str]:
    """A named type's aliases as full names (a relative alias takes the type's namespace)."""
    namespace = node["name"].rpartition(".")[0]
    return {a if "." in a or not namespace else f"{namespace}.{a}" for a in node.get("aliases", ())}


class _Checker:
    def __init__(self, reader: AvroModel, writer: AvroModel, reader_label: str, writer_label: str):
        self.reader, self.writer = reader, writer
        self.r, self.w = reader_label, writer_label
        self.found: list[str] = []
        self._seen: set[tuple[str, str]] = set()  # named pairs in progress or done (recursion)

    def _resolve(self, node: Any, model: AvroModel) -> Any:
        if isinstance(node, str) and node not in PRIMITIVES:
            return model.named.get(node, node)
        return node

    @staticmethod
    def _type(node: Any) -> str:
        if isinstance(node, list):
            return "union"
        if isinstance(node, dict):
            t = node["type"]
            return "record" if t == "error" else t
        return node

    def ok(self, reader: Any, writer: Any, path: str) -> bool:
        """compare, but only asking whether they are compatible (union branch search)."""
        saved = self.found
        self.found = []
        try:
            self.compare(reader, writer, path)
            return not self.found
        finally:
            self.found = saved

    def compare(self, reader: Any, writer: Any, path: str) -> None:
        reader, writer = self._resolve(reader, self.reader), self._resolve(writer, self.writer)
        rt, wt = self._type(reader), self._type(writer)
        if rt in NAMED and wt in NAMED:
            pair = (_full_name(reader), _full_name(writer))
            if pair in self._seen:
                return  # recursion: assumed compatible, as Avro's memo of pairs in progress
            self._seen.add(pair)
        if rt == wt:
            self._same_type(rt, reader, writer, path)
        elif wt == "union":
            for i, branch in enumerate(writer):
                self.compare(reader, branch, f"{path}/{i}")
        elif rt == "union":
            self._reader_union(reader, writer, path)
        elif wt in PROMOTIONS.get(rt, ()):
            return
        else:
            self._mismatch(rt, wt, path)

    def _mismatch(self, rt: str, wt: str, path: str) -> None:
        self.found.append(_difference(
            "TYPE_MISMATCH", f"The type (path '{path or '/'}') of a field in the {self.r} schema does not match "
                             f"with the {self.w} schema", f"reader type: {rt.upper()} not compatible with writer "
                                                          f"type: {wt.upper()}"))

    def _reader_union(self, reader: list, writer: Any, path: str) -> None:
        if not any(self.ok(branch, writer, path) for branch in reader):
            wt = self._type(self._resolve(writer, self.writer))
            self.found.append(_difference(
                "MISSING_UNION_BRANCH", f"The {self.r} schema is missing a type inside a union field at path "
                                        f"'{path or '/'}' in the {self.w} schema",
                f"reader union lacking writer type: {wt.upper()}"))

    def _same_type(self, kind: str, reader: Any, writer: Any, path: str) -> None:
        if kind in PRIMITIVES:
            return
        if kind == "array":
            self.compare(reader["items"], writer["items"], f"{path}/items")
        elif kind == "map":
            self.compare(reader["values"], writer["values"], f"{path}/values")
        elif kind == "union":
            for i, branch in enumerate(writer):
                self._reader_union(reader, branch, f"{path}/{i}")
        elif self._names_match(reader, writer, path):
            if kind == "fixed" and reader["size"] != writer["size"]:
                self.found.append(_difference(
                    "FIXED_SIZE_MISMATCH", f"The size of FIXED type field at path '{path or '/'}' in the {self.r} "
                                           f"schema does not match with the {self.w} schema",
                    f"expected: {writer['size']}, found: {reader['size']}"))
            elif kind == "enum":
                self._enum(reader, writer, path)
            elif kind == "record":
                self._record(reader, writer, path)

    def _names_match(self, reader: dict, writer: dict, path: str) -> bool:
        """Avro's ``schemaNameEquals``: equal simple names, or the writer's full name among the
        reader's aliases."""
        if _simple_name(reader["name"]) == _simple_name(writer["name"]) or writer["name"] in _aliases(reader):
            return True
        self.found.append(_difference(
            "NAME_MISMATCH", f"The name of the schema has changed (path '{path or '/'}')",
            f"expected: {writer['name']}"))
        return False

    def _enum(self, reader: dict, writer: dict, path: str) -> None:
        missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
        if missing and "default" not in reader:
            self.found.append(_difference(
                "MISSING_ENUM_SYMBOLS", f"The {self.r} schema is missing enum symbols '{', '.join(missing)}' at "
                                        f"path '{path}/symbols' in the {self.w} schema", f"[{', '.join(missing)}]"))

    def _record(self, reader: dict, writer: dict, path: str) -> None:
        by_name = {f["name"]: f for f in writer["fields"]}
        for i, field in enumerate(reader["fields"]):
            match = by_name.get(field["name"])
            if match is None:
                match = next((by_name[a] for a in field.get("aliases", ()) if a in by_name), None)
            if match is not None:
                self.compare(field["type"], match["type"], f"{path}/fields/{i}/type")
            elif "default" not in field:
                self.found.append(_difference(
                    "READER_FIELD_MISSING_DEFAULT_VALUE",
                    f"The field '{field['name']}' at path '{path}/fields/{i}' in the {self.r} schema has no "
                    f"default value and is missing in the {self.w} schema", field["name"]))
