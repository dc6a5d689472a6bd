"""Straight-line readers and writers generated from ``protocol.schema`` declarations.

Why this exists: replaying ``__consumer_offsets`` decodes every record
(budget: >= 500,000 records/s with everything else a load does), and the
construct-compiled structs of :mod:`odradek.protocol.schema` cost 2-4 µs per
OffsetCommitKey or OffsetCommitValue on the 2-core reference machine (a
function call and a stream read per field, plus a ``Container`` per struct).
Instead of hand-writing a second codec, this module reads the *same*
``Message``/``F`` declaration and emits specialised Python source for one
version:

- consecutive fixed-width fields, together with the length prefix of the
  variable-size field after them, become one precompiled ``struct`` call over
  the whole buffer (no stream object, no per-field calls);
- strings and bytes are sliced out of the buffer directly;
- results are stored straight into the ``__slots__`` of a dataclass instance
  made with ``object.__new__`` -- cheaper than calling ``__init__`` (keyword
  arguments, and frozen dataclasses' ``object.__setattr__``, cost as much as
  the rest of the decode), and it lets the dataclasses keep a keyword-only,
  safe-to-call constructor.  Frozen dataclasses are filled through their
  slot descriptors.

The generated code is checked against the declaration when it is built (the
dataclass must have exactly the declared fields, with the declared defaults)
and against ``Message.parse``/``Message.build`` by property tests, byte for
byte, for every version.  Scope is what the storage records and consumer
protocol blobs need: fixed-width numbers and bools, uuids, (nullable) strings and
bytes, arrays of those and of structs, classic and compact encodings, and
tagged-field sections with no declared tagged fields (unknown tags are
skipped, as Kafka does).  Anything else raises ``UnsupportedDeclaration`` at
generation time, so a declaration can never be silently decoded differently.

Malformed input raises :class:`odradek.protocol.primitives.ProtocolError`
(truncation, bad lengths, null in a non-nullable field, invalid UTF-8);
bytes after the struct are left to the caller (the reader returns the end
position).
"""

from __future__ import annotations

import dataclasses
import keyword
import re
import struct
import uuid
from collections.abc import Callable, Container, Mapping
from typing import Any

from construct import Container as Parsed  # what the schema layer parses structs into

from odradek.protocol.declaration import Declaration, F
from odradek.protocol.primitives import MAX_ARRAY, ZERO_UUID, ProtocolError, encode_uvarint


class DefaultTail(Parsed):
    """A message read whose *default tail* matched (``_default_tail``): every field from the tail's
    first on is at its declared default.  A ``Container`` like any other read; a handler may test
    ``type(request) is DefaultTail`` instead of comparing those fields one by one (the steady
    ConsumerGroupHeartbeat does, on every poll)."""

    __slots__ = ()


class UnsupportedDeclaration(ValueError):
    """A declaration uses a feature the generated fast path does not cover (use the schema layer)."""

# type -> (struct format char, size)
_FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
    "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8), "bool": ("?", 1),
}
_VAR = ("string", "bytes", "records")  # records: opaque, always-nullable bytes (schema layer too)
_UV1 = tuple(encode_uvarint(i) for i in range(128))  # the one-byte unsigned varints
_UUID = ("16s", 16)  # a uuid field: 16 bytes in the fixed-width run, a ``uuid.UUID`` in Python

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[Any], bytes]


def _uvarint(buf: bytes, pos: int, blen: int) -> tuple[int, int]:
    """Unsigned LEB128 varint at ``pos`` (same limits as primitives.read_uvarint)."""
    result = 0
    shift = 0
    while True:
        if pos >= blen:
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtocolError("varint too long")


def _skip_tags(buf: bytes, pos: int, blen: int) -> int:
    """Skip a tagged-field section; every tag is unknown to these declarations."""
    count, pos = _uvarint(buf, pos, blen)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos, blen)
        size, pos = _uvarint(buf, pos, blen)
        pos += size
        if pos > blen:
            raise ProtocolError("truncated tagged field")
    return pos


def _kind(type_: str) -> str:
    """How a variable-size type is encoded: records travel as bytes."""
    return "bytes" if type_ == "records" else type_


def _records(buf: Any, start: int, end: int) -> bytes | memoryview:
    """A records field: a view, not a copy, of a frame received into a buffer of its own (a big
    Produce), so the broker holds one copy of it; a slice of an ordinary ``bytes`` frame."""
    return buf[start:end] if type(buf) is bytes else memoryview(buf)[start:end]


def _bytes(buf: Any, start: int, end: int) -> bytes:
    """A bytes field, ``bytes`` whichever buffer the frame is in (a big one is a mapping)."""
    return buf[start:end] if type(buf) is bytes else bytes(memoryview(buf)[start:end])


def _short(what: str) -> ProtocolError:
    return ProtocolError(f"truncated {what}")


def _null(what: str) -> ProtocolError:
    return ProtocolError(f"null in non-nullable {what}")


class _Plan:
    """The per-version view of one field, mirroring ``schema._build_struct``."""

    __slots__ = ("f", "present", "compact", "nullable")

    def __init__(self, f: F, version: int, flexible: bool, writer: bool = False):
        self.f = f
        self.present = version in f.versions
        self.compact = flexible and (f.flexible is None or version in f.flexible)
        self.nullable = version in f.nullable or f.elem_type == "records"
        if not self.present:
            return  # absent fields take their default; their type does not matter here
        if version in f.tagged:
            raise UnsupportedDeclaration(f"{f.name}: declared tagged fields are not supported")
        if f.fields is None and f.elem_type not in _FIXED and f.elem_type not in _VAR and \
                (f.type != "uuid" or self.nullable):
            raise UnsupportedDeclaration(f"{f.name}: type {f.type} is not supported")
        if f.fields is not None and not f.is_array and not (writer and self.nullable and f.default is None):
            raise UnsupportedDeclaration(f"{f.name}: nested structs outside arrays are not supported")
        if not isinstance(f.default, int | float | str | bytes | list | uuid.UUID | None):
            raise UnsupportedDeclaration(f"{f.name}: default {f.default!r} has no literal form")
        if f.fields is None and not f.is_array and f.type in _FIXED and self.nullable:
            raise ValueError(f"{f.name}: {f.type} cannot be nullable")


def _check_class(cls: type, fields: list[F], where: str, extra: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """The dataclass must mirror the declaration: same names, same defaults.

    ``extra`` names fields that are not on the wire (e.g. the version of a
    blob, read before the struct); they need a plain default, which is
    returned as ``(name, source literal)`` for the reader to fill in.
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{where}: {cls!r} must be a dataclass with slots=True")
    declared = {f.name: f for f in fields}
    have = {fl.name: fl for fl in dataclasses.fields(cls)}
    extras = []
    for name in extra:
        fl = have.pop(name, None)
        if fl is None or fl.default is dataclasses.MISSING or name in declared:
            raise TypeError(f"{where}: extra field {name!r} must be an undeclared field with a default")
        extras.append((name, repr(fl.default)))
    if set(declared) != set(have):
        raise TypeError(f"{where}: {cls.__name__} fields {sorted(have)} != declared {sorted(declared)}")
    for name, fl in have.items():
        if fl.default is not dataclasses.MISSING:
            default = fl.default
        elif fl.default_factory is not dataclasses.MISSING:
            default = fl.default_factory()
        else:
            continue
        if default != declared[name].default:
            raise TypeError(f"{where}: {cls.__name__}.{name} default {default!r} != "
                            f"declared {declared[name].default!r}")
    return extras


class _Gen:
    """Accumulates generated functions and the globals they refer to."""

    def __init__(self, message: Declaration, version: int):
        self.message = message
        self.version = version
        self.flexible = message.is_flexible(version)
        self.chunks: list[str] = []
        self.ns: dict[str, Any] = {
            "_new": object.__new__, "_uvarint": _uvarint, "_skip_tags": _skip_tags,
            "_short": _short, "_null": _null, "_records": _records, "_bytes": _bytes, "ProtocolError": ProtocolError,
            "_struct_error": struct.error, "_uv": encode_uvarint, "_unpack_from": struct.unpack_from,
            "_pack": struct.pack, "MAX_ARRAY": MAX_ARRAY, "_Encoded": EncodedArray,
            "_UUID": uuid.UUID, "_ZU": ZERO_UUID, "_UV1": _UV1,
        }
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def bind(self, value: Any, prefix: str) -> str:
        name = self.name(prefix)
        self.ns[name] = value
        return name

    def finish(self, entry: str) -> Any:
        source = "\n\n".join(self.chunks)
        code = compile(source, f"<fastcodec {self.message.name} v{self.version}>", "exec")
        exec(code, self.ns)  # noqa: S102 - source generated from a declaration above
        fn = self.ns[entry]
        fn.source = source
        return fn


def _min_size(plans: list[_Plan], flexible: bool) -> int:
    """Fewest bytes one struct can occupy (bounds element counts before looping)."""
    size = 1 if flexible else 0
    for pl in plans:
        if not pl.present:
            continue
        f = pl.f
        if f.fields is None and not f.is_array and f.type in _FIXED:
            size += _FIXED[f.type][1]
        elif f.type == "uuid":
            size += _UUID[1]
        elif pl.compact:
            size += 1
        else:
            size += 2 if (f.type == "string") else 4
    return size


# --- readers --------------------------------------------------------------------

def _default_encoding(pl: _Plan) -> bytes | None:
    """The bytes of ``pl``'s field holding its declared default, if that default is an immutable
    value read back as itself (null, a number); None otherwise."""
    f = pl.f
    if not f.declared_default:
        return None
    if f.default is None and pl.nullable and not (f.fields is None and not f.is_array and f.type == "uuid"):
        if pl.compact:
            return b"\x00"  # a compact null: length 0
        return b"\xff\xff" if f.fields is None and not f.is_array and f.type == "string" else b"\xff\xff\xff\xff"
    if f.fields is None and not f.is_array and f.type in _FIXED and isinstance(f.default, int | float):
        return struct.pack(">" + _FIXED[f.type][0], f.default)
    return None


def _default_tail(plans: list[_Plan], flexible: bool) -> tuple[int, bytes]:
    """The longest run of fields ending a message that all declare a default of null or a number, as
    (index of its first field, its bytes with every field at its default and no tagged field);
    ``(len(plans), b"")`` when fewer than two fields on the wire end that way.

    Why: requests repeated in a steady state leave such fields at their defaults (a steady
    ConsumerGroupHeartbeat: no rack, rebalance timeout, subscription, assignor or owned partitions),
    and one comparison of their bytes replaces a branch per field.  Any other bytes are read
    field by field, exactly as without the check."""
    start, encoded, count = len(plans), b"", 0
    for i in range(len(plans) - 1, -1, -1):
        pl = plans[i]
        if not pl.present:
            start = i
            continue
        enc = _default_encoding(pl)
        if enc is None:
            break
        start, encoded, count = i, enc + encoded, count + 1
    if count < 2:
        return len(plans), b""
    return start, encoded + (b"\x00" if flexible else b"")


def _gen_reader(g: _Gen, fields: list[F], cls: type | None, nested: Mapping[str, type] | None,
                top: bool, where: str, extra: tuple[str, ...] = ()) -> str | list[str]:
    """``cls`` None: mapping mode, every struct becomes a construct ``Container``.

    The top struct is a function (its name returned); a nested one (an array's element) is the
    lines that read it into ``it``, inlined in its array's loop: no call per element.
    """
    # (attribute, source expression)
    assigns = [] if cls is None else _check_class(cls, fields, where, extra)
    plans = [_Plan(f, g.version, g.flexible) for f in fields]
    fname = g.name("read_")
    clsname = g.bind(Parsed if cls is None else cls, "C")
    body: list[str] = []
    run: list[tuple[str, str]] = []  # pending fixed-width (format char, variable)

    def flush() -> None:
        if not run:
            return
        fmt = ">" + "".join(c for c, _ in run)
        unpack = g.bind(struct.Struct(fmt).unpack_from, "U")
        targets = ", ".join(v for _, v in run) + ","
        body.append(f"{targets} = {unpack}(buf, pos)")
        body.append(f"pos += {struct.calcsize(fmt)}")
        # a uuid's 16 bytes were read in the run; the declared type is a uuid.UUID
        body.extend(f"{v} = _UUID(bytes={v})" for c, v in run if c == _UUID[0])
        run.clear()

    def length(var: str, compact: bool, prefix: str) -> None:
        """Read a length/count into ``var`` (-1 = null) after the pending run."""
        if compact:
            flush()
            # lengths below 127 are one byte: no call (IndexError past the end is truncation)
            body.extend([f"{var} = buf[pos] - 1", f"if {var} < 127:", "    pos += 1", "else:",
                         f"    {var}, pos = _uvarint(buf, pos, blen)", f"    {var} -= 1"])
        else:
            run.append((prefix, var))
            flush()

    def read_var(var: str, kind: str, pl: _Plan, what: str, indent: str = "") -> None:
        """A string or bytes field (or array element) into ``var``."""
        n = g.name("n")
        length(n, pl.compact, "h" if kind == "string" else "i")
        # empty strings are common (offset metadata): skip the slice and decode
        if kind == "bytes":
            slice_ = f"{'_records' if pl.f.elem_type == 'records' else '_bytes'}(buf, pos, {n})"
        else:
            slice_ = f"buf[pos:{n}].decode() if {n} != pos else ''"
        if pl.nullable:
            body.extend([f"if {n} < 0:", f"    {var} = None", "else:",
                         f"    {n} += pos",
                         f"    if {n} > blen: raise _short({what!r})",
                         f"    {var} = {slice_}",
                         f"    pos = {n}"])
        else:
            body.extend([f"if {n} < 0: raise _null({what!r})",
                         f"{n} += pos",
                         f"if {n} > blen: raise _short({what!r})",
                         f"{var} = {slice_}",
                         f"pos = {n}"])

    tail_from, tail = _default_tail(plans, g.flexible) if top and cls is None else (len(plans), b"")
    split = -1  # where the reading of the default tail's fields begins in ``body``
    for i, pl in enumerate(plans):
        f = pl.f
        if i == tail_from:
            flush()
            split = len(body)
        if not pl.present:
            # a literal where there is one (lists are then fresh per call), else the shared default
            literal = isinstance(f.default, int | float | str | bytes | list | None)
            assigns.append((f.name, repr(f.default) if literal else g.bind(f.default, "D")))
            continue
        var = g.name("v")
        assigns.append((f.name, var))
        what = f"{where}.{f.name}"
        if f.fields is None and not f.is_array:
            if f.type in _FIXED:
                run.append((_FIXED[f.type][0], var))
            elif f.type == "uuid":
                run.append((_UUID[0], var))
            else:
                read_var(var, _kind(f.type), pl, what)
            continue
        # arrays
        n = g.name("n")
        length(n, pl.compact, "i")
        if f.fields is not None:
            sub_cls = None if nested is None else nested.get(f.name)
            if sub_cls is None and nested is not None:
                raise TypeError(f"{what}: no dataclass given for struct elements")
            sub_plans = [_Plan(sf, g.version, g.flexible) for sf in f.fields]
            minsize = _min_size(sub_plans, g.flexible)
            sub = _gen_reader(g, f.fields, sub_cls, nested, False, what)
            loop = [f"for _ in range({n}):", *("    " + line for line in sub), f"    {var}.append(it)"]
        elif f.elem_type in _FIXED:
            c, minsize = _FIXED[f.elem_type]
            loop = [f"{var} = list(_unpack_from('>%d{c}' % {n}, buf, pos))", f"pos += {minsize} * {n}"]
        else:
            minsize = 1 if pl.compact else (2 if f.elem_type == "string" else 4)
            saved, body = body, []
            read_var("it", f.elem_type, _Plan(type(f)("x", f.elem_type), g.version, g.flexible), what + "[]")
            loop = [f"for _ in range({n}):", *("    " + line for line in body), f"    {var}.append(it)"]
            body = saved
        guard = [f"if {n} > MAX_ARRAY or {n} * {max(minsize, 1)} > blen - pos: raise _short({what!r})",
                 f"{var} = []"]
        if pl.nullable:
            body.extend([f"if {n} < 0:", f"    {var} = None", "else:",
                         *("    " + line for line in guard + loop)])
        else:
            body.append(f"if {n} < 0: raise _null({what!r})")
            body.extend(guard + loop)
    flush()
    if g.flexible:  # almost always an empty tagged-field section: one zero byte
        body.extend(["if buf[pos] == 0:", "    pos += 1", "else:", "    pos = _skip_tags(buf, pos, blen)"])
    if split >= 0:  # the tail's bytes as its defaults encode them: its fields are those defaults
        rest = body[split:]
        body[split:] = [f"if buf[pos:pos + {len(tail)}] == {g.bind(tail, 'T')}:", f"    pos += {len(tail)}",
                        *("    " + line for line in _from_template(g, plans, tail_from, dict(assigns), clsname)),
                        "else:", *("    " + line for line in rest)]
    if cls is None:
        if not all(name.isidentifier() and not keyword.iskeyword(name) for name, _ in assigns):
            raise UnsupportedDeclaration(f"{where}: a field name is not a Python identifier")
        # an empty Container filled key by key costs about 3/4 of one built from keywords
        body.append(f"o = {clsname}()")
        body.extend(f"o[{n!r}] = {v}" for n, v in assigns)
        body.append("return o, pos")
    else:
        body.append(f"o = _new({clsname})")
        if cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            # a frozen dataclass refuses attribute assignment; its slot descriptors do not
            body.extend(f"{g.bind(cls.__dict__[name].__set__, 'S')}(o, {value})" for name, value in assigns)
        else:
            body.extend(f"o.{name} = {value}" for name, value in assigns)
        body.append("return o, pos")

    if top:
        lines = [f"def {fname}(buf, pos):", "    blen = len(buf)", "    try:"]
        lines += ["        " + line for line in body]
        lines += ["    except (_struct_error, IndexError) as exc:",
                  f"        raise ProtocolError('truncated {where}: %s' % exc) from None",
                  "    except UnicodeDecodeError as exc:",
                  f"        raise ProtocolError('invalid UTF-8 in {where}: %s' % exc) from None"]
    else:  # inlined where its array reads it; names made by ``g`` are unique, ``o`` is set last
        assert body[-1] == "return o, pos"
        return [*body[:-1], "it = o"]
    g.chunks.append("\n".join(lines))
    return fname


def _from_template(g: _Gen, plans: list[_Plan], tail_from: int, values: dict[str, str], clsname: str) -> list[str]:
    """The message read up to its default tail, as a ``Container``: a copy of one holding every
    field's default (key order as declared), then the fields read before the tail.  Copying a
    ten-key dict and setting three costs about what building a four-key one does."""
    template: dict[str, Any] = {}
    lines = [f"o = {clsname}({{}})"]
    for i, pl in enumerate(plans):
        name = pl.f.name
        fresh = (i < tail_from and pl.present) or isinstance(pl.f.default, list)  # read, or a fresh list
        template[name] = None if fresh else pl.f.default
        if fresh:
            lines.append(f"o[{name!r}] = {values[name]}")
    lines[0] = f"o = {g.bind(DefaultTail, 'DT')}({g.bind(template, 'TM')})"
    return [*lines, "return o, pos"]


def compile_reader(message: Declaration, version: int, cls: type | None,
                   nested: Mapping[str, type] | None = None, extra: tuple[str, ...] = ()) -> Reader:
    """``read(buf: bytes, pos) -> (obj, end)`` for ``message`` at ``version``.

    ``cls`` is the dataclass for the top-level struct, ``nested`` maps the
    name of each array-of-struct field to its element dataclass, ``extra``
    names top-level dataclass fields that are not declared (set to their
    defaults; the caller fills them in).  ``cls`` None reads every struct
    into a construct ``Container``, as the schema layer does.  ``buf`` must be ``bytes`` (slices of
    it become the decoded bytes fields).
    """
    if version not in message.valid:
        raise ValueError(f"{message.name} has no version {version}")
    g = _Gen(message, version)
    entry = _gen_reader(g, message.fields, cls, None if cls is None else (nested or {}), True,
                        message.name, extra)
    return g.finish(entry)


# --- writers --------------------------------------------------------------------

class EncodedArray:
    """An array of structs already encoded, given in place of the list in a mapping writer's input.

    ``count`` elements whose bytes are ``data``, as the generated row writer
    (:func:`compile_row_writer`) of that array's struct wrote them: a
    response of 10,000 partitions is written row by row from the values it
    reports, with no dict per partition.  ``rows``: more elements, as mappings,
    written after ``data`` (what is added to an answer already written, such
    as a fault rule's per-partition errors: ``partition_errors.merge``).
    """

    __slots__ = ("count", "data", "rows")

    def __init__(self, count: int, data: bytes, rows: tuple | list = ()) -> None:
        self.count = count
        self.data = data
        self.rows = rows

    def extended(self, rows: list) -> EncodedArray:
        """The same array with ``rows`` (mappings) appended."""
        return EncodedArray(self.count, self.data, [*self.rows, *rows])


def _gen_writer(g: _Gen, fields: list[F], nested: Mapping[str, type], where: str,
                prefix: int | None, mapping: bool = False, positional: bool = False) -> str:
    """``mapping``: read fields with ``o.get(name, default)`` (dicts), else as attributes;
    ``positional``: the fields are the function's own arguments, in declared order (a row
    writer: ``write(ap, *fields)``)."""
    plans = [_Plan(f, g.version, g.flexible, writer=True) for f in fields]
    fname = g.name("write_")
    body: list[str] = []
    run: list[tuple[str, str]] = [] if prefix is None else [("h", str(prefix))]

    def flush() -> None:
        if not run:
            return
        fmt = ">" + "".join(c for c, _ in run)
        pack = g.bind(struct.Struct(fmt).pack, "P")
        body.append(f"ap({pack}({', '.join(e for _, e in run)}))")
        run.clear()

    def length(expr: str, compact: bool, prefix_char: str) -> None:
        if compact:  # a length below 127 is one byte: from a table, no call
            flush()
            u = g.name("u")
            body.append(f"{u} = {expr} + 1")
            body.append(f"ap(_UV1[{u}] if {u} < 128 else _uv({u}))")
        else:
            run.append((prefix_char, expr))
            flush()

    def write_var(src: str, kind: str, pl: _Plan, what: str) -> None:
        """Emit a string/bytes value held in ``src`` (a local)."""
        b, n = g.name("b"), g.name("n")
        enc = f"{src}.encode()" if kind == "string" else src
        limit = 0x7FFF if kind == "string" and not pl.compact else None
        check = [f"if {n} > {limit}: raise ProtocolError('{what}: string longer than 32767 bytes')"] \
            if limit else []
        if pl.nullable:
            body.extend([f"if {src} is None:", f"    {b} = b''", f"    {n} = -1", "else:",
                         f"    {b} = {enc}", f"    {n} = len({b})", *("    " + c for c in check)])
        else:
            body.extend([f"if {src} is None: raise _null({what!r})",
                         f"{b} = {enc}", f"{n} = len({b})", *check])
        length(n, pl.compact, "h" if kind == "string" else "i")
        body.append(f"ap({b})")

    def get(f: F) -> str:
        if positional:
            return f"a_{f.name}"
        default = "None" if f.type == "uuid" else repr(f.default)
        return f"o.get({f.name!r}, {default})" if mapping else f"o.{f.name}"

    for pl in plans:
        f = pl.f
        if not pl.present:
            continue  # every such field is ignorable in the records we declare
        what = f"{where}.{f.name}"
        if f.fields is not None and not f.is_array:  # a nullable struct: int8 -1 (null) or 1, then it
            if positional:
                raise UnsupportedDeclaration(f"{what}: a row writer's struct has no nested structs")
            flush()
            src = g.name("s")
            sub = _gen_writer(g, f.fields, nested, what, None, mapping)
            body.extend([f"{src} = {get(f)}", f"if {src} is None:", "    ap(b'\\xff')", "else:",
                         "    ap(b'\\x01')", f"    {sub}({src}, ap)"])
            continue
        if f.fields is None and not f.is_array:
            if f.type in _FIXED:
                run.append((_FIXED[f.type][0], get(f)))
            elif f.type == "uuid":  # None is the zero uuid, as the schema layer writes it
                run.append((_UUID[0], f"({get(f)} or _ZU).bytes"))
            else:
                src = g.name("s")
                body.append(f"{src} = {get(f)}")
                write_var(src, _kind(f.type), pl, what)
            continue
        if positional:
            raise UnsupportedDeclaration(f"{what}: a row writer's struct has no arrays")
        src, n = g.name("s"), g.name("n")
        body.append(f"{src} = {get(f)}")
        encoded = mapping and f.fields is not None
        sub = _gen_writer(g, f.fields, nested, what, None, mapping) if f.fields is not None else ""
        if encoded:  # an EncodedArray in place of the list: its count, its bytes as they are, its rows
            flush()
            saved, body = body, []
            length(f"{src}.count + len({src}.rows)", pl.compact, "i")
            body.append(f"ap({src}.data)")
            body.append(f"for it in {src}.rows:")
            body.append(f"    {sub}(it, ap)")
            saved.append(f"if type({src}) is _Encoded:")
            saved.extend("    " + line for line in body)
            saved.append("else:")
            body, outer = [], saved
        if pl.nullable:
            body.append(f"{n} = -1 if {src} is None else len({src})")
        else:
            body.append(f"if {src} is None: raise _null({what!r})")
            body.append(f"{n} = len({src})")
        length(n, pl.compact, "i")
        if f.fields is not None:
            loop = [f"for it in {src}:", f"    {sub}(it, ap)"]
        elif f.elem_type in _FIXED:
            c = _FIXED[f.elem_type][0]
            loop = [f"ap(_pack('>%d{c}' % {n}, *{src}))"]
        else:
            saved, body = body, []
            write_var("it", f.elem_type, _Plan(type(f)("x", f.elem_type), g.version, g.flexible), what + "[]")
            loop = [f"for it in {src}:", *("    " + line for line in body)]
            body = saved
        if pl.nullable:
            body.append(f"if {src} is not None:")
            body.extend("    " + line for line in loop)
        else:
            body.extend(loop)
        if encoded:
            outer.extend("    " + line for line in body)
            body = outer
    flush()
    if g.flexible:
        body.append("ap(b'\\x00')")  # no tagged fields
    args = "ap, " + ", ".join(f"a_{pl.f.name}" for pl in plans) if positional else "o, ap"
    lines = [f"def {fname}({args}):"] + ["    " + line for line in (body or ["pass"])]
    g.chunks.append("\n".join(lines))
    return fname


def compile_writer(message: Declaration, version: int, prefix: int | None = None,
                   nested: Mapping[str, type] | None = None, mapping: bool = False) -> Writer:
    """``write(obj) -> bytes`` for ``message`` at ``version``, from attributes of ``obj``.

    ``prefix`` (if given) is written first as an int16 -- the key type or
    value version that precedes every ``__consumer_offsets`` key and value.
    Fields absent from ``version`` are dropped (all of them are ignorable in
    the declarations this is used for).  Integers out of range raise
    ``struct.error``.  ``mapping``: ``obj`` is a dict (nested structs too)
    whose missing keys take the declared defaults, as the schema layer's
    builder does.
    """
    if version not in message.valid:
        raise ValueError(f"{message.name} has no version {version}")
    g = _Gen(message, version)
    _gen_writer(g, message.fields, nested or {}, message.name, prefix, mapping)
    # the top-level struct's writer (generated last, after its arrays' element writers) becomes
    # the entry's own body: one call per message instead of two
    body = g.chunks.pop().split("\n", 1)[1]
    entry = g.name("encode_")
    pieces = _named_pieces(body)
    if pieces is None:
        g.chunks.append(f"def {entry}(o):\n    parts = []\n    ap = parts.append\n{body}\n"
                        f"    return b''.join(parts)")
    else:
        g.chunks.append(f"def {entry}(o):\n{pieces[0]}\n    return {pieces[1]}")
    return g.finish(entry)


_AP = re.compile(r"\bap\b")


def _named_pieces(body: str) -> tuple[str, str] | None:
    """A flat struct's writer body (every piece appended at the top level, no loop or branch
    appending: an offsets-topic value, a row) as (the body naming its pieces, the expression
    joining them as one tuple) -- about a fifth cheaper than appending each piece to a list;
    None for any other body."""
    lines = body.split("\n")
    if not all(line.startswith("    ap(") or not _AP.search(line) for line in lines):
        return None
    pieces = []
    for i, line in enumerate(lines):
        if line.startswith("    ap("):
            pieces.append(f"c{len(pieces)}_")
            lines[i] = f"    {pieces[-1]} = {line[len('    ap('):-1]}"
    return "\n".join(lines), (f"b''.join(({', '.join(pieces)},))" if pieces else "b''")


def _row_fields(message: Declaration, version: int, path: tuple[str, ...]) -> tuple[list[F], str]:
    """The fields of the array of structs at ``path`` (names from the message's top), and its name."""
    if version not in message.valid:
        raise ValueError(f"{message.name} has no version {version}")
    fields, where = message.fields, message.name
    for name in path:
        matches = [f for f in fields if f.name == name and version in f.versions and f.fields is not None]
        if not matches:
            raise ValueError(f"{where} has no array of structs {name!r} in version {version}")
        fields, where = matches[0].fields, f"{where}.{name}"
    return fields, where


def compile_row_writer(message: Declaration, version: int, path: tuple[str, ...]) -> Callable[..., None]:
    """``write(ap, *fields)``: one element of the array of structs at ``path`` (field names from
    the message's top), appended through ``ap`` exactly as the mapping writer writes it.

    ``fields`` are every field the struct declares, in declared order, those
    absent from ``version`` included (and ignored).  What is written this
    way goes into the message as an :class:`EncodedArray`.
    """
    fields, where = _row_fields(message, version, path)
    g = _Gen(message, version)
    fname = _gen_writer(g, fields, {}, where, None, positional=True)
    head, body = g.chunks[-1].split("\n", 1)
    pieces = _named_pieces(body)
    if pieces is not None:  # one append per row
        g.chunks[-1] = f"{head}\n{pieces[0]}\n    ap({pieces[1]})"
    return g.finish(fname)


class FixedRows:
    """``rows(n)(*values)``: ``n`` elements of an array of fixed-width structs in one ``struct`` pack,
    ``values`` every element's present fields in declared order, one element after the other --
    what :func:`compile_row_writer`'s writer appends row by row, without a call per row.

    For arrays whose rows have only fixed-width fields (plus, in flexible versions, their empty
    tagged-field section, a zero byte): an answer of a hundred partitions' errors then costs a
    ``zip`` and one pack.  ``fields``: the present fields' names, in the order ``values`` gives them.
    """

    __slots__ = ("fields", "_row", "_packs")

    def __init__(self, fields: tuple[str, ...], row: str) -> None:
        self.fields = fields
        self._row = row
        self._packs: dict[int, Callable[..., bytes]] = {}

    def __call__(self, n: int) -> Callable[..., bytes]:
        pack = self._packs.get(n)
        if pack is None:
            pack = struct.Struct(">" + self._row * n).pack
            if n <= 1024 and len(self._packs) < 128:  # the few sizes a client's requests have
                self._packs[n] = pack
        return pack


def compile_fixed_rows(message: Declaration, version: int, path: tuple[str, ...]) -> FixedRows | None:
    """The :class:`FixedRows` of the array of structs at ``path`` (as :func:`compile_row_writer`
    finds it); None if a present field of its rows is not fixed-width."""
    fields, _where = _row_fields(message, version, path)
    present = [f for f in fields if version in f.versions]
    if not all(f.fields is None and not f.is_array and f.type in _FIXED and version not in f.tagged
               for f in present):
        return None
    flexible = message.is_flexible(version)
    row = "".join(_FIXED[f.type][0] for f in present) + ("x" if flexible else "")
    return FixedRows(tuple(f.name for f in present), row)


class CodecCache(dict):
    """version -> generated codec, generated on first use and kept.

    Start-up pays only for the versions a log actually contains (DESIGN:
    compile lazily).  A version outside ``valid`` raises ``KeyError``.  Two
    threads racing on a miss both generate the same function; harmless.
    """

    def __init__(self, factory: Callable[[int], Any], valid: Container[int]):
        super().__init__()
        self._factory = factory
        self._valid = valid

    def __missing__(self, version: int) -> Any:
        if version not in self._valid:
            raise KeyError(version)
        codec = self[version] = self._factory(version)
        return codec
