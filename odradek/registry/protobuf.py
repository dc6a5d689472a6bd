"""Protobuf schemas: ``.proto`` text or a base64 ``FileDescriptorProto``, built by protobuf's
descriptor pool, stored as ``.proto`` text, compared by Confluent's Protobuf rules.

Confluent's ``ProtobufSchema`` parses the text and, failing that, base64-decodes a serialized
descriptor (what confluent-kafka's Python serializer sends); either way it stores the text
rendered from the parsed file.  ``format=serialized`` gives the descriptor back in base64
(what the Python deserializer asks for).  Imports are the references (by import name), plus
the files Confluent has built in: ``google/protobuf/*.proto``, ``confluent/meta.proto``,
``confluent/type/decimal.proto``, which need no reference.

``compatibility`` is Confluent's ``SchemaDiff`` (``protobuf.diff``): messages by full name,
fields by number; a removed message, a changed package, a field's kind or scalar kind
(``FieldSchemaDiff.scalarKind``), named type or numeric label, a required field added or
removed, a oneof field removed, fields moved into a oneof are incompatible; the rest
(added messages, fields, enum constants; renames) is compatible.
"""

from __future__ import annotations

import base64
import importlib
from typing import Any

from .proto_text import ProtoSyntaxError, parse_proto
from .schemas import Dependency, ParsedSchema, SchemaParseError

MAIN_FILE = "schema.proto"
WELL_KNOWN = ("any", "api", "descriptor", "duration", "empty", "field_mask", "source_context", "struct",
              "timestamp", "type", "wrappers")
CONFLUENT_FILES = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
option go_package = "../confluent";
message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; }
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
option go_package = "../type";
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
""",
}


class ProtoModel:
    """The file's resolved ``FileDescriptorProto`` (type names full, types known)."""

    def __init__(self, file: Any):
        self.file = file


def _descriptor(text: str, name: str) -> Any:
    """``text`` as .proto text, else as a base64 serialized ``FileDescriptorProto``."""
    try:
        return parse_proto(text, name)
    except ProtoSyntaxError as syntax_error:
        from google.protobuf import descriptor_pb2  # noqa: PLC0415

        try:
            raw = base64.b64decode(text.strip(), validate=True)
            fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
        except Exception:  # not base64, or not a descriptor (protobuf's DecodeError)
            raise SchemaParseError(f"Invalid schema {text[:2000]}, details: {syntax_error}") from None
        if not fdp.name and not fdp.message_type and not fdp.enum_type:
            raise SchemaParseError(f"Invalid schema {text[:2000]}, details: {syntax_error}") from None
        fdp.name = name
        return fdp


def _builtin(name: str) -> Any | None:
    """A file Confluent knows without a reference, as a ``FileDescriptorProto``."""
    from google.protobuf import descriptor_pb2  # noqa: PLC0415

    if name.startswith("google/protobuf/") and name.removeprefix("google/protobuf/").removesuffix(".proto") \
            in WELL_KNOWN:
        module = importlib.import_module(f"google.protobuf.{name.removeprefix('google/protobuf/')[:-6]}_pb2")
        fdp = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(fdp)
        return fdp
    if name in CONFLUENT_FILES:
        return parse_proto(CONFLUENT_FILES[name], name)
    return None


def parse(text: str, dependencies: tuple[Dependency, ...] = ()) -> ParsedSchema:
    from google.protobuf import descriptor_pb2, descriptor_pool  # noqa: PLC0415

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(fdp: Any) -> None:
        for dep in fdp.dependency:
            if dep not in added:
                builtin = _builtin(dep)
                if builtin is not None:
                    add(builtin)
        if fdp.name not in added:
            pool.Add(fdp)
            added.add(fdp.name)

    try:
        for dep in dependencies:
            if dep.schema_type != "PROTOBUF":
                raise SchemaParseError(f"Invalid schema {text[:2000]}, details: reference {dep.name} is "
                                       f"{dep.schema_type}, not PROTOBUF")
            add(_descriptor(dep.schema, dep.name))
        fdp = _descriptor(text, MAIN_FILE)
        missing = [d for d in fdp.dependency if d not in added and _builtin(d) is None]
        if missing:
            raise SchemaParseError(f"Invalid schema {text[:2000]}, details: imports without a reference: "
                                   f"{', '.join(missing)}")
        add(fdp)
        resolved = descriptor_pb2.FileDescriptorProto()
        pool.FindFileByName(fdp.name).CopyToProto(resolved)
    except SchemaParseError:
        raise
    except Exception as exc:  # the pool's TypeError / KeyError name what does not resolve
        raise SchemaParseError(f"Invalid schema {text[:2000]}, details: {exc}") from None
    resolved.name = MAIN_FILE
    return ParsedSchema("PROTOBUF", render(resolved), ProtoModel(resolved), dependencies)


def normalize(parsed: ParsedSchema) -> str:
    """Confluent's normalized Protobuf: the rendered text with messages, enums, fields and options
    in a fixed order (by name; fields by number)."""
    from google.protobuf import descriptor_pb2  # noqa: PLC0415

    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.CopyFrom(parsed.model.file)
    _sort(fdp.message_type)
    _sort_list(fdp.enum_type, key=lambda e: e.name)
    _sort_list(fdp.service, key=lambda s: s.name)
    return render(fdp)


def _sort_list(items: Any, key) -> None:
    ordered = sorted((x.__deepcopy__() for x in items), key=key)
    del items[:]
    items.extend(ordered)


def _sort(messages: Any) -> None:
    for msg in messages:
        _sort(msg.nested_type)
        _sort_list(msg.nested_type, key=lambda m: m.name)
        _sort_list(msg.enum_type, key=lambda e: e.name)
        _sort_list(msg.field, key=lambda f: f.number)
    _sort_list(messages, key=lambda m: m.name)


def formatted(parsed: ParsedSchema, fmt: str) -> str:
    if fmt == "serialized":
        return base64.b64encode(parsed.model.file.SerializeToString()).decode("ascii")
    return parsed.canonical


# --- rendering .proto text -------------------------------------------------------------------------

_TYPE_NAMES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
               9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _option_value(field: Any, value: Any) -> str:
    if field.type == field.TYPE_STRING:
        return _quote(value)
    if field.type == field.TYPE_BYTES:
        return _quote(value.decode("latin-1"))
    if field.type == field.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == field.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    return str(value)


def _options(options: Any) -> list[str]:
    return [f"{f.name} = {_option_value(f, v)}" for f, v in options.ListFields()
            if not f.is_repeated and not f.is_extension and f.message_type is None]


def render(fdp: Any) -> str:
    """The file as ``.proto`` text (what Confluent stores as the canonical schema)."""
    proto3 = fdp.syntax == "proto3"
    out = [f'syntax = "{fdp.syntax or "proto2"}";']
    if fdp.package:
        out.append(f"package {fdp.package};")
    if fdp.dependency:
        out.append("")
    for i, dep in enumerate(fdp.dependency):
        modifier = "public " if i in fdp.public_dependency else "weak " if i in fdp.weak_dependency else ""
        out.append(f"import {modifier}{_quote(dep)};")
    file_options = _options(fdp.options)
    if file_options:
        out.append("")
        out += [f"option {o};" for o in file_options]
    for msg in fdp.message_type:
        out.append("")
        out += _message(msg, proto3, "")
    for enum in fdp.enum_type:
        out.append("")
        out += _enum(enum, "")
    out += _extensions(fdp.extension, proto3, "")
    for service in fdp.service:
        out.append("")
        out.append(f"service {service.name} {{")
        out += [f"  option {o};" for o in _options(service.options)]
        for m in service.method:
            client = "stream " if m.client_streaming else ""
            server = "stream " if m.server_streaming else ""
            opts = _options(m.options)
            body = " {\n" + "".join(f"    option {o};\n" for o in opts) + "  }" if opts else ";"
            out.append(f"  rpc {m.name}({client}{m.input_type}) returns ({server}{m.output_type}){body}")
        out.append("}")
    return "\n".join(out) + "\n"


def _type(field: Any) -> str:
    return field.type_name if field.type_name else _TYPE_NAMES[field.type]


def _field(field: Any, proto3: bool, indent: str, maps: dict[str, Any], in_oneof: bool) -> str:
    entry = maps.get(field.type_name.rpartition(".")[2]) if field.label == 3 and field.type_name else None
    if entry is not None:
        key, value = entry.field[0], entry.field[1]
        head = f"map<{_type(key)}, {_type(value)}> {field.name} = {field.number}"
    else:
        label = ""
        if not in_oneof:
            if field.label == 3:
                label = "repeated "
            elif field.label == 2:
                label = "required "
            elif not proto3 or field.proto3_optional:
                label = "optional "
        head = f"{label}{_type(field)} {field.name} = {field.number}"
    opts = []
    if field.HasField("default_value"):
        default = field.default_value
        opts.append(f"default = {_quote(default) if field.type in (9, 12) else default}")
    if field.HasField("json_name") and field.json_name != _camel(field.name):
        opts.append(f"json_name = {_quote(field.json_name)}")
    opts += _options(field.options)
    return f"{indent}{head}{' [' + ', '.join(opts) + ']' if opts else ''};"


def _camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _message(msg: Any, proto3: bool, indent: str) -> list[str]:
    inner = indent + "  "
    out = [f"{indent}message {msg.name} {{"]
    out += [f"{inner}option {o};" for o in _options(msg.options)]
    maps = {n.name: n for n in msg.nested_type if n.options.map_entry}
    for r in msg.reserved_range:
        out.append(f"{inner}reserved {r.start}{'' if r.end - 1 == r.start else f' to {r.end - 1}'};")
    if msg.reserved_name:
        out.append(f"{inner}reserved {', '.join(_quote(n) for n in msg.reserved_name)};")
    synthetic = {f.oneof_index for f in msg.field if f.proto3_optional}
    done_oneofs: set[int] = set()
    for field in msg.field:
        if field.HasField("oneof_index") and field.oneof_index not in synthetic:
            index = field.oneof_index
            if index in done_oneofs:
                continue
            done_oneofs.add(index)
            out.append(f"{inner}oneof {msg.oneof_decl[index].name} {{")
            out += [_field(f, proto3, inner + "  ", maps, True) for f in msg.field
                    if f.HasField("oneof_index") and f.oneof_index == index]
            out.append(f"{inner}}}")
        else:
            out.append(_field(field, proto3, inner, maps, False))
    for r in msg.extension_range:
        out.append(f"{inner}extensions {r.start}{'' if r.end - 1 == r.start else f' to {r.end - 1}'};")
    for nested in msg.nested_type:
        if not nested.options.map_entry:
            out += _message(nested, proto3, inner)
    for enum in msg.enum_type:
        out += _enum(enum, inner)
    out += _extensions(msg.extension, proto3, inner)
    out.append(f"{indent}}}")
    return out


def _enum(enum: Any, indent: str) -> list[str]:
    inner = indent + "  "
    out = [f"{indent}enum {enum.name} {{"]
    out += [f"{inner}option {o};" for o in _options(enum.options)]
    for r in enum.reserved_range:
        out.append(f"{inner}reserved {r.start}{'' if r.end == r.start else f' to {r.end}'};")
    if enum.reserved_name:
        out.append(f"{inner}reserved {', '.join(_quote(n) for n in enum.reserved_name)};")
    for value in enum.value:
        opts = _options(value.options)
        out.append(f"{inner}{value.name} = {value.number}{' [' + ', '.join(opts) + ']' if opts else ''};")
    out.append(f"{indent}}}")
    return out


def _extensions(extensions: Any, proto3: bool, indent: str) -> list[str]:
    out: list[str] = []
    for extendee in dict.fromkeys(e.extendee for e in extensions):
        out.append(f"{indent}extend {extendee} {{")
        out += [_field(e, proto3, indent + "  ", {}, False) for e in extensions if e.extendee == extendee]
        out.append(f"{indent}}}")
    return out


# --- compatibility (Confluent's SchemaDiff) ---------------------------------------------------------------

# FieldSchemaDiff.scalarKind: a change within a kind is compatible
_SCALAR_KIND = {5: "GENERAL_NUMBER", 3: "GENERAL_NUMBER", 13: "GENERAL_NUMBER", 4: "GENERAL_NUMBER",
                8: "GENERAL_NUMBER", 14: "GENERAL_NUMBER", 17: "SIGNED_NUMBER", 18: "SIGNED_NUMBER",
                9: "STRING_OR_BYTES", 12: "STRING_OR_BYTES", 7: "FIXED32", 15: "FIXED32", 6: "FIXED64",
                16: "FIXED64", 2: "FLOAT", 1: "DOUBLE"}
_MESSAGE = 11
_ENUM = 14


def _difference(error: str, path: str) -> str:
    return f'{{errorType:"{error}", description:"#/{path}"}}'


def compatibility(reader: ParsedSchema, writer: ParsedSchema, reader_label: str = "new",
                  writer_label: str = "old") -> list[str]:
    """Confluent's ``SchemaDiff.compare(original=writer, update=reader)``, incompatible differences only."""
    old, new = writer.model.file, reader.model.file
    found: list[str] = []
    if old.package != new.package:
        found.append(_difference("PACKAGE_CHANGED", ""))
    old_messages, new_messages = _messages(old), _messages(new)
    for name, msg in old_messages.items():
        if name not in new_messages:
            found.append(_difference("MESSAGE_REMOVED", name))
        else:
            _compare_message(msg, new_messages[name], name, old.syntax == "proto3", found)
    return found


def _messages(fdp: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def visit(messages: Any, prefix: str) -> None:
        for msg in messages:
            if msg.options.map_entry:
                continue
            name = f"{prefix}{msg.name}"
            found[name] = msg
            visit(msg.nested_type, name + ".")

    visit(fdp.message_type, f"{fdp.package}." if fdp.package else "")
    return found


def _kind(field: Any) -> str:
    return "MESSAGE" if field.type == _MESSAGE else "SCALAR"


def _compare_message(old: Any, new: Any, path: str, proto3: bool, found: list[str]) -> None:
    old_fields = {f.number: f for f in old.field}
    new_fields = {f.number: f for f in new.field}
    real_oneof = _real_oneofs(old), _real_oneofs(new)
    for number, field in old_fields.items():
        where = f"{path}/{number}"
        other = new_fields.get(number)
        if other is None:
            if field.label == 2:
                found.append(_difference("REQUIRED_FIELD_REMOVED", where))
            if field.number in real_oneof[0]:
                found.append(_difference("ONEOF_FIELD_REMOVED", where))
            continue
        if field.label == 2 and other.label != 2:
            found.append(_difference("REQUIRED_FIELD_REMOVED", where))
        elif other.label == 2 and field.label != 2:
            found.append(_difference("REQUIRED_FIELD_ADDED", where))
        if _kind(field) != _kind(other):
            found.append(_difference("FIELD_KIND_CHANGED", where))
        elif _kind(field) == "MESSAGE":
            if field.type_name != other.type_name:
                found.append(_difference("FIELD_NAMED_TYPE_CHANGED", where))
        elif _SCALAR_KIND.get(field.type) != _SCALAR_KIND.get(other.type):
            found.append(_difference("FIELD_SCALAR_KIND_CHANGED", where))
        if (field.label == 3) != (other.label == 3) and field.type not in (9, 12, _MESSAGE) and \
                not (proto3 and not field.proto3_optional and field.label != 3):
            found.append(_difference("FIELD_NUMERIC_LABEL_CHANGED", where))
    moved: dict[int, list[int]] = {}
    for number in new_fields:
        index = real_oneof[1].get(number)
        if index is not None and number in old_fields and real_oneof[0].get(number) is None:
            moved.setdefault(index, []).append(number)
    old_oneof_names = {old.oneof_decl[i].name for i in set(real_oneof[0].values())}
    for index, numbers in moved.items():
        if new.oneof_decl[index].name in old_oneof_names:
            found.append(_difference("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{numbers[0]}"))
        elif len(numbers) > 1:
            found.append(_difference("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{numbers[0]}"))


def _real_oneofs(msg: Any) -> dict[int, int]:
    """field number -> oneof index, for oneofs written in the schema (not proto3 optional's)."""
    return {f.number: f.oneof_index for f in msg.field if f.HasField("oneof_index") and not f.proto3_optional}
