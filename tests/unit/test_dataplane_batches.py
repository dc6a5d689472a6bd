"""Produce-side batch validation: Kafka's checks, in Kafka's order (records: test_produce_records.py)."""

from __future__ import annotations

import pytest

from odradek.broker.dataplane.batches import BatchRejected, validate_batch
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import encode_batch


def batch(n: int = 2, key: bytes | None = b"k", **kw) -> bytes:
    return encode_batch([(key, b"value-%d" % i) for i in range(n)], **kw)


def check(data, version=9, max_bytes=1 << 20, compacted=False):
    return validate_batch(data, api_version=version, max_bytes=max_bytes, compacted=compacted)


def refused(data, **kw) -> BatchRejected:
    with pytest.raises(BatchRejected) as info:
        check(data, **kw)
    return info.value


def flip(data: bytes, pos: int, value: int | None = None) -> bytes:
    raw = bytearray(data)
    raw[pos] = raw[pos] ^ 0xFF if value is None else value
    return bytes(raw)


def test_a_valid_batch_gives_its_header():
    h = check(batch(3, producer_id=5, producer_epoch=1, base_sequence=10))
    assert (h.records_count, h.last_offset_delta, h.producer_id, h.base_sequence) == (3, 2, 5, 10)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_codec_passes_from_v7(codec):
    assert check(batch(compression=codec), version=7).compression == codec


def test_zstd_needs_v7():
    assert refused(batch(compression=4), version=6).code == E.UNSUPPORTED_COMPRESSION_TYPE
    assert refused(batch(compression=4), version=3).code == E.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("data, code", [
    (None, E.INVALID_RECORD),
    (b"", E.INVALID_RECORD),
    (b"\x00" * 10, E.CORRUPT_MESSAGE),
    (flip(batch(), 16, 1), E.INVALID_RECORD),  # magic 1 on Produce v3+
    (batch()[:40], E.CORRUPT_MESSAGE),  # header cut short
    (batch()[:-1], E.CORRUPT_MESSAGE),  # batch cut short
    (flip(batch(), -1), E.CORRUPT_MESSAGE),  # CRC
    (batch() + batch(), E.INVALID_RECORD),  # two batches
    (batch() + b"\x00\x01", E.CORRUPT_MESSAGE),  # stray bytes
    (batch(control=True, transactional=True), E.INVALID_RECORD),
    (batch(transactional=True), E.INVALID_RECORD),  # transactional without a producer id
    (batch(producer_id=1, producer_epoch=0), E.INVALID_RECORD),  # idempotent without sequence
    (encode_batch([], last_offset_delta=0), E.INVALID_RECORD),  # no records
    (batch(3, last_offset_delta=5), E.INVALID_RECORD),  # count vs offset delta
], ids=lambda v: "batch" if isinstance(v, bytes) else None)  # batches hold the wall clock (xdist ids)
def test_refusals(data, code):
    err = refused(data)
    assert err.code == code and err.message


def test_size_is_checked_before_the_crc():
    data = flip(batch(10), -1)
    assert refused(data, max_bytes=len(data) - 1).code == E.MESSAGE_TOO_LARGE
    assert check(batch(10), max_bytes=len(batch(10))).records_count == 10


def test_compacted_topics_refuse_keyless_records_with_their_indexes():
    mixed = encode_batch([(b"k", b"a"), (None, b"b"), (b"k2", b"c"), (None, b"d")], compression=1)
    err = refused(mixed, compacted=True)
    assert err.code == E.INVALID_RECORD
    assert [e.batch_index for e in err.record_errors] == [1, 3]
    assert check(mixed, compacted=False).records_count == 4
    assert check(batch(compression=3), compacted=True).records_count == 2
