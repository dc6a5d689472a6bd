"""``.proto`` text to a ``FileDescriptorProto``: the parser the registry needs for Protobuf schemas
sent as text (Java's and Go's serializers send text; Python's sends a serialized descriptor).

A recursive-descent parser of the proto2/proto3 grammar: ``syntax``, ``package``, ``import``,
``option``, ``message`` (fields, ``map<,>``, ``oneof``, nested messages and enums, ``reserved``,
``extensions``, ``extend``), ``enum``, ``service``.  Type names are left as written; the
descriptor pool resolves them (relative names, message or enum) when the file is built, and
reports what does not resolve.  Custom options (``(name) = ...``) are accepted and dropped;
groups are refused.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)
      |[-+]?(?:inf|nan)\b)
  | (?P<ident>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<symbol>[{}\[\]()<>;=,:])
""", re.VERBOSE | re.DOTALL)

SCALARS = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7, "bool": 8,
           "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16, "sint32": 17, "sint64": 18}
LABELS = {"optional": 1, "required": 2, "repeated": 3}
MAX_FIELD = 536870911


class ProtoSyntaxError(ValueError):
    pass


def tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens, pos, line = [], 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ProtoSyntaxError(f"line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind != "space":
            tokens.append((kind, m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    return tokens


def _unquote(token: str) -> str:
    body = token[1:-1]
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape") if "\\" in body else body


class Parser:
    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.i = 0

    # token helpers

    def peek(self, ahead: int = 0) -> str | None:
        j = self.i + ahead
        return self.tokens[j][1] if j < len(self.tokens) else None

    def fail(self, message: str) -> ProtoSyntaxError:
        line = self.tokens[min(self.i, len(self.tokens) - 1)][2] if self.tokens else 1
        return ProtoSyntaxError(f"line {line}: {message}")

    def take(self, expected: str | None = None, kind: str | None = None) -> str:
        if self.i >= len(self.tokens):
            raise self.fail(f"unexpected end, expected {expected or kind}")
        k, value, _line = self.tokens[self.i]
        if expected is not None and value != expected or kind is not None and k != kind:
            raise self.fail(f"expected {expected or kind}, found {value!r}")
        self.i += 1
        return value

    def accept(self, value: str) -> bool:
        if self.peek() == value:
            self.i += 1
            return True
        return False

    def ident(self) -> str:
        return self.take(kind="ident")

    def integer(self) -> int:
        token = self.take()
        try:
            return int(token, 0) if not token.lstrip("+-").startswith("0") or token.lstrip("+-") in ("0",) or \
                token.lstrip("+-")[:2].lower() == "0x" else int(token, 8)
        except ValueError:
            raise self.fail(f"expected an integer, found {token!r}") from None

    def constant(self) -> str:
        """An option value as text (strings unquoted); an aggregate ``{...}`` is skipped."""
        if self.peek() == "{":
            depth = 0
            while True:
                token = self.take()
                depth += token == "{"
                depth -= token == "}"
                if depth == 0:
                    return ""
        kind = self.tokens[self.i][0] if self.i < len(self.tokens) else None
        value = self.take()
        if kind == "string":
            value = _unquote(value)
            while self.i < len(self.tokens) and self.tokens[self.i][0] == "string":  # "a" "b"
                value += _unquote(self.take())
        return value

    # the file

    def parse_file(self, fdp: Any) -> Any:
        fdp.syntax = "proto2"
        if self.peek() == "syntax":
            self.take()
            self.take("=")
            fdp.syntax = _unquote(self.take(kind="string"))
            self.take(";")
            if fdp.syntax not in ("proto2", "proto3"):
                raise self.fail(f"unknown syntax {fdp.syntax!r}")
        if fdp.syntax == "proto2":
            fdp.ClearField("syntax")
        while self.i < len(self.tokens):
            word = self.peek()
            if self.accept(";"):
                continue
            if word == "package":
                self.take()
                fdp.package = self.ident()
                self.take(";")
            elif word == "import":
                self.take()
                modifier = self.take() if self.peek() in ("public", "weak") else None
                index = len(fdp.dependency)
                fdp.dependency.append(_unquote(self.take(kind="string")))
                if modifier == "public":
                    fdp.public_dependency.append(index)
                elif modifier == "weak":
                    fdp.weak_dependency.append(index)
                self.take(";")
            elif word == "option":
                self.option(fdp.options)
            elif word == "message":
                self.message(fdp.message_type.add(), fdp.syntax == "proto3")
            elif word == "enum":
                self.enum(fdp.enum_type.add())
            elif word == "service":
                self.service(fdp.service.add())
            elif word == "extend":
                self.extend(fdp.extension, fdp.message_type, fdp.syntax == "proto3")
            else:
                raise self.fail(f"unexpected {word!r}")
        return fdp

    def option(self, options: Any) -> None:
        self.take("option")
        self.option_body(options)
        self.take(";")

    def option_body(self, options: Any) -> None:
        """``name = value``: a standard option is set, a custom one ``(x).y`` dropped."""
        if self.accept("("):
            self.ident()
            self.take(")")
            while self.peek() is not None and self.peek().startswith("."):
                self.ident()
            self.take("=")
            self.constant()
            return
        name = self.ident()
        self.take("=")
        value = self.constant()
        field = options.DESCRIPTOR.fields_by_name.get(name) if options is not None else None
        if field is None:
            raise self.fail(f"unknown option {name!r}")
        setattr(options, name, _typed(field, value))

    def field_options(self, field: Any) -> None:
        if not self.accept("["):
            return
        while True:
            if self.peek() == "default":
                self.take()
                self.take("=")
                field.default_value = self.constant()
            elif self.peek() == "json_name":
                self.take()
                self.take("=")
                field.json_name = self.constant()
            else:
                self.option_body(field.options)
            if not self.accept(","):
                break
        self.take("]")

    def message(self, msg: Any, proto3: bool) -> None:
        self.take("message")
        msg.name = self.ident()
        self.take("{")
        self.message_body(msg, proto3)

    def message_body(self, msg: Any, proto3: bool) -> None:
        self._message_items(msg, proto3)
        _synthetic_oneofs_last(msg)

    def _message_items(self, msg: Any, proto3: bool) -> None:
        while not self.accept("}"):
            word = self.peek()
            if self.accept(";"):
                continue
            if word == "message":
                self.message(msg.nested_type.add(), proto3)
            elif word == "enum":
                self.enum(msg.enum_type.add())
            elif word == "option":
                self.option(msg.options)
            elif word == "oneof":
                self.oneof(msg, proto3)
            elif word == "reserved":
                self.reserved(msg.reserved_range, msg.reserved_name, end_exclusive=True)
            elif word == "extensions":
                self.take()
                self.ranges(msg.extension_range, end_exclusive=True)
                if self.peek() == "[":
                    self.field_options(msg.extension_range[-1])
                self.take(";")
            elif word == "extend":
                self.extend(msg.extension, msg.nested_type, proto3)
            elif word == "map" and self.peek(1) == "<":
                self.map_field(msg)
            else:
                self.field(msg, msg.field.add(), proto3)

    def field(self, msg: Any, field: Any, proto3: bool, oneof: int | None = None) -> None:
        label = self.peek() if self.peek() in LABELS and self.peek(1) not in ("=",) and oneof is None else None
        if label is not None:
            self.take()
        type_name = self.ident()
        if type_name == "group":
            raise self.fail("groups are not supported")
        field.name = self.ident()
        self.take("=")
        field.number = self.integer()
        field.label = LABELS.get(label or "optional", 1)
        if label == "optional" and proto3:
            field.proto3_optional = True
        if type_name in SCALARS:
            field.type = SCALARS[type_name]
        else:
            field.type_name = type_name
        if oneof is not None:
            field.oneof_index = oneof
        self.field_options(field)
        self.take(";")
        if field.proto3_optional and msg is not None:  # a synthetic oneof, as protoc makes
            field.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{field.name}")

    def map_field(self, msg: Any) -> None:
        self.take("map")
        self.take("<")
        key = self.ident()
        self.take(",")
        value = self.ident()
        self.take(">")
        name = self.ident()
        self.take("=")
        number = self.integer()
        entry_name = "".join(part[:1].upper() + part[1:] for part in name.split("_")) + "Entry"
        entry = msg.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        for index, (field_name, type_name) in enumerate((("key", key), ("value", value)), 1):
            f = entry.field.add(name=field_name, number=index, label=1)
            if type_name in SCALARS:
                f.type = SCALARS[type_name]
            else:
                f.type_name = type_name
        field = msg.field.add(name=name, number=number, label=3, type_name=entry_name)
        self.field_options(field)
        self.take(";")

    def oneof(self, msg: Any, proto3: bool) -> None:
        self.take("oneof")
        index = len(msg.oneof_decl)
        decl = msg.oneof_decl.add(name=self.ident())
        self.take("{")
        while not self.accept("}"):
            if self.accept(";"):
                continue
            if self.peek() == "option":
                self.option(decl.options)
            else:
                self.field(None, msg.field.add(), proto3, oneof=index)

    def ranges(self, target: Any, end_exclusive: bool) -> None:
        while True:
            start = self.integer()
            end = start
            if self.accept("to"):
                end = MAX_FIELD if self.accept("max") else self.integer()
            target.add(start=start, end=end + 1 if end_exclusive else end)
            if not self.accept(","):
                return

    def reserved(self, ranges: Any, names: Any, end_exclusive: bool) -> None:
        self.take("reserved")
        if self.tokens[self.i][0] == "string":
            while True:
                names.append(_unquote(self.take(kind="string")))
                if not self.accept(","):
                    break
        else:
            self.ranges(ranges, end_exclusive)
        self.take(";")

    def enum(self, enum: Any) -> None:
        self.take("enum")
        enum.name = self.ident()
        self.take("{")
        while not self.accept("}"):
            if self.accept(";"):
                continue
            if self.peek() == "option":
                self.option(enum.options)
            elif self.peek() == "reserved":
                self.reserved(enum.reserved_range, enum.reserved_name, end_exclusive=False)
            else:
                value = enum.value.add(name=self.ident())
                self.take("=")
                value.number = self.integer()
                if self.accept("["):
                    while True:
                        self.option_body(value.options)
                        if not self.accept(","):
                            break
                    self.take("]")
                self.take(";")

    def service(self, service: Any) -> None:
        self.take("service")
        service.name = self.ident()
        self.take("{")
        while not self.accept("}"):
            if self.accept(";"):
                continue
            if self.peek() == "option":
                self.option(service.options)
                continue
            self.take("rpc")
            method = service.method.add(name=self.ident())
            self.take("(")
            method.client_streaming = self.accept("stream")
            method.input_type = self.ident()
            self.take(")")
            self.take("returns")
            self.take("(")
            method.server_streaming = self.accept("stream")
            method.output_type = self.ident()
            self.take(")")
            if self.accept("{"):
                while not self.accept("}"):
                    if not self.accept(";"):
                        self.option(method.options)
            else:
                self.take(";")

    def extend(self, extensions: Any, messages: Any, proto3: bool) -> None:
        self.take("extend")
        extendee = self.ident()
        self.take("{")
        while not self.accept("}"):
            if self.accept(";"):
                continue
            field = extensions.add()
            self.field(None, field, proto3)
            field.extendee = extendee


def _synthetic_oneofs_last(msg: Any) -> None:
    """proto3 ``optional``'s synthetic oneofs after the written ones, as the descriptor pool requires."""
    synthetic = {f.oneof_index for f in msg.field if f.proto3_optional}
    if not synthetic:
        return
    order = [i for i in range(len(msg.oneof_decl)) if i not in synthetic] + sorted(synthetic)
    if order == list(range(len(msg.oneof_decl))):
        return
    new_index = {old: new for new, old in enumerate(order)}
    decls = [msg.oneof_decl[i].__deepcopy__() for i in order]
    del msg.oneof_decl[:]
    msg.oneof_decl.extend(decls)
    for f in msg.field:
        if f.HasField("oneof_index"):
            f.oneof_index = new_index[f.oneof_index]


def _typed(field: Any, value: str) -> Any:
    """An option's text as the option field's type."""
    if field.type == field.TYPE_BOOL:
        if value not in ("true", "false"):
            raise ProtoSyntaxError(f"option {field.name} takes true or false, not {value!r}")
        return value == "true"
    if field.type == field.TYPE_ENUM:
        found = field.enum_type.values_by_name.get(value)
        if found is None:
            raise ProtoSyntaxError(f"option {field.name}: unknown value {value!r}")
        return found.number
    if field.type in (field.TYPE_STRING, field.TYPE_BYTES):
        return value if field.type == field.TYPE_STRING else value.encode()
    if field.type in (field.TYPE_FLOAT, field.TYPE_DOUBLE):
        return float(value)
    return int(value, 0)


def parse_proto(text: str, name: str) -> Any:
    """``text`` as a ``FileDescriptorProto`` named ``name`` (type names unresolved); raises ProtoSyntaxError."""
    from google.protobuf import descriptor_pb2  # noqa: PLC0415 - the first Protobuf schema pays for it

    return Parser(text).parse_file(descriptor_pb2.FileDescriptorProto(name=name))
