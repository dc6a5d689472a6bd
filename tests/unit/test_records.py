"""Record batches (magic 2) and legacy message sets (magic 0/1): odradek.protocol.records.

Real bytes captured from Kafka 0.10/0.11 brokers are kept in
tests/kafka_captures.py; kafka-python's pure-Python codec is the independent
cross-check for what we build.  Fetch responses captured from 0.8/0.9 brokers
(kafka-rust's test data, ~60 KB) live only in the reference folder beside the
checkout: those tests skip when it is absent, and kafka-python-built message
sets cover the same decoding without it.
"""

from __future__ import annotations

import struct
import zlib

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import compression
from odradek.protocol.records import (
    HEADER_SIZE,
    ControlRecordType,
    CorruptRecordError,
    Record,
    compute_crc,
    decode_batch,
    decode_varint,
    encode_batch,
    encode_end_txn_batch,
    encode_pairs_batch,
    encode_varint,
    iter_batch_headers,
    iter_batches,
    iter_records,
    parse_control_key,
    parse_end_txn_marker,
    read_batch_header,
)
from tests.kafka_captures import RECORD_BATCHES, SHARED_VECTORS, needs_shared

VECTORS = SHARED_VECTORS / "record-batches"
KP = VECTORS / "kafka-python"
KR = VECTORS / "kafka-rust"

CODECS = [0, 1, 2, 3, 4]


def hex_vector(name: str) -> bytes:
    """A capture kept in the repository (named as its file in the reference folder)."""
    return RECORD_BATCHES[name]


def fetch_v0_message_set(raw: bytes) -> tuple[int, str, int, int, int, bytes]:
    """Minimal Fetch v0 response reader (one topic, one partition), size prefix already stripped."""
    correlation_id, n_topics = struct.unpack_from(">ii", raw, 0)
    assert n_topics == 1
    (name_len,) = struct.unpack_from(">h", raw, 8)
    topic = raw[10:10 + name_len].decode()
    pos = 10 + name_len
    n_parts, partition, error, high_watermark, size = struct.unpack_from(">iihqi", raw, pos)
    assert n_parts == 1
    pos += struct.calcsize(">iihqi")
    assert pos + size == len(raw)
    return correlation_id, topic, partition, error, high_watermark, raw[pos:pos + size]


def legacy_message(magic: int, offset: int, value: bytes | None, *, key: bytes | None = None,
                   timestamp: int = -1, attributes: int = 0) -> bytes:
    """One magic 0/1 entry with a correct CRC-32 (to build wrappers the vectors lack)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


# --- magic 2 vectors -------------------------------------------------------------

def test_magic2_vector_decodes_four_batches_and_ignores_trailing_zeros():
    data = hex_vector("records_magic2.hex")
    assert len(data) == 299
    batches = list(iter_batches(data + b"\x00" * 4))
    assert sum(h.size for h, _ in batches) == 299
    assert [(h.base_offset, h.partition_leader_epoch) for h, _ in batches] == [(0, 1), (1, 2), (3, 2), (0, 0)]
    assert [[(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs] for _, recs in batches] == [
        [(0, 1503229838908, None, b"123", ())],
        [(1, 1503229959532, None, b"", ()), (2, 1503229959700, None, b"", ())],
        [(3, 1503229962141, None, b"123", ())],
        [(0, 1535546684353, None, b"hdr", (("hkey", b"hval"),))],
    ]
    for h, _ in batches:
        assert h.magic == 2 and h.compression == 0 and not h.log_append_time
    assert [r.value for r in iter_records(data + b"\x00" * 4)] == [b"123", b"", b"", b"123", b"hdr"]


def test_reencoding_the_magic2_vector_is_byte_identical():
    """Our encoder writes exactly what a Kafka 0.11 broker stored, CRC included."""
    data = hex_vector("records_magic2.hex")
    for pos, header in iter_batch_headers(data, validate=True):
        _, records = decode_batch(data, pos)
        rebuilt = encode_batch(records, base_offset=header.base_offset,
                               partition_leader_epoch=header.partition_leader_epoch)
        assert rebuilt == data[pos:pos + header.size]


def test_empty_value_is_not_a_tombstone():
    _, records = decode_batch(hex_vector("records_magic2.hex"), 71)
    assert [r.value for r in records] == [b"", b""]
    batch = encode_batch([(b"k", None), (b"k", b"")])
    assert [r.value for r in decode_batch(batch)[1]] == [None, b""]


# --- legacy vectors --------------------------------------------------------------

def test_magic1_vector():
    data = hex_vector("records_magic1.hex")
    batches = list(iter_batches(data))
    assert [h.magic for h, _ in batches] == [1, 1, 1, 1]
    assert batches[0][0].crc == 0x478628C2 == 1199974594
    records = [r for _, recs in batches for r in recs]
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, None, b"123"), (1, None, b""), (2, None, b""), (3, None, b"123")]
    assert records[0].timestamp == 1503648000942
    assert not batches[0][0].log_append_time


def test_magic0_vector():
    data = hex_vector("records_magic0.hex")
    batches = list(iter_batches(data))
    assert batches[0][0].crc == 0xFEB01DBF and batches[0][0].magic == 0
    assert [(r.offset, r.timestamp, r.key, r.value) for r in iter_records(data)] == [
        (0, -1, None, b"123"), (1, -1, None, b""), (2, -1, None, b""), (3, -1, None, b"123")]


FETCH1 = [
    ("fetch1.mytopic.1p.nocompression.kafka.0821", 0, 42),
    ("fetch1.mytopic.1p.gzip.kafka.0821", 1, 1),
    ("fetch1.mytopic.1p.snappy.kafka.0821", 2, 1),  # xerial, 20 blocks
    ("fetch1.mytopic.1p.snappy.kafka.0822", 2, 1),  # xerial, 1 block
]


@needs_shared
def test_embedded_captures_match_the_reference_folder():
    for name, data in RECORD_BATCHES.items():
        assert data == bytes.fromhex("".join((KP / name).read_text().split())), name


@needs_shared
@pytest.mark.parametrize(("name", "codec", "entries"), FETCH1)
def test_kafka_rust_fetch1_message_sets(name, codec, entries):
    correlation_id, topic, partition, error, hw, message_set = fetch_v0_message_set((KR / name).read_bytes())
    assert (correlation_id, topic, partition, error, hw) == (2, "my-topic", 0, 0, 42)
    batches = list(iter_batches(message_set))
    assert len(batches) == entries
    assert {h.magic for h, _ in batches} == {0} and {h.compression for h, _ in batches} == {codec}
    assert batches[-1][0].last_offset == 41
    records = [r for _, recs in batches for r in recs]
    expected = (KR / "fetch1.txt").read_bytes().split(b"\n")[:-1]
    assert len(expected) == 42
    assert [r.value for r in records] == expected
    assert [r.offset for r in records] == list(range(42))
    assert {r.key for r in records} == {None} and {r.timestamp for r in records} == {-1}


@needs_shared
def test_xerial_snappy_stream_with_three_chunks():
    chunked = (KR / "fetch1.snappy.chunked.4k").read_bytes()
    assert compression.snappy_decompress(chunked) == (KR / "fetch1.txt").read_bytes()


@needs_shared
def test_kafka_rust_fetch2_and_its_corrupted_crc():
    expected = (KR / "fetch2.txt").read_bytes().rstrip(b"\n")
    cid, _, _, _, hw, good = fetch_v0_message_set((KR / "fetch2.mytopic.nocompression.kafka.0900").read_bytes())
    assert (cid, hw) == (5, 1)
    assert [(r.offset, r.value) for r in iter_records(good)] == [(0, expected)]

    *_, bad = fetch_v0_message_set((KR / "fetch2.mytopic.nocompression.invalid_crc.kafka.0900").read_bytes())
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_records(bad))
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(bad)
    assert [r.value for r in iter_records(bad, verify_crc=False)] == [expected]


@pytest.fixture
def kafka_python_snappy(monkeypatch):
    """kafka-python's xerial framing over cramjam's raw snappy (python-snappy is not a dependency)."""
    import types

    import cramjam
    import kafka.codec

    monkeypatch.setattr(kafka.codec, "snappy", types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(data))), raising=False)
    return kafka.codec.snappy_encode


TEXT_LINES = [b"line %02d " % i + b"of public-domain prose, " * (i % 7) for i in range(42)]


@pytest.mark.parametrize("codec", [0, 1, 2])
def test_magic0_message_sets_built_by_kafka_python(codec, kafka_python_snappy):
    """The shape of an 0.8 broker's Fetch data (42 messages, plain or in one gzip/xerial-snappy
    wrapper), written by kafka-python's independent builder."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=0, compression_type=codec, batch_size=1 << 20)
    for i, line in enumerate(TEXT_LINES):
        builder.append(i, timestamp=None, key=None, value=line)
    data = bytes(builder.build())
    if codec:  # kafka-python numbers the wrapper 0; a broker gives it the last inner offset
        data = struct.pack(">q", 41) + data[8:]
    batches = list(iter_batches(data))
    assert len(batches) == (1 if codec else 42)
    assert {h.magic for h, _ in batches} == {0} and {h.compression for h, _ in batches} == {codec}
    assert batches[-1][0].last_offset == 41
    records = [r for _, recs in batches for r in recs]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (i, None, line, -1) for i, line in enumerate(TEXT_LINES)]


def test_xerial_snappy_stream_with_several_blocks_from_kafka_python(kafka_python_snappy):
    text = b"\n".join(TEXT_LINES) * 4
    stream = kafka_python_snappy(text, xerial_compatible=True, xerial_blocksize=4096)
    assert stream.startswith(b"\x82SNAPPY\x00") and len(text) > 2 * 4096
    assert compression.snappy_decompress(stream) == text


def test_a_legacy_message_with_a_corrupted_crc_fails_the_check():
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=0, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=None, value=TEXT_LINES[5])
    good = bytes(builder.build())
    assert [r.value for r in iter_records(good)] == [TEXT_LINES[5]]
    bad = bytearray(good)
    bad[12] ^= 0xFF  # first CRC byte, after offset (8) and size (4)
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_records(bytes(bad)))
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(bytes(bad))
    assert [r.value for r in iter_records(bytes(bad), verify_crc=False)] == [TEXT_LINES[5]]


def test_legacy_compressed_wrappers_from_kafka_python():
    """kafka-python's builder is an independent writer of magic 0/1 gzip wrappers."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=1, batch_size=1 << 20)
        for i in range(5):
            builder.append(i, timestamp=1_600_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i)
        data = bytes(builder.build())
        (header, records), = list(iter_batches(data))
        assert header.magic == magic and header.compression == 1 and header.records_count == 5
        assert [(r.offset, r.key, r.value) for r in records] == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]
        expected_ts = [1_600_000_000_000 + i for i in range(5)] if magic else [-1] * 5
        assert [r.timestamp for r in records] == expected_ts


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_magic1_wrapper_relative_offsets_and_log_append_time(codec):
    inner = b"".join(legacy_message(1, i, b"v%d" % i, timestamp=1000 + i) for i in range(3))
    wrapped = compression.compress(codec, inner)
    # Wrapper at absolute offset 102 = last inner: inner 0..2 become 100..102.
    create = legacy_message(1, 102, wrapped, timestamp=1002, attributes=codec)
    header, records = decode_batch(create)
    assert [(r.offset, r.timestamp) for r in records] == [(100, 1000), (101, 1001), (102, 1002)]
    assert (header.base_offset, header.last_offset, header.max_timestamp) == (100, 102, 1002)
    # LogAppendTime on the wrapper overrides inner timestamps.
    appended = legacy_message(1, 102, wrapped, timestamp=5555, attributes=codec | 0x08)
    assert [r.timestamp for r in decode_batch(appended)[1]] == [5555] * 3
    # Wrapper offset 0 (as some producers send) means "relative from 0".
    zero = legacy_message(1, 0, wrapped, timestamp=1002, attributes=codec)
    assert [r.offset for r in decode_batch(zero)[1]] == [0, 1, 2]


def test_magic0_lz4_with_kafkas_broken_descriptor_checksum():
    inner = b"".join(legacy_message(0, 7 + i, b"x" * i) for i in range(3))
    frame = bytearray(compression.lz4_compress(inner))
    # Kafka's magic-0 writer hashed the frame magic too.
    frame[6] = (compression.xxh32_short(bytes(frame[0:6])) >> 8) & 0xFF
    assert frame[6] != 0x82
    records = decode_batch(legacy_message(0, 9, bytes(frame), attributes=3))[1]
    assert [(r.offset, r.value) for r in records] == [(7, b""), (8, b"x"), (9, b"xx")]
    inner_v1 = b"".join(legacy_message(1, i, b"x" * i) for i in range(3))
    frame_v1 = bytearray(compression.lz4_compress(inner_v1))
    assert decode_batch(legacy_message(1, 9, bytes(frame_v1), attributes=3))[1][2].offset == 9
    frame_v1[6] = (compression.xxh32_short(bytes(frame_v1[0:6])) >> 8) & 0xFF
    with pytest.raises(CorruptRecordError, match="lz4"):  # magic 1 has no such excuse
        decode_batch(legacy_message(1, 9, bytes(frame_v1), attributes=3))


def test_legacy_wrapper_rules():
    inner_v0 = legacy_message(0, 0, b"a")
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_batch(legacy_message(1, 0, compression.compress(1, inner_v0), attributes=1))
    nested = legacy_message(0, 0, compression.compress(1, inner_v0), attributes=1)
    with pytest.raises(CorruptRecordError, match="inside"):
        decode_batch(legacy_message(0, 0, compression.compress(1, nested), attributes=1))
    with pytest.raises(CorruptRecordError):
        decode_batch(legacy_message(0, 0, None, attributes=1))


# --- control batches --------------------------------------------------------------

def test_control_batch_vector_has_a_bad_crc_but_decodes_without_the_check():
    data = hex_vector("control_batch_magic2_BAD_CRC.hex")
    assert len(data) == 94
    header = read_batch_header(data)
    assert compute_crc(data, 0, header.size) != header.crc
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(data)
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_records(data))
    header, records = decode_batch(data, verify_crc=False)
    assert header.attributes == 0x20 and header.is_control and not header.is_transactional
    assert len(records) == 1
    assert parse_control_key(records[0].key) == (0, ControlRecordType.ABORT)
    assert records[0].value == b"opaque-control-message"


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker_batch_round_trip(commit):
    data = encode_end_txn_batch(commit, producer_id=4000, producer_epoch=3, coordinator_epoch=17,
                                base_offset=55, timestamp=123)
    header, (record,) = decode_batch(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (4000, 3, 55)
    key = parse_control_key(record.key)
    assert key.version == 0 and key.type == (ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert parse_end_txn_marker(record.value) == (0, 17)
    assert (record.offset, record.timestamp) == (55, 123)


def test_short_control_fields_are_corrupt():
    for bad in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            parse_control_key(bad)
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(b"\x00\x00\x00\x00\x00")


# --- varints, CRC -----------------------------------------------------------------

@needs_shared
def test_zigzag_varint_vectors_round_trip():
    lines = (KP / "zigzag_varints.tsv").read_text().splitlines()
    assert lines[0] == "encoded_hex\tvalue"
    pairs = [line.split("\t") for line in lines[1:] if line.strip()]
    assert len(pairs) == 39
    for encoded_hex, value in pairs:
        encoded, value = bytes.fromhex(encoded_hex), int(value)
        assert decode_varint(encoded) == (value, len(encoded))
        assert decode_varint(b"\xff" + encoded, 1) == (value, len(encoded) + 1)
        assert encode_varint(value) == encoded


ZIGZAG_VALUES = sorted({v for b in range(64) for base in (1 << b, -(1 << b))
                        for v in (base - 1, base, base + 1) if -(1 << 63) <= v < (1 << 63)})


def test_zigzag_varints_agree_with_kafka_python():
    from kafka.record.util import decode_varint as kp_decode
    from kafka.record.util import encode_varint as kp_encode

    for value in ZIGZAG_VALUES:
        out = bytearray()
        kp_encode(value, out.append)
        encoded = bytes(out)
        assert encode_varint(value) == encoded, value
        assert decode_varint(encoded) == (value, len(encoded))
        assert decode_varint(b"\xff" + encoded, 1) == (value, len(encoded) + 1)
        assert kp_decode(encoded, 0) == (value, len(encoded))


def test_varint_errors():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80")
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 11)


def test_crc32c_check_values():
    assert crc32c.crc32c(b"") == 0
    assert crc32c.crc32c(b"a") == 0xC1D04330
    assert crc32c.crc32c(b"123456789") == 0xE3069283
    data = hex_vector("records_magic2.hex")
    header = read_batch_header(data)
    assert header.crc == 0x0318A270 == compute_crc(data, 0, header.size)


# --- encoder properties -----------------------------------------------------------

def test_offsets_gaps_empty_batch_and_delete_horizon():
    recs = [Record(1005, 10, b"a", b"1"), Record(1009, 12, b"b", None, (("h", None),))]
    data = encode_batch(recs, base_offset=1000, last_offset_delta=20, delete_horizon=99_000)
    header, out = decode_batch(data)
    assert out == recs
    assert (header.last_offset, header.records_count, header.delete_horizon) == (1020, 2, 99_000)
    assert header.base_timestamp == 99_000 and header.max_timestamp == 12

    empty = encode_batch([], base_offset=7, last_offset_delta=3, producer_id=9, producer_epoch=1,
                         base_sequence=40)
    header, out = decode_batch(empty)
    assert out == [] and header.size == HEADER_SIZE and header.last_offset == 10
    assert (header.base_timestamp, header.max_timestamp, header.delete_horizon) == (-1, -1, None)


def test_tuples_get_consecutive_offsets_and_the_base_timestamp():
    data = encode_batch([(b"k1", b"v1"), (None, b"v2", [("h", b"x")])], base_offset=40, base_timestamp=777)
    _, records = decode_batch(data)
    assert records == [Record(40, 777, b"k1", b"v1"), Record(41, 777, None, b"v2", (("h", b"x"),))]


def test_encode_rejects_nonsense():
    with pytest.raises(ValueError):
        encode_batch([Record(5, 0, None, b""), Record(5, 0, None, b"")])
    with pytest.raises(ValueError):
        encode_batch([Record(5, 0, None, b"")], base_offset=6)
    with pytest.raises(ValueError):
        encode_batch([(None, b"")], compression=5)
    with pytest.raises(ValueError):
        encode_batch([(None, b""), (None, b"")], last_offset_delta=0)


def test_lz4_frames_have_independent_blocks_and_span_blocks():
    value = bytes(range(256)) * 1024  # 256 KiB: four lz4 blocks
    data = encode_batch([(b"big", value), (b"small", b"x")], compression=3)
    records = decode_batch(data)[1]
    assert records[0].value == value
    frame = data[HEADER_SIZE:HEADER_SIZE + 7]
    assert frame == b"\x04\x22\x4d\x18\x60\x40\x82"  # FLG bit 5: independent blocks


def test_xerial_framing_errors():
    with pytest.raises(compression.CompressionError, match="header"):
        compression.snappy_decompress(compression.XERIAL_MAGIC + b"\x00\x00")
    stream = compression.snappy_compress(b"abc" * 20_000)
    assert compression.snappy_decompress(stream) == b"abc" * 20_000
    for cut in (len(stream) - 1, 19):
        with pytest.raises(compression.CompressionError):
            compression.snappy_decompress(stream[:cut])


def test_xxh32_check_values():
    assert compression.xxh32_short(b"") == 0x02CC5D05
    assert compression.xxh32_short(b"a") == 0x550D7456
    assert compression.xxh32_short(b"abc") == 0x32D153FF


def test_snappy_accepts_bare_raw_blocks_and_rejects_absurd_sizes():
    import cramjam

    area = encode_batch([(b"k", b"v" * 100)])[HEADER_SIZE:]
    bare = raw_batch(bytes(cramjam.snappy.compress_raw(area)), 1, attributes=2)
    assert decode_batch(bare)[1][0].value == b"v" * 100
    # A raw block claiming 4 GiB: cramjam would allocate it blindly (and abort).
    with pytest.raises(CorruptRecordError, match="claims"):
        decode_batch(raw_batch(b"\xff\xff\xff\xff\x0f\x00abc", 1, attributes=2))


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4, compression.ZSTD])
def test_decompression_is_capped_and_grows_past_its_first_guess(codec, monkeypatch):
    """A bomb stops at the cap; a batch far more compressible than the first buffer still decodes."""
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 4 << 20)
    roomy = encode_batch([(b"k", bytes(1 << 20)), (b"k", bytes(1 << 20))], compression=codec)
    assert [len(r.value) for r in decode_batch(roomy)[1]] == [1 << 20, 1 << 20]  # >> 8x compressed, < cap
    bomb = raw_batch(compression.compress(codec, bytes(5 << 20)), 1, attributes=codec)
    with pytest.raises(CorruptRecordError, match="more than 4194304 bytes"):
        decode_batch(bomb)
    with pytest.raises(CorruptRecordError, match="^(gzip|lz4|zstd): (?!decompresses)"):  # corrupt, not long
        decode_batch(raw_batch(compression.compress(codec, b"abc" * 100)[:-9] + b"\x01" * 9, 1,
                               attributes=codec))


def test_kafka_python_reads_what_we_write_and_we_read_what_it_writes():
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    recs = [Record(i, 1_600_000_000_000 + i * 3, None if i == 2 else b"k%d" % i,
                   None if i == 3 else b"v" * i, (("a", b"1"), ("b", None)) if i % 2 else ())
            for i in range(6)]
    for codec in (0, 1):
        ours = encode_batch(recs, compression=codec, producer_id=77, producer_epoch=2, base_sequence=10)
        theirs = DefaultRecordBatch(bytearray(ours))
        assert theirs.validate_crc()
        assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs] == [
            (r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]

        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 20)
        for r in recs:
            builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
        assert decode_batch(bytes(builder.build()))[1] == recs


# --- hypothesis round trip ----------------------------------------------------------

blobs = st.one_of(st.none(), st.just(b""), st.binary(max_size=300))
headers_st = st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
                      max_size=3).map(tuple)
int64 = st.integers(-(2**63), 2**63 - 1)
timestamps = st.integers(0, 2**45)


@st.composite
def record_lists(draw):
    n = draw(st.integers(0, 25))
    base = draw(st.integers(0, 2**40))
    gaps = draw(st.lists(st.integers(1, 2**20), min_size=n, max_size=n))
    offset, out = base, []
    for gap in gaps:
        out.append(Record(offset, draw(timestamps), draw(blobs), draw(blobs), draw(headers_st)))
        offset += gap
    return base, out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists(), st.sampled_from(CODECS), st.sampled_from([0, 1]), st.booleans(), st.booleans(),
       st.integers(-1, 2**31 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1), int64)
def test_encode_decode_round_trip(base_and_records, codec, ts_type, transactional, control,
                                  leader_epoch, producer_epoch, base_sequence, producer_id):
    base, records = base_and_records
    data = encode_batch(records, base_offset=base, compression=codec, timestamp_type=ts_type,
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                        partition_leader_epoch=leader_epoch, transactional=transactional, control=control)
    header, decoded = decode_batch(data)
    assert header.size == len(data) and header.compression == codec
    assert header.log_append_time == bool(ts_type)
    assert (header.is_transactional, header.is_control) == (transactional, control)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        producer_id, producer_epoch, base_sequence)
    assert header.partition_leader_epoch == leader_epoch and header.records_count == len(records)
    assert header.base_offset == base
    if records:
        assert header.last_offset == records[-1].offset
        assert header.max_timestamp == max(r.timestamp for r in records)
    expected = [Record(r.offset, header.max_timestamp if ts_type else r.timestamp, r.key, r.value, r.headers)
                for r in records]
    assert decoded == expected
    assert list(iter_records(data + data[:30])) == expected  # a trailing partial batch is dropped


# --- hostile input --------------------------------------------------------------------

def sample_batches() -> list[bytes]:
    recs = [Record(i, 1000 + i, b"key%d" % i, b"value" * i, (("h", b"v"),) if i == 1 else ()) for i in range(4)]
    out = [encode_batch(recs, compression=c) for c in CODECS]
    out.append(hex_vector("records_magic2.hex")[:71])
    out.append(hex_vector("records_magic1.hex")[:37])
    out.append(hex_vector("records_magic0.hex")[:29])
    inner = b"".join(legacy_message(1, i, b"v%d" % i, timestamp=i) for i in range(3))
    out.extend(legacy_message(1, 2, compression.compress(c, inner), timestamp=2, attributes=c)
               for c in (1, 2, 3))
    return out


SAMPLES = sample_batches()


@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_every_truncation_is_corrupt_for_decode_and_a_clean_stop_for_iteration(index):
    batch = SAMPLES[index]
    assert decode_batch(batch)[1]
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut])
        assert list(iter_batches(batch[:cut])) == []
        assert len(list(iter_batches(batch + batch[:cut]))) == 1


def raw_batch(area: bytes, count: int, attributes: int = 0) -> bytes:
    """A magic-2 batch around hand-made record bytes, with a correct CRC."""
    batch = bytearray(encode_batch([])) + area
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">i", batch, 57, count)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def raw_record(fields: bytes, length_adjust: int = 0) -> bytes:
    return encode_varint(len(fields) + length_adjust) + fields


OK_FIELDS = b"\x00\x00\x00" + encode_varint(1) + b"k" + encode_varint(1) + b"v" + b"\x00"


@pytest.mark.parametrize(("area", "count", "match"), [
    (raw_record(b"\x00\x00\x00\x03\x00\x00"), 1, "key length"),  # key length -2
    (raw_record(b"\x00\x00\x00\x01\x05\x00"), 1, "value length"),  # value length -3
    (raw_record(b"\x00\x00\x00\x01\x01\x01"), 1, "header count"),  # header count -1
    (raw_record(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1, "header key"),  # null header key
    (raw_record(b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"), 1, "UTF-8"),
    (raw_record(b"\x00\x00\x00\x01\x01\x02\x02h\x05"), 1, "header value"),
    (b"\x03" + OK_FIELDS, 1, "negative record length"),
    # Lengths off by +1 and -1 that cancel out over the batch: only the per-record check sees it.
    (raw_record(OK_FIELDS, +1) + raw_record(OK_FIELDS, -1), 2, "length"),
    (raw_record(OK_FIELDS) * 2, 1, "left after"),
    (raw_record(OK_FIELDS) * 2, 3, "records cannot fit|past the end"),
    (raw_record(b"\x00" + b"\xff" * 10 + b"\x01"), 1, "varint"),
])
def test_malformed_records_are_corrupt(area, count, match):
    assert decode_batch(raw_batch(raw_record(OK_FIELDS), 1))[1] == [Record(0, -1, b"k", b"v")]
    with pytest.raises(CorruptRecordError, match=match):
        decode_batch(raw_batch(area, count))
    with pytest.raises(CorruptRecordError, match=match):  # the same bytes handed over compressed
        decode_batch(raw_batch(compression.compress(4, area), count, attributes=4))


def test_malformed_legacy_messages_are_corrupt():
    good = legacy_message(1, 0, b"value", key=b"key", timestamp=5)
    assert decode_batch(good)[1] == [Record(0, 5, b"key", b"value")]

    def patched(pos: int, fmt: str, v: int) -> bytes:
        msg = bytearray(good)
        struct.pack_into(fmt, msg, pos, v)
        struct.pack_into(">I", msg, 12, zlib.crc32(bytes(msg[16:])))
        return bytes(msg)

    key_len_pos = 12 + 4 + 2 + 8
    for bad_len in (1000, -2, 4):  # past the message, negative, leaves the value length misaligned
        with pytest.raises(CorruptRecordError):
            decode_batch(patched(key_len_pos, ">i", bad_len))
    with pytest.raises(CorruptRecordError, match="size"):
        decode_batch(patched(8, ">i", 10) + bytes(100))
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_batch(patched(16, ">b", 3))


def _decodes_or_corrupt(data: bytes, verify_crc: bool) -> None:
    try:
        for _ in iter_batches(data, verify_crc=verify_crc):
            pass
    except CorruptRecordError:
        pass
    try:
        decode_batch(data, verify_crc=verify_crc)
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_garbage_raises_only_corrupt_record_error(data, verify_crc):
    _decodes_or_corrupt(data, verify_crc)
    _decodes_or_corrupt(bytes(8) + struct.pack(">i", len(data) + 5) + b"\x00\x00\x00\x00\x02" + data, False)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.integers(-2, 12), st.sampled_from([0, 8]))
def test_garbage_records_area_raises_only_corrupt_record_error(area, count, attributes):
    """A valid magic-2 header over random record bytes drives the record loop itself."""
    batch = bytearray(encode_batch([])) + area
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">i", batch, 57, count)
    _decodes_or_corrupt(bytes(batch), False)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SAMPLES), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                                          min_size=1, max_size=4))
def test_mutated_batches_raise_only_corrupt_record_error(batch, edits):
    mutated = bytearray(batch)
    for where, byte in edits:
        mutated[where % len(mutated)] = byte
    _decodes_or_corrupt(bytes(mutated), verify_crc=False)  # exercise the parsers past the CRC
    if len(edits) == 1 and bytes(mutated) != batch and edits[0][0] % len(batch) >= 21 and batch[16] == 2:
        with pytest.raises(CorruptRecordError):  # CRC-32C catches every single-byte change
            decode_batch(bytes(mutated))


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=300)),
                                st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=1000,
                                                                                       max_size=1100))),
                     min_size=1, max_size=20),
       base=st.integers(0, 2**40), ts=st.integers(-1, 2**45), tstype=st.sampled_from([0, 1]),
       epoch=st.integers(-1, 100))
def test_pairs_batch_is_the_general_encoders_bytes(pairs, base, ts, tstype, epoch):
    """The coordinator's lean encoder must write exactly what encode_batch writes for plain pairs."""
    lean = encode_pairs_batch(pairs, base_offset=base, timestamp=ts, timestamp_type=tstype,
                              partition_leader_epoch=epoch)
    general = encode_batch(pairs, base_offset=base, base_timestamp=ts, timestamp_type=tstype,
                           partition_leader_epoch=epoch, max_timestamp=ts)
    assert lean == general
    header, records = decode_batch(lean, 0)
    assert [(r.key, r.value) for r in records] == pairs


@settings(max_examples=60, deadline=None)
@given(data=st.data(), base=st.integers(0, 2**40), ts=st.integers(0, 2**45))
def test_pairs_batch_with_a_timestamp_per_record_is_the_general_encoders_bytes(data, base, ts):
    """The coordinator runtime's form: records staged over several turns, each at its own time
    (deltas from the first may be large or negative: the wall clock can step back)."""
    pairs = data.draw(st.lists(st.tuples(st.binary(max_size=50), st.one_of(st.none(), st.binary(max_size=50))),
                               min_size=1, max_size=12))
    stamps = [ts] + data.draw(st.lists(st.one_of(st.integers(0, 1100), st.integers(-5, 0),
                                                 st.integers(2000, 10**9)).map(lambda d: ts + d),
                                       min_size=len(pairs) - 1, max_size=len(pairs) - 1))
    lean = encode_pairs_batch(pairs, base_offset=base, timestamp=max(stamps), timestamps=stamps)
    general = encode_batch([Record(base + i, t, k, v) for i, ((k, v), t) in enumerate(zip(pairs, stamps, strict=True))],
                           base_offset=base)
    assert lean == general


def test_pairs_batch_of_more_records_than_its_varint_table():
    """Offset deltas from 1024 on (a turn of 16 commits of 100 partitions) are packed in place,
    two bytes up to 8191, the varint encoder's beyond."""
    pairs = [(b"k%d" % i, b"v" * (i % 7)) for i in range(8300)]
    lean = encode_pairs_batch(pairs, base_offset=5, timestamp=123)
    assert lean == encode_batch(pairs, base_offset=5, base_timestamp=123, max_timestamp=123)


def test_pairs_batch_refuses_an_empty_batch():
    with pytest.raises(ValueError):
        encode_pairs_batch([], base_offset=0, timestamp=0)
