"""Column-wise record decoding (odradek.protocol.columnar) against the row decoder it must equal.

``decode_batches`` is held to ``records.decode_batch`` batch by batch: a
batch it calls ``ok`` has exactly decode_batch's records, and a batch it
hands back is one decode_batch rejects or one with something it does not
cover (record headers, varints over 9 bytes).  The pipeline built on it is
held to its own row path on offsets logs with every kind of record.
"""

from __future__ import annotations

import os
import struct

import crc32c
import pytest

np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from odradek.offsets.records import (  # noqa: E402
    OFFSET_COMMIT_VALUE,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.protocol.columnar import (  # noqa: E402
    MAX_VARINT_BYTES,
    decode_batches,
    fixed_layout,
    read_fixed,
    varints,
)
from odradek.protocol.primitives import encode_uvarint  # noqa: E402
from odradek.protocol.records import (  # noqa: E402
    CorruptRecordError,
    Record,
    decode_batch,
    encode_batch,
    encode_end_txn_batch,
    encode_varint,
    iter_batch_headers,
)
from odradek.storage.segment import ScanError, iter_file_batches, iter_file_runs  # noqa: E402

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# sizes around the varint steps (64 / 8192 zig-zag bytes), null and empty
blobs = st.one_of(st.none(), st.just(b""), st.binary(max_size=80),
                  st.integers(60, 70).map(lambda n: b"v" * n), st.integers(8185, 8200).map(lambda n: b"w" * n))
headers_st = st.one_of(st.just(()), st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(
    max_size=5))), min_size=1, max_size=2).map(tuple))


@st.composite
def batches(draw):
    """One encoded batch and whether its records have anything the columnar path leaves alone."""
    n = draw(st.integers(0, 12))
    base = draw(st.integers(0, 2**40))
    ts0 = draw(st.integers(0, 2**42))
    offset, records, unusual = base, [], False
    for _ in range(n):
        ts = ts0 + draw(st.one_of(st.integers(-100, 100), st.integers(-(2**40), 2**41)))
        headers = draw(headers_st) if draw(st.integers(0, 9)) == 0 else ()
        records.append(Record(offset, ts, draw(blobs), draw(blobs), headers))
        unusual |= bool(headers) or len(encode_varint(ts - ts0)) > MAX_VARINT_BYTES
        offset += draw(st.one_of(st.just(1), st.integers(1, 2**29)))  # gaps, as after compaction
    if draw(st.integers(0, 15)) == 0:
        return encode_end_txn_batch(draw(st.booleans()), producer_id=7, producer_epoch=1, coordinator_epoch=3,
                                    base_offset=base), False
    data = encode_batch(records, base_offset=base, base_timestamp=ts0 if records else None,
                        compression=draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4])),
                        timestamp_type=draw(st.sampled_from([0, 0, 1])), transactional=draw(st.booleans()),
                        producer_id=draw(st.integers(-1, 2**40)))
    return data, unusual


def _column_records(cols, b: int) -> list[Record]:
    return [Record(int(cols.offset[i]), int(cols.timestamp[i]), cols.key(i), cols.value(i))
            for i in np.flatnonzero(cols.batch == b).tolist()]


def _check(buf: bytes, positions: list[int], unusual: list[bool] | None, verify_crc: bool = True) -> None:
    cols = decode_batches(buf, positions, verify_crc=verify_crc)
    assert len(cols.ok) == len(positions)
    assert np.all(np.diff(cols.batch) >= 0)
    for b, pos in enumerate(positions):
        try:
            header, records = decode_batch(buf, pos, verify_crc=verify_crc)
        except CorruptRecordError:
            assert not cols.ok[b], f"batch {b} decoded although decode_batch rejects it"
            continue
        if cols.ok[b]:
            assert _column_records(cols, b) == records
            assert all(r.headers == () for r in records)
            assert (cols.base_offset[b], cols.last_offset[b], cols.attributes[b], cols.producer_id[b],
                    cols.records_count[b]) == (header.base_offset, header.last_offset, header.attributes,
                                               header.producer_id, header.records_count)
        else:
            assert unusual is None or unusual[b], f"batch {b} left to the row decoder for no reason"
    assert len(cols) == sum(int(cols.records_count[b]) for b in np.flatnonzero(cols.ok).tolist())


@FAST
@given(st.lists(batches(), max_size=6), st.binary(max_size=20))
def test_columns_equal_decode_batch(items, junk):
    buf = junk + b"".join(data for data, _u in items)
    positions = [len(junk) + p for p, _h in iter_batch_headers(buf[len(junk):])]
    assert len(positions) == len(items)
    _check(buf, positions, [u for _d, u in items])


def test_many_batches_and_long_batches_take_both_record_finders():
    """Over 128 batches walk their records vectorized; a long batch finishes in the Python loop."""
    parts = [encode_batch([(b"k%d" % i, b"v" * (i % 90)) for i in range(3 + i % 4)], base_offset=i * 10,
                          base_timestamp=1000 + i) for i in range(300)]
    parts.append(encode_batch([(None, b"x" * (i % 200)) for i in range(500)], base_offset=5000, base_timestamp=1))
    buf = b"".join(parts)
    positions = [p for p, _h in iter_batch_headers(buf)]
    _check(buf, positions, [False] * len(positions))
    assert decode_batches(buf, positions).ok.all()


@FAST
@given(st.lists(batches(), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0, 100_000), st.integers(0, 255)), min_size=1, max_size=3))
def test_damaged_batches_are_left_to_the_row_decoder(items, edits):
    buf = bytearray(b"".join(data for data, _u in items))
    positions = [p for p, _h in iter_batch_headers(bytes(buf))]
    for where, byte in edits:
        buf[where % len(buf)] = byte
    _check(bytes(buf), positions, None, verify_crc=False)
    _check(bytes(buf), positions, None, verify_crc=True)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=150), st.integers(-2, 30), st.sampled_from([0, 8]), st.integers(0, 3))
def test_garbage_records_area(area, count, attributes, copies):
    """A valid header over random record bytes: never a wrong record, never another exception."""
    batch = bytearray(encode_batch([])) + area
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">i", batch, 57, count)
    buf = bytes(batch) * (copies + 1)
    _check(buf, [i * len(batch) for i in range(copies + 1)], None, verify_crc=False)


def _raw_batch(bodies: list[bytes], base_timestamp: int = 0, base_offset: int = 0) -> bytes:
    """A batch (valid CRC) around hand-made record bodies (attributes onwards)."""
    batch = bytearray(encode_batch([], base_timestamp=base_timestamp, base_offset=base_offset))
    batch += b"".join(encode_varint(len(b)) + b for b in bodies)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, len(bodies))
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_hand_made_records_are_decoded_exactly_or_left_alone():
    plain = b"\x00\x00\x00\x02k\x02v\x00"  # attributes, ts 0, offset 0, key "k", value "v", no headers
    cases = {
        "plain": ([plain], True),
        "a byte after the headers count": ([plain + b"\x00"], False),
        "a header count without headers": ([plain[:-1] + b"\x02"], False),
        "odd key length": ([b"\x00\x00\x00\x03k\x02v\x00"], False),
        "null key and value": ([b"\x00\x00\x00\x01\x01\x00"], True),
        # a 10-byte timestamp delta (-2**63) whose sum still fits: records reads it, columnar leaves it
        "10-byte varint": ([b"\x00" + encode_varint(-(2**63)) + b"\x00\x01\x01\x00"], False),
        "9-byte varint": ([b"\x00" + encode_varint(-(2**62)) + b"\x00\x01\x01\x00"], True),
        "non-minimal varint": ([b"\x00\x80\x80\x00\x00\x01\x01\x00"], True),
        # sums records makes with Python ints that int64 cannot hold
        "timestamp past int64": ([b"\x00" + encode_varint(2**41) + b"\x00\x01\x01\x00"], False),
        "offset past int64": ([b"\x00\x00" + encode_varint(2**40) + b"\x01\x01\x00"], False),
    }
    for name, (bodies, ok) in cases.items():
        buf = _raw_batch(bodies * 3, base_timestamp=2**63 - 2**40, base_offset=2**63 - 2**39)
        cols = decode_batches(buf, [0])
        assert bool(cols.ok[0]) == ok, name
        _check(buf, [0], [not ok])


def test_positions_outside_the_buffer_are_not_ok():
    data = encode_batch([(b"k", b"v")], base_offset=3)
    cols = decode_batches(data + data[:30], [0, len(data), len(data) + 40, -5])
    assert cols.ok.tolist() == [True, False, False, False]
    assert decode_batches(b"", []).ok.size == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20))
def test_varints(values):
    encoded = [encode_uvarint(v) for v in values]
    buf = b"".join(encoded)
    pos = np.cumsum([0] + [len(e) for e in encoded[:-1]])
    raw, size = varints(np.frombuffer(buf, np.uint8), pos)
    for v, e, r, s in zip(values, encoded, raw.tolist(), size.tolist(), strict=True):
        if len(e) <= MAX_VARINT_BYTES:
            assert (r, s) == (v, len(e))
        else:
            assert s > MAX_VARINT_BYTES


# --- fixed layouts of declarations -------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(OFFSET_COMMIT_VALUE.valid)), st.integers(-(2**63), 2**63 - 1),
       st.integers(-(2**31), 2**31 - 1), st.sampled_from(["", "", "m", "métadonnée"]),
       st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.sampled_from([b"", b"", b"\x00"]))
def test_fixed_layout_reads_what_storage_reads(version, offset, epoch, metadata, commit_ts, expire_ts, tail):
    fields = {"offset": offset, "leader_epoch": epoch, "metadata": metadata, "commit_timestamp": commit_ts,
              "expire_timestamp": expire_ts}
    value = struct.pack(">h", version) + OFFSET_COMMIT_VALUE.build(fields, version) + tail
    want = decode_value(OffsetKey("g", "t", 0), value)
    layout = fixed_layout(OFFSET_COMMIT_VALUE, version)
    buf = b"\xff" * 3 + value + b"\xee" * 5
    match, got = read_fixed(layout, buf, np.array([5]), np.array([len(value) - 2]))
    assert bool(match[0]) == (metadata == "" and tail == b"")
    if match[0]:
        for name in ("offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp"):
            have = got[name][0] if name in got else layout.constants[name]
            assert have == getattr(want, name), name


def test_fixed_layout_sizes():
    assert [fixed_layout(OFFSET_COMMIT_VALUE, v).size for v in range(5)] == [18, 26, 18, 22, 22]


# --- files in runs ----------------------------------------------------------------------

def test_file_runs_are_the_file_batches_and_fail_alike(tmp_path):
    parts = [encode_batch([(b"k", b"v" * (i * 37 % 3000))], base_offset=i) for i in range(60)]
    data = b"".join(parts)
    path = tmp_path / "seg.log"
    for content in (data, data[:-7], data + b"\x00" * 5, data[:100] + b"\x00" * 50 + data[150:]):
        path.write_bytes(content)
        fd = os.open(path, os.O_RDONLY)
        try:
            def collect(it):
                got = []
                try:
                    for item in it:
                        got.append(item)
                except ScanError as exc:
                    return got, str(exc)
                return got, None

            runs, err_runs = collect(iter_file_runs(fd, 0, len(content), chunk=4096))
            singles, err = collect(iter_file_batches(fd, 0, len(content), chunk=4096))
            assert [bytes(b[o:o + 20]) for b, offs in runs for o in offs] == [
                bytes(b[o:o + 20]) for _p, b, o, _h in singles]
            assert err_runs == err
        finally:
            os.close(fd)


# --- the pipeline: columnar rows == row-path rows ----------------------------------------

pa = pytest.importorskip("pyarrow")


@st.composite
def offsets_records(draw):
    """(key, value) pairs of an offsets log: commits, tombstones, groups, odd keys and values."""
    group = draw(st.sampled_from(["g1", "g2", "grp-longer-than-twelve"]))
    topic = draw(st.sampled_from(["t", "orders"]))
    key = encode_key(OffsetKey(group, topic, draw(st.integers(0, 3))))
    kind = draw(st.integers(0, 30))
    if kind == 0:
        return key, None
    if kind == 1:
        members = [MemberValue("m1", None, "c", "/h", 1000, 500, b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff",
                               b"")]
        return encode_key(GroupKey(group)), encode_value(GroupValue(protocol_type="consumer", generation=2,
                                                                    protocol="range", leader="m1", members=members))
    if kind == 2:
        return draw(st.sampled_from([None, b"", b"\x00", b"\x00\x01\x00", b"\x00\x05xyz", b"\x00\x02\x00\x01g"])), b"v"
    if kind == 3:
        return key, draw(st.sampled_from([b"", b"\x00", b"\x00\x63garbage", b"\x00\x03\x00", b"\xff\xff"]))
    version = draw(st.sampled_from(list(OFFSET_COMMIT_VALUE.valid)))
    fields = {"offset": draw(st.integers(-1, 2**40)), "leader_epoch": draw(st.integers(-1, 9)),
              "metadata": draw(st.sampled_from(["", "", "", "meta"])), "commit_timestamp": draw(st.integers(0, 2**42)),
              "expire_timestamp": draw(st.integers(-1, 2**42))}
    tail = draw(st.sampled_from([b"", b"", b"", b"\x00\x00"]))
    return key, struct.pack(">h", version) + OFFSET_COMMIT_VALUE.build(fields, version) + tail


@FAST
@given(st.lists(st.tuples(st.lists(offsets_records(), min_size=1, max_size=6), st.sampled_from([0, 0, 2]),
                          st.integers(0, 12)), min_size=1, max_size=12),
       st.sampled_from(["__consumer_offsets", "orders"]), st.sampled_from([1, 3, 1000]))
def test_pipeline_rows_equal_the_row_path(batch_specs, topic, max_rows):
    from odradek.pipeline.decode import SegmentRef, decode_segment_bytes

    parts, offset = [], 0
    for pairs, codec, special in batch_specs:
        if special == 0:
            parts.append(encode_end_txn_batch(True, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                              base_offset=offset))
            offset += 1
            continue
        recs = [Record(offset + 2 * i, 1000 + i, k, v, (("h", b"x"),) if special == 1 else ())
                for i, (k, v) in enumerate(pairs)]
        parts.append(encode_batch(recs, base_offset=offset, compression=codec, transactional=special == 2))
        offset += 2 * len(pairs) + 1
    data = b"".join(parts)
    ref = SegmentRef(f"/d/{topic}-0/{0:020d}.log", "/d", topic, 0, 0)
    for content in (data, data[:-3]):
        warnings: list[str] = []
        new = list(decode_segment_bytes(content, ref, max_rows=max_rows, warn=warnings.append))
        old = list(decode_segment_bytes(content, ref, max_rows=max_rows, warn=warnings.append, columnar=False))
        assert [r for b in new for r in b.to_pylist()] == [r for b in old for r in b.to_pylist()]
        assert all(b.num_rows == max_rows for b in new[:-1])
        assert len(warnings) in (0, 2) and warnings[:1] == warnings[1:]


@pytest.mark.parametrize("column", ["member_id", "control_type", "current_state_timestamp", "group_topics", "members",
                                    "member_assignment"])
def test_sparse_columns_built_around_their_cells_equal_a_take(column):
    """The decoder's rare columns are spread from their cells' own array; a take is the reference."""
    from odradek.pipeline.decode import ARROW_SCHEMA, _sparse_column, _with_cells

    t = ARROW_SCHEMA.field(column).type
    samples = {"member_id": ["", "m-1", "a longer member id"], "control_type": [0, 1],
               "current_state_timestamp": [0, 2**40], "group_topics": [[], ["a", "b"]], "member_assignment": [[], [{"topic": "x", "partitions": [0, 3]}]],
               "members": [[], [{"member_id": "m", "group_instance_id": None, "client_id": "c", "client_host": "/h",
                                 "rebalance_timeout": 1, "session_timeout": 2, "subscribed_topics": None,
                                 "assigned_partitions": [{"topic": "t", "partitions": [1]}]}]]}[column]
    for cells in ({}, {3: None}, {0: samples[0], 9: None}, dict(enumerate(samples * 3)),
                  {9: samples[-1], 1: samples[0], 5: None}):
        got = _sparse_column(10, cells, t)
        got.validate(full=True)
        assert got.equals(_with_cells(pa.nulls(10, t), cells, t))
