"""RecordBatch v2 decoded column-wise with numpy: many batches at once, no Python object per record.

:mod:`odradek.protocol.records` decodes a batch into ``Record`` objects,
which is what replay and compaction want.  A reader of millions of records
(the pipeline) wants columns instead, and per-record Python work is what it
cannot afford.  So here, for a buffer of batches:

- batch headers are gathered at their positions with numpy (big-endian
  views with a one-byte stride over the buffer: one fancy index per field),
  CRC-32C is checked per batch with ``crc32c`` and compressed batches are
  inflated with :mod:`odradek.protocol.compression`, as ``records`` does;
- the one sequential step is a tight loop over the record *length* varints
  that finds where each record starts;
- everything else is vectorized from those starts: every varint of every
  record is decoded by gathers and continuation masks (up to 9 bytes; longer
  ones are left to ``records``), and the checks of ``records`` are applied
  to whole columns (lengths odd but not null, fields that do not end where
  the record does, bytes left after the last record, sums that overflow).

What this module does not decode it does not guess at: a batch that fails a
check, or has something it does not cover (records with headers, varints
over 9 bytes), comes back with ``ok`` False, and the caller decodes that one
with :func:`odradek.protocol.records.decode_batch` -- which is also what
names the error.  Every batch with ``ok`` True yields exactly the offsets,
timestamps, keys and values ``decode_batch`` gives (property-tested).

:func:`fixed_layout` / :func:`read_fixed` do the same for a message
*declaration* (:mod:`odradek.protocol.schema`): where each fixed-width field
of one version sits when every string/bytes field is empty, and a gather of
those fields over many structs at once; structs of another shape are left
to the generated readers of :mod:`odradek.protocol.fastcodec`.

numpy is an optional dependency (the ``spark`` extra): the broker never
imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from odradek.protocol.compression import CompressionError, decompress
from odradek.protocol.fastcodec import UnsupportedDeclaration
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    decode_varint,
)
from odradek.protocol.schema import Message

from . import crc as crc32c

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min
MAX_VARINT_BYTES = 9  # 63 bits: longer (legal up to 10) varints go to records.decode_batch
_MIN_RECORD_SIZE = 7  # as records: a record takes at least 7 bytes


def be_view(buf: bytes, dtype: str) -> np.ndarray:
    """Every byte position of ``buf`` as the start of a big-endian ``dtype`` (``a[pos]`` gathers)."""
    dt = np.dtype(dtype).newbyteorder(">")
    n = len(buf) - dt.itemsize + 1
    if n <= 0:
        return np.zeros(0, dt)
    return np.ndarray((n,), dt, buffer=buf, strides=(1,))


def _gather(view: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``view[pos]`` in native byte order; positions past the end read the last element (callers check)."""
    if len(view) == 0:
        return np.zeros(len(pos), view.dtype.newbyteorder("="))
    return view[np.minimum(pos, len(view) - 1)].astype(view.dtype.newbyteorder("="), copy=False)


def varints(u8: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned varints at ``pos``: (raw values as uint64, sizes in bytes).

    A size above :data:`MAX_VARINT_BYTES` means "too long for this decoder"
    (its value is then meaningless).  Reads past the end of ``u8`` read its
    last byte: callers check that fields end where they should.
    """
    n = len(pos)
    size = np.ones(n, np.int64)
    if n == 0 or len(u8) == 0:
        return np.zeros(n, np.uint64), size
    last = len(u8) - 1
    b = u8[np.minimum(pos, last)]
    val = (b & 0x7F).astype(np.uint64)
    more = np.flatnonzero(b & 0x80)
    shift = 7
    while more.size:
        if shift >= 7 * MAX_VARINT_BYTES:
            size[more] = MAX_VARINT_BYTES + 1
            break
        b = u8[np.minimum(pos[more] + shift // 7, last)]
        val[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[(b & 0x80) != 0]
        shift += 7
    return val, size


def zigzag(raw: np.ndarray) -> np.ndarray:
    """Zig-zag decode raw uint64 varints (below 2**63) to int64."""
    half = (raw >> np.uint64(1)).astype(np.int64)
    return half ^ -(raw & np.uint64(1)).astype(np.int64)


def _add(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a + b`` in int64 and where the true sum does not fit (records computes with Python ints)."""
    over = ((b > 0) & (a > _INT64_MAX - np.maximum(b, 0))) | ((b < 0) & (a < _INT64_MIN - np.minimum(b, 0)))
    with np.errstate(over="ignore"):
        return a + b, over


@dataclass(eq=False)
class RecordColumns:
    """The batches at ``positions`` of one buffer, as columns.

    Per batch (header fields as read; ``ok`` False: decode that batch with
    ``records.decode_batch``, its records are not below).  Per record, for
    the ``ok`` batches only, in log order: ``batch`` indexes the per-batch
    arrays; ``offset`` and ``timestamp`` are absolute (LogAppendTime
    applied); keys and values are ``data[pos:pos + len]``, ``len`` -1 for
    null.
    """

    positions: np.ndarray
    ok: np.ndarray
    base_offset: np.ndarray
    last_offset: np.ndarray  # base offset + lastOffsetDelta
    attributes: np.ndarray
    producer_id: np.ndarray
    records_count: np.ndarray
    batch: np.ndarray
    offset: np.ndarray
    timestamp: np.ndarray
    key_pos: np.ndarray
    key_len: np.ndarray
    value_pos: np.ndarray
    value_len: np.ndarray
    data: bytes

    def __len__(self) -> int:
        return len(self.offset)

    def key(self, i: int) -> bytes | None:
        n = int(self.key_len[i])
        return None if n < 0 else self.data[int(self.key_pos[i]):int(self.key_pos[i]) + n]

    def value(self, i: int) -> bytes | None:
        n = int(self.value_len[i])
        return None if n < 0 else self.data[int(self.value_pos[i]):int(self.value_pos[i]) + n]


_VECTOR_MIN = 128  # batches still walking below which the Python loop is cheaper than numpy calls


def _find_records(data: bytes, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The sequential step: where each record's length varint is, for records regions ``[starts, ends)``.

    Sequential within a region, but regions (batches) are independent: the
    k-th records of all regions are found in one vectorized step while many
    regions still have records left, then a tight Python loop finishes the
    few long ones.  Returns the positions (by region, in order; only those of
    good regions are meaningful) and which regions their records tile exactly.
    """
    d8 = np.frombuffer(data, np.uint8)
    first = np.cumsum(counts) - counts
    out = np.zeros(int(counts.sum()), np.int64)
    p = starts.copy()
    left = counts.copy()
    bad = np.zeros(len(starts), bool)
    a = np.flatnonzero(left > 0)
    k = 0
    while len(a) >= _VECTOR_MIN:
        at = p[a]
        out[first[a] + k] = at
        raw, size = varints(d8, at)
        nxt = at + size + (raw >> np.uint64(1)).astype(np.int64)
        fine = ((raw & np.uint64(1)) == 0) & (size <= MAX_VARINT_BYTES) & (nxt <= ends[a])
        bad[a[~fine]] = True
        p[a] = nxt
        left[a] -= 1
        k += 1
        a = a[fine & (left[a] > 0)]
    for b in a.tolist():  # the Python loop: zig-zag lengths (odd ones are caught by decode_batches)
        q = int(p[b])
        found = []
        ap = found.append
        try:
            for _ in range(int(left[b])):
                ap(q)
                x = data[q]
                if x < 0x80:
                    q += 1 + (x >> 1)
                elif (y := data[q + 1]) < 0x80:
                    q += 2 + (((x & 0x7F) | (y << 7)) >> 1)
                else:
                    v, q = decode_varint(data, q)
                    if v > 0:
                        q += v
        except (IndexError, CorruptRecordError):
            bad[b] = True
            continue
        at = int(first[b] + counts[b] - left[b])
        out[at:at + len(found)] = found
        p[b] = q
    return out, ~bad & (p == ends)


def decode_batches(buf: bytes, positions: Sequence[int], *, verify_crc: bool = True) -> RecordColumns:
    """Decode the v2 batches starting at ``positions`` of ``buf`` (see :class:`RecordColumns`)."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    pos = np.asarray(positions, np.int64)
    blen = len(buf)
    whole = (pos >= 0) & (pos + HEADER_SIZE <= blen)
    hp = np.where(whole, pos, 0)
    i32 = be_view(buf, "i4")
    size = _gather(i32, hp + 8).astype(np.int64) + LOG_OVERHEAD
    magic = _gather(be_view(buf, "u1"), hp + 16)
    crc = _gather(be_view(buf, "u4"), hp + 17)
    attributes = _gather(be_view(buf, "i2"), hp + ATTRIBUTES_OFFSET)
    i64 = be_view(buf, "i8")
    base_offset = _gather(i64, hp)
    last_offset, over = _add(base_offset, _gather(i32, hp + 23).astype(np.int64))
    base_ts = _gather(i64, hp + 27)
    max_ts = _gather(i64, hp + 35)
    producer_id = _gather(i64, hp + 43)
    count = _gather(i32, hp + 57).astype(np.int64)
    ok = whole & (magic == 2) & (size >= HEADER_SIZE) & (pos + size <= blen) & (count >= 0) & ~over

    idx = np.flatnonzero(ok).tolist()
    starts = (pos + HEADER_SIZE).tolist()
    ends = (pos + size).tolist()
    if verify_crc:
        mv = memoryview(buf)
        crcs = crc.tolist()
        bad = [b for b in idx if crc32c.crc32c(mv[starts[b] - HEADER_SIZE + ATTRIBUTES_OFFSET:ends[b]]) != crcs[b]]
        if bad:
            ok[bad] = False
            idx = np.flatnonzero(ok).tolist()
    codecs = (attributes & COMPRESSION_MASK).tolist()
    data = buf
    if any(codecs[b] for b in idx):  # compressed batches: records regions joined into one buffer
        mv = memoryview(buf)
        pieces, regions, at = [], [], 0
        for b in idx:
            raw = mv[starts[b]:ends[b]]
            if codecs[b]:
                try:
                    raw = decompress(codecs[b], raw, magic=2)
                except CompressionError:
                    continue
            pieces.append(raw)
            regions.append((b, at, at + len(raw)))
            at += len(raw)
        data = b"".join(pieces)
        if regions:
            rb_ids, r_start, r_end = (np.array(c, np.int64) for c in zip(*regions, strict=True))
        else:
            rb_ids = r_start = r_end = np.zeros(0, np.int64)
    else:
        rb_ids = np.asarray(idx, np.int64)
        r_start, r_end = pos[rb_ids] + HEADER_SIZE, pos[rb_ids] + size[rb_ids]
    r_count = count[rb_ids]
    fits = r_count * _MIN_RECORD_SIZE <= r_end - r_start  # as records: refuse before looping
    rb_ids, r_start, r_end, r_count = rb_ids[fits], r_start[fits], r_end[fits], r_count[fits]
    rec_starts, tiled = _find_records(data, r_start, r_end, r_count)

    ok[:] = False
    ok[rb_ids[tiled]] = True
    rb = np.repeat(rb_ids, r_count)
    p = rec_starts
    if not tiled.all():
        keep = np.repeat(tiled, r_count)
        rb, p = rb[keep], p[keep]
    d8 = np.frombuffer(data, np.uint8)
    dlen = len(data)
    raw, s = varints(d8, p)
    bad = ((raw & np.uint64(1)) != 0) | (s > MAX_VARINT_BYTES)
    body = p + s
    rec_end = body + (raw >> np.uint64(1)).astype(np.int64)
    q = body + 1  # record attributes: unused
    raw, s = varints(d8, q)
    ts_delta = zigzag(raw)
    bad |= s > MAX_VARINT_BYTES
    q += s
    raw, s = varints(d8, q)
    offset_delta = zigzag(raw)
    bad |= s > MAX_VARINT_BYTES
    q += s
    lens = []
    for _field in ("key", "value"):
        raw, s = varints(d8, q)
        null = raw == 1
        n = (raw >> np.uint64(1)).astype(np.int64)
        bad |= (s > MAX_VARINT_BYTES) | (((raw & np.uint64(1)) != 0) & ~null) | (n > dlen)
        q += s
        n[null | bad] = -1  # bad ones: -1 too, so that a huge length cannot overflow the positions
        lens.append((q.copy(), n))
        q += np.maximum(n, 0)
    bad |= d8[np.minimum(q, dlen - 1)] != 0  # header count: records with headers go to records.decode_batch
    bad |= q + 1 != rec_end

    offset, over = _add(base_offset[rb], offset_delta)
    bad |= over
    timestamp, over = _add(base_ts[rb], ts_delta)
    log_append = (attributes[rb] & TIMESTAMP_TYPE_MASK) != 0
    bad |= over & ~log_append
    timestamp = np.where(log_append, max_ts[rb], timestamp)

    if bad.any():
        ok[np.unique(rb[bad])] = False
        keep = ok[rb]
        rb, offset, timestamp = rb[keep], offset[keep], timestamp[keep]
        lens = [(fp[keep], fn[keep]) for fp, fn in lens]
    (key_pos, key_len), (value_pos, value_len) = lens
    return RecordColumns(pos, ok, base_offset, last_offset, attributes, producer_id, count, rb, offset,
                         timestamp, key_pos, key_len, value_pos, value_len, data)


# --- fixed layouts of declared structs ----------------------------------------------

_FIXED_DTYPES = {"int8": "i1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
                 "int64": "i8", "float64": "f8", "bool": "?"}
_VAR_TYPES = {"string": "", "bytes": b""}


@dataclass(frozen=True)
class FixedLayout:
    """One version of a declared struct whose strings/bytes are all empty and that has no tagged fields.

    ``fields``: fixed-width fields present in the version -> (offset, dtype);
    ``constants``: every other field's value on this layout (empty strings
    and bytes, declared defaults of absent fields); ``expect``: (offset,
    byte) pairs that must hold (the empty length prefixes, the empty
    tagged-field section); ``size``: the struct's total size.
    """

    size: int
    fields: dict[str, tuple[int, str]]
    constants: dict[str, object]
    expect: tuple[tuple[int, int], ...]


def fixed_layout(message: Message, version: int) -> FixedLayout:
    """The :class:`FixedLayout` of ``message`` at ``version``, from its declaration.

    Arrays, nested structs, UUIDs, records and declared tagged fields raise
    ``UnsupportedDeclaration`` (no fixed layout to speak of).
    """
    if version not in message.valid:
        raise ValueError(f"{message.name} has no version {version}")
    flexible = message.is_flexible(version)
    at = 0
    fields: dict[str, tuple[int, str]] = {}
    constants: dict[str, object] = {}
    expect: list[tuple[int, int]] = []
    for f in message.fields:
        if version not in f.versions:
            constants[f.name] = f.default
            continue
        if f.fields is not None or f.is_array or version in f.tagged:
            raise UnsupportedDeclaration(f"{message.name}.{f.name}: no fixed layout")
        if f.type in _FIXED_DTYPES:
            fields[f.name] = (at, _FIXED_DTYPES[f.type])
            at += np.dtype(_FIXED_DTYPES[f.type]).itemsize
        elif f.type in _VAR_TYPES:
            constants[f.name] = _VAR_TYPES[f.type]
            if flexible and (f.flexible is None or version in f.flexible):
                expect.append((at, 1))  # compact length + 1
                at += 1
            else:
                width = 2 if f.type == "string" else 4
                expect.extend((at + i, 0) for i in range(width))
                at += width
        else:
            raise UnsupportedDeclaration(f"{message.name}.{f.name}: type {f.type} has no fixed layout")
    if flexible:
        expect.append((at, 0))  # no tagged fields
        at += 1
    return FixedLayout(at, fields, constants, tuple(expect))


def read_fixed(layout: FixedLayout, buf: bytes, pos: np.ndarray, length: np.ndarray
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Structs of ``length`` bytes at ``pos``: which have ``layout``, and their fixed fields.

    Returns the mask over ``pos`` and, for the structs where it is True (in
    order), one native-endian array per field of ``layout.fields``.  A struct
    of the right size whose length prefixes are not empty does not match.
    """
    match = length == layout.size
    if len(buf) == 0:
        match[:] = False
    if match.any() and layout.expect:
        u8 = np.frombuffer(buf, np.uint8)
        at = pos[match]
        sub = np.ones(len(at), bool)
        for off, byte in layout.expect:
            sub &= u8[np.minimum(at + off, len(u8) - 1)] == byte
        match[np.flatnonzero(match)[~sub]] = False
    at = pos[match]
    return match, {name: _gather(be_view(buf, dtype), at + off) for name, (off, dtype) in layout.fields.items()}
