"""Produce checks a batch's records as Kafka's LogValidator does, on every topic, compressed or not.

A batch whose CRC is right but whose records cannot be read must never be
stored: consumers would be handed garbage and lookups by time would fail.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.dataplane.batches import BatchRejected, validate_batch
from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import (
    HEADER_SIZE,
    CorruptRecordError,
    decode_batch,
    encode_batch,
    scan_records,
)

_TAIL = struct.Struct(">hiqqqhii")


def forge(area: bytes, codec: int = 0, count: int = 2) -> bytes:
    """A batch with a valid CRC around ``area`` (the records bytes, compressed with ``codec`` or not)."""
    tail = _TAIL.pack(codec, count - 1, 1000, 1000, -1, -1, -1, count) + area
    return struct.pack(">qiibI", 0, len(tail) + 9, -1, 2, crc32c.crc32c(tail)) + tail


def records_area(n: int = 2, codec: int = 0) -> bytes:
    return encode_batch([(b"k%d" % i, b"value") for i in range(n)], compression=codec)[HEADER_SIZE:]


def check(data: bytes, compacted: bool = False):
    return validate_batch(data, api_version=9, max_bytes=1 << 30, compacted=compacted)


def refused(data: bytes, compacted: bool = False) -> BatchRejected:
    with pytest.raises(BatchRejected) as info:
        check(data, compacted)
    return info.value


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("compacted", [False, True])
def test_compressed_garbage_is_corrupt_message_on_every_topic(codec, compacted):
    for garbage in (b"\x00" * 40, bytes(range(64)), b"\xff" * 7, records_area(2, codec)[:-3]):
        assert refused(forge(garbage, codec), compacted).code == E.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_records_that_do_not_parse_are_invalid_record(codec):
    good = records_area(2)
    cases = [
        good + b"\x00",  # bytes left after the records
        good[:-1],  # the last record cut short
        b"\x07" + good[1:],  # a negative record length
        good[:len(good) // 2] + b"\xff" * (len(good) - len(good) // 2),  # the second record is noise
    ]
    for raw in cases:
        area = compression.compress(codec, raw) if codec else raw
        assert refused(forge(area, codec)).code == E.INVALID_RECORD, raw
    # a header claiming more records than the area holds, and fewer
    area = compression.compress(codec, good) if codec else good
    assert refused(forge(area, codec, count=3)).code == E.INVALID_RECORD
    assert refused(forge(area, codec, count=1)).code == E.INVALID_RECORD
    assert check(forge(area, codec, count=2)).records_count == 2


def test_a_zstd_bomb_is_refused_on_a_delete_policy_topic_too(monkeypatch):
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    bomb = encode_batch([(b"k", bytes(2 << 20))], compression=4)
    err = refused(bomb, compacted=False)
    assert err.code == E.CORRUPT_MESSAGE and "more than 1048576 bytes" in err.message


def test_headers_are_checked_too():
    good = encode_batch([(b"k", b"v", (("h", b"x"), ("h2", None)))])
    assert check(good).records_count == 1
    assert check(encode_batch([(b"k", b"v", (("h", b"x"),))], compression=3)).records_count == 1


# --- the walk agrees with the decoder ---------------------------------------------------------

records = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=200)),
                             st.one_of(st.none(), st.binary(max_size=300)),
                             st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
                                      max_size=3).map(tuple)),
                   min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_the_walk_accepts_exactly_what_the_decoder_reads(recs, data):
    batch = encode_batch(recs)
    n = len(recs)
    assert scan_records(batch, HEADER_SIZE, len(batch), n) == [i for i, r in enumerate(recs) if r[0] is None]
    pos = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
    mutated = bytearray(batch)
    mutated[pos] = data.draw(st.integers(0, 255))
    mutated = bytes(mutated)
    try:
        decode_batch(mutated, verify_crc=False)
        decoded = True
    except CorruptRecordError as exc:
        decoded = False
        why = str(exc)
    try:
        scan_records(mutated, HEADER_SIZE, len(mutated), n)
        scanned = True
    except CorruptRecordError:
        scanned = False
    # the walk is never laxer than the decoder; it is stricter only where Kafka is lax
    # (header keys are not checked for UTF-8: Java decodes them with replacement)
    assert decoded <= scanned or not decoded and "UTF-8" in why
    assert scanned <= decoded or "UTF-8" in why
