"""Kafka wire primitives as construct building blocks.

Every Kafka type is a small ``construct.Construct`` subclass that knows how to
parse and build itself *and* how to emit code for ``Struct.compile()``.  The
emitted code calls the plain ``read_*``/``write_*`` functions of this module,
so interpreted and compiled structs share one implementation and compiled
structs avoid construct's per-field context bookkeeping (that bookkeeping is
what makes interpreted construct ~6x slower on Kafka messages).

Stream contract: parse functions take a binary stream with ``read``; build
functions take a stream with ``write`` and return the value written, as
construct expects.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from construct import Construct, Container, StreamError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)


class ProtocolError(ValueError):
    """Raised for malformed wire data; the server maps it to a Kafka error."""


def _read(io, n: int) -> bytes:
    data = io.read(n)
    if len(data) != n:
        raise ProtocolError(f"expected {n} bytes, got {len(data)}")
    return data


# --- fixed-width integers -------------------------------------------------

def read_int8(io) -> int:
    return _I8.unpack(_read(io, 1))[0]


def read_int16(io) -> int:
    return _I16.unpack(_read(io, 2))[0]


def read_uint16(io) -> int:
    return _U16.unpack(_read(io, 2))[0]


def read_int32(io) -> int:
    return _I32.unpack(_read(io, 4))[0]


def read_uint32(io) -> int:
    return _U32.unpack(_read(io, 4))[0]


def read_int64(io) -> int:
    return _I64.unpack(_read(io, 8))[0]


def read_float64(io) -> float:
    return _F64.unpack(_read(io, 8))[0]


def read_bool(io) -> bool:
    return _read(io, 1) != b"\x00"


def read_uuid(io) -> uuid.UUID:
    return uuid.UUID(bytes=_read(io, 16))


def write_int8(io, v: int) -> int:
    io.write(_I8.pack(v))
    return v


def write_int16(io, v: int) -> int:
    io.write(_I16.pack(v))
    return v


def write_uint16(io, v: int) -> int:
    io.write(_U16.pack(v))
    return v


def write_int32(io, v: int) -> int:
    io.write(_I32.pack(v))
    return v


def write_uint32(io, v: int) -> int:
    io.write(_U32.pack(v))
    return v


def write_int64(io, v: int) -> int:
    io.write(_I64.pack(v))
    return v


def write_float64(io, v: float) -> float:
    io.write(_F64.pack(v))
    return v


def write_bool(io, v: bool) -> bool:
    io.write(b"\x01" if v else b"\x00")
    return v


def write_uuid(io, v: uuid.UUID | None) -> uuid.UUID:
    v = v or ZERO_UUID
    io.write(v.bytes)
    return v


# --- varints ----------------------------------------------------------------

def read_uvarint(io) -> int:
    """Unsigned LEB128 varint, as used by flexible protocol versions."""
    result = 0
    shift = 0
    while True:
        b = io.read(1)
        if not b:
            raise ProtocolError("truncated varint")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
        if shift > 63:
            raise ProtocolError("varint too long")


_ONE_BYTE = tuple(bytes((v,)) for v in range(0x80))


def encode_uvarint(v: int) -> bytes:
    if 0 <= v < 0x80:  # lengths and counts, nearly always
        return _ONE_BYTE[v]
    if v < 0:
        raise ProtocolError(f"unsigned varint cannot hold {v}")
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_uvarint(io, v: int) -> int:
    io.write(encode_uvarint(v))
    return v


def zigzag_encode(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def zigzag_decode(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def read_varint(io) -> int:
    """Zig-zag varint (record fields); 32- and 64-bit forms share one codec."""
    return zigzag_decode(read_uvarint(io))


def write_varint(io, v: int) -> int:
    io.write(encode_uvarint(zigzag_encode(v) & 0xFFFFFFFFFFFFFFFF))
    return v


# --- strings and bytes --------------------------------------------------------

def _decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"invalid UTF-8 string: {exc}") from None


def read_string(io) -> str:
    n = read_int16(io)
    if n < 0:
        raise ProtocolError("null in a non-nullable string")
    return _decode_utf8(_read(io, n))


def read_nstring(io) -> str | None:
    n = read_int16(io)
    if n < 0:
        return None
    return _decode_utf8(_read(io, n))


def read_cstring(io) -> str:
    n = read_uvarint(io) - 1
    if n < 0:
        raise ProtocolError("null in a non-nullable compact string")
    return _decode_utf8(_read(io, n))


def read_cnstring(io) -> str | None:
    n = read_uvarint(io) - 1
    if n < 0:
        return None
    return _decode_utf8(_read(io, n))


def _utf8(v: str | None, nullable: bool) -> bytes | None:
    if v is None:
        if not nullable:
            raise ProtocolError("null given for a non-nullable string")
        return None
    return v.encode("utf-8")


def write_string(io, v: str) -> str:
    data = _utf8(v, False)
    if len(data) > 0x7FFF:
        raise ProtocolError("string longer than 32767 bytes")
    io.write(_I16.pack(len(data)) + data)
    return v


def write_nstring(io, v: str | None) -> str | None:
    data = _utf8(v, True)
    if data is None:
        io.write(_I16.pack(-1))
    else:
        if len(data) > 0x7FFF:
            raise ProtocolError("string longer than 32767 bytes")
        io.write(_I16.pack(len(data)) + data)
    return v


def write_cstring(io, v: str) -> str:
    data = _utf8(v, False)
    io.write(encode_uvarint(len(data) + 1) + data)
    return v


def write_cnstring(io, v: str | None) -> str | None:
    data = _utf8(v, True)
    io.write(b"\x00" if data is None else encode_uvarint(len(data) + 1) + data)
    return v


def read_bytes(io) -> bytes:
    n = read_int32(io)
    if n < 0:
        raise ProtocolError("null in non-nullable bytes")
    return _read(io, n)


def read_nbytes(io) -> bytes | None:
    n = read_int32(io)
    return None if n < 0 else _read(io, n)


def read_cbytes(io) -> bytes:
    n = read_uvarint(io) - 1
    if n < 0:
        raise ProtocolError("null in non-nullable compact bytes")
    return _read(io, n)


def read_cnbytes(io) -> bytes | None:
    n = read_uvarint(io) - 1
    return None if n < 0 else _read(io, n)


def write_bytes(io, v: bytes) -> bytes:
    if v is None:
        raise ProtocolError("null given for non-nullable bytes")
    io.write(_I32.pack(len(v)))
    io.write(v)
    return v


def write_nbytes(io, v: bytes | None) -> bytes | None:
    if v is None:
        io.write(_I32.pack(-1))
    else:
        io.write(_I32.pack(len(v)))
        io.write(v)
    return v


def write_cbytes(io, v: bytes) -> bytes:
    if v is None:
        raise ProtocolError("null given for non-nullable bytes")
    io.write(encode_uvarint(len(v) + 1))
    io.write(v)
    return v


def write_cnbytes(io, v: bytes | None) -> bytes | None:
    if v is None:
        io.write(b"\x00")
    else:
        io.write(encode_uvarint(len(v) + 1))
        io.write(v)
    return v


# --- arrays -------------------------------------------------------------------

MAX_ARRAY = 1 << 24  # refuse absurd element counts before allocating


def read_array_len(io, compact: bool, nullable: bool) -> int:
    n = read_uvarint(io) - 1 if compact else read_int32(io)
    if n < 0:
        if not nullable:
            raise ProtocolError("null in a non-nullable array")
        return -1
    if n > MAX_ARRAY:
        raise ProtocolError(f"array of {n} elements is too large")
    return n


def read_array(io, item: Callable, compact: bool, nullable: bool) -> list | None:
    n = read_array_len(io, compact, nullable)
    if n < 0:
        return None
    return [item(io) for _ in range(n)]


def write_array(io, v: list | None, item: Callable, compact: bool, nullable: bool):
    if v is None:
        if not nullable:
            raise ProtocolError("null given for a non-nullable array")
        io.write(b"\x00" if compact else _I32.pack(-1))
        return v
    io.write(encode_uvarint(len(v) + 1) if compact else _I32.pack(len(v)))
    for element in v:
        item(io, element)
    return v


# --- tagged fields --------------------------------------------------------------

def read_tagged(io, result: dict, tags: dict[int, tuple[str, Callable]]) -> None:
    """Read a tagged-field section into ``result``; unknown tags are skipped."""
    count = read_uvarint(io)
    for _ in range(count):
        tag = read_uvarint(io)
        size = read_uvarint(io)
        data = _read(io, size)
        known = tags.get(tag)
        if known is not None:
            name, parse = known
            sub = _Reader(data)
            result[name] = parse(sub)


def write_tagged(io, obj: dict, tags: list[tuple[int, str, Callable, Any]]) -> None:
    """Write the tagged fields whose value differs from their default."""
    present = []
    for tag, name, build, default in tags:
        value = obj.get(name, default)
        if value != default:
            buf = _Writer()
            build(buf, value)
            present.append((tag, buf.getvalue()))
    io.write(encode_uvarint(len(present)))
    for tag, data in present:
        io.write(encode_uvarint(tag) + encode_uvarint(len(data)) + data)


class _Reader:
    """A minimal, fast in-memory reader (``io.BytesIO`` copies on creation)."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0):
        self.buf = buf
        self.pos = pos

    def read(self, n: int = -1) -> bytes:
        start = self.pos
        end = len(self.buf) if n < 0 else min(start + n, len(self.buf))
        self.pos = end
        return bytes(self.buf[start:end])

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def tell(self) -> int:
        return self.pos


class _Writer:
    """Collects written chunks; joined once at the end."""

    __slots__ = ("parts",)

    def __init__(self):
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(data)
        return len(data)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


Reader = _Reader
Writer = _Writer



# --- positional readers (used by compiled structs) ------------------------------
# Compiled structs keep ``buf``/``pos`` in locals and call these, which return
# ``(value, new_pos)``; bounds are checked so hostile lengths never over-read.

_I16_from = _I16.unpack_from
_I32_from = _I32.unpack_from


def rd_uvarint(buf, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtocolError("varint too long")


def _slice(buf, pos: int, n: int) -> bytes:
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"length {n} runs past the end of the message")
    return bytes(buf[pos:end])


def rd_string(buf, pos: int) -> tuple[str, int]:
    n = _I16_from(buf, pos)[0]
    if n < 0:
        raise ProtocolError("null in a non-nullable string")
    return _decode_utf8(_slice(buf, pos + 2, n)), pos + 2 + n


def rd_nstring(buf, pos: int) -> tuple[str | None, int]:
    n = _I16_from(buf, pos)[0]
    if n < 0:
        return None, pos + 2
    return _decode_utf8(_slice(buf, pos + 2, n)), pos + 2 + n


def rd_cstring(buf, pos: int) -> tuple[str, int]:
    n, pos = rd_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("null in a non-nullable compact string")
    return _decode_utf8(_slice(buf, pos, n - 1)), pos + n - 1


def rd_cnstring(buf, pos: int) -> tuple[str | None, int]:
    n, pos = rd_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return _decode_utf8(_slice(buf, pos, n - 1)), pos + n - 1


def rd_bytes(buf, pos: int) -> tuple[bytes, int]:
    n = _I32_from(buf, pos)[0]
    if n < 0:
        raise ProtocolError("null in non-nullable bytes")
    return _slice(buf, pos + 4, n), pos + 4 + n


def rd_nbytes(buf, pos: int) -> tuple[bytes | None, int]:
    n = _I32_from(buf, pos)[0]
    if n < 0:
        return None, pos + 4
    return _slice(buf, pos + 4, n), pos + 4 + n


def rd_cbytes(buf, pos: int) -> tuple[bytes, int]:
    n, pos = rd_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("null in non-nullable compact bytes")
    return _slice(buf, pos, n - 1), pos + n - 1


def rd_cnbytes(buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = rd_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return _slice(buf, pos, n - 1), pos + n - 1


def rd_uuid(buf, pos: int) -> tuple[uuid.UUID, int]:
    return uuid.UUID(bytes=_slice(buf, pos, 16)), pos + 16


def rd_varint(buf, pos: int) -> tuple[int, int]:
    v, pos = rd_uvarint(buf, pos)
    return zigzag_decode(v), pos


def rd_array_len(buf, pos: int, compact: bool, nullable: bool) -> tuple[int, int]:
    if compact:
        n, pos = rd_uvarint(buf, pos)
        n -= 1
    else:
        n = _I32_from(buf, pos)[0]
        pos += 4
    if n < 0:
        if not nullable:
            raise ProtocolError("null in a non-nullable array")
        return -1, pos
    if n > len(buf) - pos:  # every element takes at least one byte
        raise ProtocolError(f"array of {n} elements is longer than the message")
    return n, pos


# --- construct building blocks ------------------------------------------------

_MODULE = __name__


class Prim(Construct):
    """A Kafka primitive backed by a read/write function pair of this module."""

    def __init__(self, name: str, reader: str, writer: str, default: Any, fmt: str | None = None,
                 positional: str | None = None):
        super().__init__()
        self.kname = name
        self.reader = reader
        self.writer = writer
        self.kdefault = default
        self.fmt = fmt  # struct format char of fixed-width types: merged into one unpack
        self.positional = positional  # rd_* function of variable-width types
        self._r = globals()[reader]
        self._w = globals()[writer]

    def __repr__(self) -> str:
        return f"Prim({self.kname})"

    def _parse(self, stream, context, path):
        try:
            return self._r(stream)
        except ProtocolError as exc:
            raise StreamError(str(exc), path=path) from None

    def _build(self, obj, stream, context, path):
        return self._w(stream, obj)

    def _emitparse(self, code):
        code.append(f"from {_MODULE} import {self.reader}")
        return f"{self.reader}(io)"

    def _emitbuild(self, code):
        code.append(f"from {_MODULE} import {self.writer}")
        return f"{self.writer}(io, obj)"


INT8 = Prim("int8", "read_int8", "write_int8", 0, fmt="b")
INT16 = Prim("int16", "read_int16", "write_int16", 0, fmt="h")
UINT16 = Prim("uint16", "read_uint16", "write_uint16", 0, fmt="H")
INT32 = Prim("int32", "read_int32", "write_int32", 0, fmt="i")
UINT32 = Prim("uint32", "read_uint32", "write_uint32", 0, fmt="I")
INT64 = Prim("int64", "read_int64", "write_int64", 0, fmt="q")
FLOAT64 = Prim("float64", "read_float64", "write_float64", 0.0, fmt="d")
BOOL = Prim("bool", "read_bool", "write_bool", False, fmt="?")
UUID = Prim("uuid", "read_uuid", "write_uuid", ZERO_UUID, positional="rd_uuid")
UVARINT = Prim("uvarint", "read_uvarint", "write_uvarint", 0, positional="rd_uvarint")
VARINT = Prim("varint", "read_varint", "write_varint", 0, positional="rd_varint")
VARLONG = Prim("varlong", "read_varint", "write_varint", 0, positional="rd_varint")
STRING = Prim("string", "read_string", "write_string", "", positional="rd_string")
NULLABLE_STRING = Prim("nullable_string", "read_nstring", "write_nstring", None,
                       positional="rd_nstring")
COMPACT_STRING = Prim("compact_string", "read_cstring", "write_cstring", "", positional="rd_cstring")
COMPACT_NULLABLE_STRING = Prim("compact_nullable_string", "read_cnstring", "write_cnstring", None,
                               positional="rd_cnstring")
BYTES = Prim("bytes", "read_bytes", "write_bytes", b"", positional="rd_bytes")
NULLABLE_BYTES = Prim("nullable_bytes", "read_nbytes", "write_nbytes", None, positional="rd_nbytes")
COMPACT_BYTES = Prim("compact_bytes", "read_cbytes", "write_cbytes", b"", positional="rd_cbytes")
COMPACT_NULLABLE_BYTES = Prim("compact_nullable_bytes", "read_cnbytes", "write_cnbytes", None,
                              positional="rd_cnbytes")


class KArray(Construct):
    """Kafka array: int32 count (classic) or uvarint count+1 (compact)."""

    def __init__(self, item: Construct, compact: bool, nullable: bool):
        super().__init__()
        self.item = item
        self.compact = compact
        self.nullable = nullable

    def _parse(self, stream, context, path):
        n = read_array_len(stream, self.compact, self.nullable)
        if n < 0:
            return None
        return [self.item._parse(stream, context, path) for _ in range(n)]

    def _build(self, obj, stream, context, path):
        item = self.item
        return write_array(stream, obj, lambda io, v: item._build(v, io, context, path),
                           self.compact, self.nullable)

    def _emitparse(self, code):
        code.append(f"from {_MODULE} import rd_array_len")
        fname = f"parse_karray_{code.allocateId()}"
        item = self.item
        lines = [f"def {fname}(io):",
                 "    buf = io.buf",
                 f"    n, pos = rd_array_len(buf, io.pos, {self.compact}, {self.nullable})",
                 "    if n < 0:",
                 "        io.pos = pos",
                 "        return None"]
        if isinstance(item, Prim) and item.fmt:
            lines += [f"    st = struct.Struct('>%d{item.fmt}' % n)",
                      "    out = list(st.unpack_from(buf, pos))",
                      "    pos += st.size"]
        elif isinstance(item, Prim):
            code.append(f"from {_MODULE} import {item.positional}")
            lines += ["    out = [None] * n",
                      "    for i in range(n):",
                      f"        out[i], pos = {item.positional}(buf, pos)"]
        else:
            lines += ["    io.pos = pos",
                      f"    out = [{item._compileparse(code)} for _ in range(n)]",
                      "    pos = io.pos"]
        lines += ["    io.pos = pos", "    return out"]
        code.append("\n".join(lines))
        return f"{fname}(io)"

    def _emitbuild(self, code):
        code.append(f"from {_MODULE} import write_array")
        fname = f"build_karray_{code.allocateId()}"
        code.append(f"""
            def {fname}_item(io, obj):
                return {self.item._compilebuild(code)}
            def {fname}(obj, io):
                return write_array(io, obj, {fname}_item, {self.compact}, {self.nullable})
        """)
        return f"{fname}(obj, io)"



class KNullableStruct(Construct):
    """A nullable struct field (Kafka's ``nullableVersions`` on a struct): int8 -1 for null,
    1 followed by the struct otherwise (DescribeTopicPartitions' cursors)."""

    def __init__(self, item: Construct):
        super().__init__()
        self.item = item

    def _parse(self, stream, context, path):
        marker = read_int8(stream)
        if marker < 0:
            return None
        return self.item._parse(stream, context, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            write_int8(stream, -1)
            return None
        write_int8(stream, 1)
        return self.item._build(obj, stream, context, path)

    def _emitparse(self, code):
        code.append(f"from {_MODULE} import read_int8")
        fname = f"parse_knullstruct_{code.allocateId()}"
        code.append(f"""
            def {fname}(io):
                if read_int8(io) < 0:
                    return None
                return {self.item._compileparse(code)}
        """)
        return f"{fname}(io)"

    def _emitbuild(self, code):
        code.append(f"from {_MODULE} import write_int8")
        fname = f"build_knullstruct_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io):
                if obj is None:
                    write_int8(io, -1)
                    return None
                write_int8(io, 1)
                return {self.item._compilebuild(code)}
        """)
        return f"{fname}(obj, io)"

def _emit_parse_fields(code, items: list[tuple[str, Construct]]) -> list[str]:
    """Statements reading ``items`` (target, construct) with ``buf``/``pos`` in locals.

    Consecutive fixed-width fields become one ``struct.unpack_from``; strings
    and varints call positional readers; nested structs and arrays go through
    ``io`` (whose ``pos`` is synced around the call).
    """
    lines: list[str] = []
    run: list[tuple[str, str]] = []

    def flush() -> None:
        if not run:
            return
        sname = f"_ST_{code.allocateId()}"
        code.append(f"{sname} = struct.Struct({'>' + ''.join(f for _, f in run)!r})")
        lines.append(f"{', '.join(t for t, _ in run)}, = {sname}.unpack_from(buf, pos)")
        lines.append(f"pos += {sname}.size")
        run.clear()

    for target, sc in items:
        if isinstance(sc, Prim) and sc.fmt:
            run.append((target, sc.fmt))
            continue
        flush()
        if isinstance(sc, Prim):
            code.append(f"from {_MODULE} import {sc.positional}")
            lines.append(f"{target}, pos = {sc.positional}(buf, pos)")
        else:
            lines += ["io.pos = pos", f"{target} = {sc._compileparse(code)}", "pos = io.pos"]
    flush()
    return lines


class KStruct(Construct):
    """A Kafka struct: fields in order, then (flexible versions) tagged fields.

    ``fields`` are ``(name, construct, default)`` in wire order; ``tagged`` is
    ``None`` for non-flexible versions, else ``(tag, name, construct,
    default)`` tuples; ``absent`` are ``(name, default)`` of declared fields
    not on the wire in this version: parse fills them in so handlers never
    need to know which version carried a field.
    """

    def __init__(self, fields, tagged=None, absent=()):
        super().__init__()
        self.kfields = list(fields)
        self.tagged = None if tagged is None else sorted(tagged, key=lambda t: t[0])
        self.absent = list(absent)

    def _tag_parsers(self, context, path):
        return {tag: (name, lambda io, sc=sc: sc._parse(io, context, path))
                for tag, name, sc, _ in self.tagged}

    def _parse(self, stream, context, path):
        result = Container()
        for name, default in self.absent:
            result[name] = _fresh(default)
        for name, sc, _ in self.kfields:
            result[name] = sc._parse(stream, context, path)
        if self.tagged is not None:
            for _, name, _, default in self.tagged:
                result[name] = _fresh(default)
            read_tagged(stream, result, self._tag_parsers(context, path))
        return result

    def _build(self, obj, stream, context, path):
        for name, sc, default in self.kfields:
            value = obj.get(name, default)
            sc._build(_fresh(value) if value is default else value, stream, context, path)
        if self.tagged is not None:
            write_tagged(stream, obj, [
                (tag, name, (lambda io, v, sc=sc: sc._build(v, io, context, path)), default)
                for tag, name, sc, default in self.tagged])
        return obj

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_kstruct_{fid}"
        lines = [f"def {fname}(io):", "    buf = io.buf", "    pos = io.pos", "    r = Container()"]
        for name, default in self.absent:
            lines.append(f"    r[{name!r}] = {_literal(default)}")
        body = _emit_parse_fields(code, [(f"r[{name!r}]", sc) for name, sc, _ in self.kfields])
        lines += ["    " + line for line in body]
        if self.tagged is not None:
            code.append(f"from {_MODULE} import read_tagged")
            entries = []
            for tag, name, sc, default in self.tagged:
                lines.append(f"    r[{name!r}] = {_literal(default)}")
                entries.append(f"{tag}: ({name!r}, lambda io: {sc._compileparse(code)})")
            code.append(f"TAGS_P_{fid} = {{{', '.join(entries)}}}")
            # an empty tagged section (one zero byte) is by far the common case
            lines += ["    if buf[pos] == 0:", "        pos += 1", "    else:",
                      "        io.pos = pos", f"        read_tagged(io, r, TAGS_P_{fid})",
                      "        pos = io.pos"]
        lines += ["    io.pos = pos", "    return r"]
        code.append("\n".join(lines))
        return f"{fname}(io)"

    def _emitbuild(self, code):
        fid = code.allocateId()
        fname = f"build_kstruct_{fid}"
        code.append("_MISSING = object()")
        lines = [f"def {fname}(objdict, io):", "    get = objdict.get"]
        run: list[tuple[str, str]] = []

        def flush() -> None:
            if run:
                sname = f"_SB_{code.allocateId()}"
                code.append(f"{sname} = struct.Struct({'>' + ''.join(f for _, f in run)!r})")
                lines.append(f"    io.write({sname}.pack({', '.join(v for v, _ in run)}))")
                run.clear()

        for i, (name, sc, default) in enumerate(self.kfields):
            var = f"v{i}"
            lines.append(f"    {var} = get({name!r}, _MISSING)")
            lines.append(f"    if {var} is _MISSING: {var} = {_literal(default)}")
            if isinstance(sc, Prim) and sc.fmt:
                run.append((var, sc.fmt))
                continue
            flush()
            lines.append(f"    obj = {var}")
            lines.append(f"    {sc._compilebuild(code)}")
        flush()
        if self.tagged == []:
            lines.append("    io.write(b'\\x00')")
        elif self.tagged is not None:
            code.append(f"from {_MODULE} import write_tagged")
            entries = []
            for tag, name, sc, default in self.tagged:
                code.append(f"""
                    def tagb_{fid}_{tag}(io, obj):
                        return {sc._compilebuild(code)}
                """)
                entries.append(f"({tag}, {name!r}, tagb_{fid}_{tag}, {_literal(default)})")
            code.append(f"TAGS_B_{fid} = [{', '.join(entries)}]")
            lines.append(f"    write_tagged(io, objdict, TAGS_B_{fid})")
        lines.append("    return objdict")
        code.append("\n".join(lines))
        return f"{fname}(obj, io)"


def _fresh(value: Any) -> Any:
    """Defaults that are containers must not be shared between messages."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return Container(value)
    return value


def _literal(value: Any) -> str:
    """Source text that evaluates to a fresh copy of a default value."""
    if isinstance(value, uuid.UUID):
        return f"__import__('uuid').UUID(int={value.int})"
    if isinstance(value, dict):
        return "Container({" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in value.items()) + "})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)
