"""Compressed records areas are decompressed in one pass, into a buffer sized from their framing.

A near-cap batch used to be decompressed again at each fourfold growth of
its output buffer (about 345 MiB of output for one 250 MiB area); the
framing says how big the output is (zstd content size or block headers,
gzip's ISIZE, lz4's block headers), and a frame that lies still decodes.
"""

from __future__ import annotations

import struct

import cramjam
import pytest

from odradek.broker.dataplane.batches import is_heavy
from odradek.protocol import compression
from odradek.protocol.records import encode_batch

DATA = bytes(range(256)) * (160 << 10)  # 40 MiB: past the first guess of 8x the compressed size


class CountingCodec:
    """A cramjam codec module that counts ``decompress_into`` calls (each a pass over the data)."""

    def __init__(self, codec) -> None:
        self.codec = codec
        self.passes = 0

    def decompress_into(self, data, out):
        self.passes += 1
        return self.codec.decompress_into(data, out)

    def __getattr__(self, name):
        return getattr(self.codec, name)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4, compression.ZSTD])
def test_a_big_area_is_decompressed_in_one_pass(monkeypatch, codec):
    data = DATA
    if codec == compression.ZSTD:  # as Java's ZstdOutputStream writes it: no content size in the frame
        stream = cramjam.zstd.Compressor()
        stream.compress(data)
        packed = bytes(stream.finish())
    else:
        packed = compression.compress(codec, data)
    counters = {name: CountingCodec(getattr(cramjam, name)) for name in ("gzip", "lz4", "zstd")}

    class Cramjam:
        def __getattr__(self, name):
            return counters.get(name) or getattr(cramjam, name)

    monkeypatch.setattr(compression, "cramjam", Cramjam())
    monkeypatch.setattr(compression, "_LZ4_MAX_RATIO", 1 << 30)  # lz4 through the bounded path too
    assert bytes(compression.decompress(codec, packed, copy=False)) == data
    assert sum(c.passes for c in counters.values()) == 1


@pytest.mark.parametrize("isize", [1, 1 << 30])
def test_a_gzip_trailer_that_lies_still_decodes(isize):
    packed = bytearray(compression.compress(compression.GZIP, DATA[:1 << 20]))
    packed[-4:] = struct.pack("<I", isize)  # ISIZE is outside the CRC-32 zlib checks
    try:
        out = compression.decompress(compression.GZIP, bytes(packed), copy=False)
    except compression.CompressionError:
        return  # refused as corrupt is as good: never a wrong answer
    assert bytes(out) == DATA[:1 << 20]


def test_the_framing_decides_what_is_heavy():
    small = encode_batch([(b"k", bytes(1000))], compression=compression.ZSTD)
    big = encode_batch([(b"k", bytes(8 << 20))], compression=compression.ZSTD)
    many = encode_batch([(b"k", b"v")] * 10_001)
    assert (is_heavy(small), is_heavy(big), is_heavy(many)) == (False, True, True)
    garbled = bytearray(small)
    garbled[61:65] = b"\xff\xff\xff\xff"  # the zstd frame header: its size is unknown
    assert is_heavy(bytes(garbled))
