"""Declare each Kafka message once; get a compiled construct struct per version.

A declaration mirrors Kafka's JSON message definitions: a list of fields,
each with the versions it exists in, the versions in which it may be null,
an optional tag (tagged fields of flexible versions), a default and, for
structs and arrays of structs, its own fields.  ``Message.struct(v)`` turns
the one declaration into a ``KStruct`` for version ``v`` -- compact encodings
in flexible versions, classic ones otherwise -- compiles it with construct on
first use and caches it, so start-up pays for nothing it does not use.

    F("rebalance_timeout_ms", "int32", "1+", default=-1)
    F("group_instance_id", "string", "5+", nullable="5+", default=None)
    F("protocols", "[]", fields=[F("name", "string"), F("metadata", "bytes")])
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Any

from construct import Construct, Container

from . import fastcodec
from . import primitives as p


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``hi`` None means open-ended, lo > hi empty."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | Versions | None) -> Versions:
        if isinstance(text, Versions):
            return text
        if text is None or text == "none":
            return cls(1, 0)
        text = str(text).strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v and (self.hi is None or v <= self.hi)

    def __iter__(self):
        if self.hi is None:
            raise ValueError("open-ended range")
        return iter(range(self.lo, self.hi + 1))

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        if self.lo > self.hi:
            return "none"
        return f"{self.lo}-{self.hi}"


_MISSING = object()

# type name -> (classic construct, compact construct, nullable classic, nullable compact)
_PRIMS: dict[str, tuple[Construct, Construct, Construct | None, Construct | None]] = {
    "int8": (p.INT8, p.INT8, None, None),
    "int16": (p.INT16, p.INT16, None, None),
    "uint16": (p.UINT16, p.UINT16, None, None),
    "int32": (p.INT32, p.INT32, None, None),
    "uint32": (p.UINT32, p.UINT32, None, None),
    "int64": (p.INT64, p.INT64, None, None),
    "float64": (p.FLOAT64, p.FLOAT64, None, None),
    "bool": (p.BOOL, p.BOOL, None, None),
    "uuid": (p.UUID, p.UUID, None, None),
    "string": (p.STRING, p.COMPACT_STRING, p.NULLABLE_STRING, p.COMPACT_NULLABLE_STRING),
    "bytes": (p.BYTES, p.COMPACT_BYTES, p.NULLABLE_BYTES, p.COMPACT_NULLABLE_BYTES),
    # records travel as opaque bytes: Produce/Fetch never decode them here
    "records": (p.NULLABLE_BYTES, p.COMPACT_NULLABLE_BYTES, p.NULLABLE_BYTES, p.COMPACT_NULLABLE_BYTES),
}

_PRIM_DEFAULTS = {
    "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
    "float64": 0.0, "bool": False, "uuid": p.ZERO_UUID, "string": "",
    "bytes": b"", "records": None,
}


class F:
    """One field of a message declaration (see module docstring)."""

    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "default",
                 "fields", "flexible")

    def __init__(self, name: str, type: str, versions: str = "0+", *,
                 nullable: str = "none", tag: int | None = None, tagged: str | None = None,
                 default: Any = _MISSING, fields: list[F] | None = None,
                 flexible: str | None = None):
        self.name = name
        self.type = type
        self.versions = Versions.parse(versions)
        self.nullable = Versions.parse(nullable)
        self.tag = tag
        self.tagged = Versions.parse(tagged if tagged is not None else
                                     (versions if tag is not None else "none"))
        self.fields = fields
        # flexible=None follows the message; "none" keeps classic encoding
        # (RequestHeader.client_id is the one field that needs it)
        self.flexible = None if flexible is None else Versions.parse(flexible)
        if fields is None and self.elem_type not in _PRIMS:
            raise ValueError(f"{name}: unknown type {type!r}")
        self.default = self._initial_default() if default is _MISSING else default

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def _initial_default(self) -> Any:
        if self.is_array:
            return []
        if self.fields is not None:
            return Container({f.name: f.default for f in self.fields})
        return _PRIM_DEFAULTS[self.type]


def _build_struct(fields: list[F], version: int, flexible: bool) -> p.KStruct:
    regular, tagged, absent = [], [], []
    for f in fields:
        if version not in f.versions:
            absent.append((f.name, f.default))
            continue
        sc = _field_construct(f, version, flexible)
        if version in f.tagged:
            tagged.append((f.tag, f.name, sc, f.default))
        else:
            regular.append((f.name, sc, f.default))
    return p.KStruct(regular, tagged if flexible else None, absent)


def _field_construct(f: F, version: int, flexible: bool) -> Construct:
    compact = flexible and (f.flexible is None or version in f.flexible)
    nullable = version in f.nullable
    if f.fields is not None:
        item: Construct = _build_struct(f.fields, version, flexible)
        if nullable and not f.is_array:  # a nullable struct: an int8 marker, -1 null, 1 present
            return p.KNullableStruct(item)
    else:
        classic, comp, nclassic, ncomp = _PRIMS[f.elem_type]
        if f.is_array:
            item = comp if compact else classic
        elif nullable:
            item = ncomp if compact else nclassic
            if item is None:
                raise ValueError(f"{f.name}: {f.type} cannot be nullable")
        else:
            item = comp if compact else classic
    if f.is_array:
        return p.KArray(item, compact, nullable)
    return item


class Message:
    """A request, response, header or record declared once for all versions."""

    def __init__(self, name: str, fields: list[F], valid: str, flexible: str = "none"):
        self.name = name
        self.fields = fields
        self.valid = Versions.parse(valid)
        self.flexible = Versions.parse(flexible)
        self._compiled: dict[int, Construct] = {}
        self._fast: dict[int, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Message({self.name}, {self.valid})"

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def struct(self, version: int, compiled: bool = True) -> Construct:
        """The construct for ``version`` (compiled and cached unless asked not to)."""
        if version not in self.valid:
            raise ValueError(f"{self.name} has no version {version}")
        if not compiled:
            return _build_struct(self.fields, version, self.is_flexible(version))
        sc = self._compiled.get(version)
        if sc is None:
            with self._lock:
                sc = self._compiled.get(version)
                if sc is None:
                    sc = _build_struct(self.fields, version, self.is_flexible(version)).compile()
                    self._compiled[version] = sc
        return sc

    def codec(self, version: int) -> tuple[Any, Any]:
        """``(read_at, build)`` for ``version``: ``read_at(buf: bytes, pos) -> (obj, end)``, ``build(obj) -> bytes``.

        Generated by :mod:`.fastcodec` from this declaration: the same bytes
        and the same ``Container``/dict shapes as the construct struct,
        without a stream object or a call per field (an OffsetCommit request
        parses in a third of the time).  Declarations beyond its scope
        (declared tagged fields, uuids, plain nested structs) get the
        construct struct behind the same signatures.
        """
        fc = self._fast.get(version)
        if fc is None:
            if version not in self.valid:
                raise ValueError(f"{self.name} has no version {version}")
            try:
                read_at = fastcodec.compile_reader(self, version, None)
            except fastcodec.UnsupportedDeclaration:
                read_at = self._construct_reader(version)
            try:
                build = fastcodec.compile_writer(self, version, mapping=True)
            except fastcodec.UnsupportedDeclaration:
                build = self._construct_builder(version)
            fc = self._fast[version] = (read_at, build)
        return fc

    def _construct_reader(self, version: int):
        parse = self.struct(version).parsefunc
        name = self.name

        def read_at(buf, pos: int) -> tuple[Container, int]:
            reader = p.Reader(buf, pos)
            try:
                return parse(reader, None), reader.pos
            except (struct.error, IndexError) as exc:
                raise p.ProtocolError(f"{name} v{version} is truncated: {exc}") from None
        return read_at

    def _construct_builder(self, version: int):
        build = self.struct(version).buildfunc

        def build_bytes(obj: dict) -> bytes:
            w = p.Writer()
            build(obj, w, None)
            return w.getvalue()
        return build_bytes

    def read(self, reader: p.Reader, version: int) -> Container:
        """Parse from a reader positioned at the message (leaves it after it)."""
        buf = reader.buf
        if type(buf) is not bytes:  # generated readers slice bytes fields out of a bytes buffer
            reader.buf = buf = bytes(buf)
        obj, reader.pos = self.codec(version)[0](buf, reader.pos)
        return obj

    def parse(self, data: bytes | memoryview, version: int) -> Container:
        return self.read(p.Reader(data), version)

    def write(self, writer, obj: dict, version: int) -> None:
        writer.write(self.codec(version)[1](obj))

    def build(self, obj: dict, version: int) -> bytes:
        return self.codec(version)[1](obj)
