"""JSON Schema: checked by ``jsonschema`` against its draft's meta-schema, compared by Confluent's
JSON Schema rules (``io.confluent.kafka.schemaregistry.json.diff.SchemaDiff``, STRICT policy).

Served of those rules: a changed ``type`` (an integer widened to a number is compatible one
way), properties added to or removed from an open or closed content model, a property made
required, enums and the string/number/array/object bounds narrowed or widened,
``additionalProperties`` opened or closed; every nested property is compared the same way.
Combined schemas (``oneOf``/``anyOf``/``allOf``) and ``$ref`` targets are compared as written.
"""

from __future__ import annotations

import json
from typing import Any

from .schemas import Dependency, ParsedSchema, SchemaParseError


def parse(text: str, dependencies: tuple[Dependency, ...] = ()) -> ParsedSchema:
    from jsonschema.exceptions import SchemaError  # noqa: PLC0415 - the first JSON schema pays for it
    from jsonschema.validators import validator_for  # noqa: PLC0415

    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise SchemaParseError(f"Invalid schema {text}, details: {exc}") from None
    if not isinstance(raw, dict | bool):
        raise SchemaParseError(f"Invalid schema {text}, details: a JSON schema is an object or a boolean")
    try:
        validator_for(raw).check_schema(raw)
    except SchemaError as exc:
        raise SchemaParseError(f"Invalid schema {text}, details: {exc.message}") from None
    canonical = json.dumps(raw, separators=(",", ":"), ensure_ascii=False)
    return ParsedSchema("JSON", canonical, raw, dependencies)


def normalize(parsed: ParsedSchema) -> str:
    """Confluent's ``JsonSchema.normalize``: the same schema with its object keys in order."""
    return json.dumps(parsed.model, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def formatted(parsed: ParsedSchema, fmt: str) -> str:
    return parsed.canonical


def compatibility(reader: ParsedSchema, writer: ParsedSchema, reader_label: str = "new",
                  writer_label: str = "old") -> list[str]:
    """Why ``reader`` cannot validate data valid under ``writer`` (Confluent diffs original=writer,
    update=reader and keeps the incompatible differences)."""
    found: list[str] = []
    _compare(writer.model, reader.model, "#", found)
    return found


def _difference(error: str, path: str) -> str:
    return f'{{errorType:"{error}", description:"Found incompatible change: Difference{{jsonPath=\'{path}\', ' \
           f"type={error}}}'}}"


def _types(schema: Any) -> set[str]:
    t = schema.get("type") if isinstance(schema, dict) else None
    return set(t) if isinstance(t, list) else {t} if isinstance(t, str) else set()


def _open(schema: dict) -> bool:
    extra = schema.get("additionalProperties", True)
    return extra is True or extra == {}


# bound keyword -> True when a larger value accepts more
_BOUNDS = {"maxLength": True, "minLength": False, "maximum": True, "minimum": False, "maxItems": True,
           "minItems": False, "maxProperties": True, "minProperties": False, "exclusiveMaximum": True,
           "exclusiveMinimum": False}


def _compare(old: Any, new: Any, path: str, found: list[str]) -> None:
    if not isinstance(old, dict) or not isinstance(new, dict):
        if old != new and new is not True and new != {}:
            found.append(_difference("TYPE_CHANGED", path))
        return
    old_types, new_types = _types(old), _types(new)
    if old_types and new_types and old_types != new_types:
        widened = old_types - new_types == {"integer"} and "number" in new_types
        if not new_types >= old_types and not widened:
            found.append(_difference("TYPE_NARROWED" if new_types < old_types else "TYPE_CHANGED", path))
            return
    elif not old_types and new_types:
        found.append(_difference("TYPE_NARROWED", path))
    for key, wider in _BOUNDS.items():
        if key in new and (key not in old or (new[key] < old[key] if wider else new[key] > old[key])):
            found.append(_difference(f"{key.upper()}_{'DECREASED' if wider else 'INCREASED'}"
                                     if key in old else f"{key.upper()}_ADDED", f"{path}/{key}"))
    if "enum" in new and ("enum" not in old or not set(map(json.dumps, old["enum"])) <= set(map(json.dumps,
                                                                                                 new["enum"]))):
        found.append(_difference("ENUM_ARRAY_NARROWED" if "enum" in old else "ENUM_ARRAY_ADDED", f"{path}/enum"))
    _objects(old, new, path, found)
    for key in ("items", "additionalItems", "not"):
        if key in old and key in new:
            _compare(old[key], new[key], f"{path}/{key}", found)


def _objects(old: dict, new: dict, path: str, found: list[str]) -> None:
    old_props, new_props = old.get("properties", {}), new.get("properties", {})
    old_required, new_required = set(old.get("required", ())), set(new.get("required", ()))
    for name, schema in new_props.items():
        where = f"{path}/properties/{name}"
        if name in old_props:
            _compare(old_props[name], schema, where, found)
        elif _open(old) and schema not in (True, {}):
            found.append(_difference("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where))
        elif name in new_required and not (isinstance(schema, dict) and "default" in schema):
            found.append(_difference("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where))
    for name in old_props:
        if name not in new_props and not _open(new):
            found.append(_difference("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", f"{path}/properties/{name}"))
    for name in sorted(new_required - old_required):
        schema = new_props.get(name, {})
        if name in old_props and not (isinstance(schema, dict) and "default" in schema):
            found.append(_difference("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required/{name}"))
    if _open(old) and not _open(new) and not old_props.keys() - new_props.keys():
        found.append(_difference("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties"))
    elif isinstance(old.get("additionalProperties"), dict) and isinstance(new.get("additionalProperties"), dict):
        _compare(old["additionalProperties"], new["additionalProperties"], f"{path}/additionalProperties", found)
