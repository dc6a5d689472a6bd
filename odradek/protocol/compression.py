"""Record compression codecs as Kafka frames them (Kafka's ``CompressionType`` and its streams).

cramjam does the byte crunching; this module owns the *framing* Kafka puts
around it, because that is where interoperability breaks:

- snappy: Java clients write the xerial stream (magic, versions, then
  length-prefixed raw blocks); librdkafka and old brokers write bare raw
  snappy.  Both are read; xerial is written, as the Java client does.
- lz4: Kafka readers (Java, kafka-python) only accept frames with
  *independent* blocks, and cramjam's frame encoder links them, so frames
  are written here from raw blocks.  Magic-0 messages carry a descriptor
  checksum computed over the magic bytes too (a kept Kafka bug), which is
  repaired before decoding.
- raw snappy announces its output size up front and cramjam allocates it
  blindly (an unsatisfiable size aborts the process), so the claim is
  checked against snappy's maximum expansion first; gzip, lz4 and zstd
  output is capped (``MAX_DECOMPRESSED_BYTES``: decompression bombs).

Errors are raised as :class:`CompressionError` (a ``ValueError``); the record
codec turns them into ``CorruptRecordError``.
"""

from __future__ import annotations

import mmap
import struct

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

GZIP_LEVEL = 6  # java.util.zip default, Kafka's default gzip level
ZSTD_LEVEL = 3  # Kafka's default compression.zstd.level
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java SnappyOutputStream default
LZ4_BLOCK_SIZE = 64 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_U32BE = struct.Struct(">I")
_U32LE = struct.Struct("<I")

LZ4_MAGIC = b"\x04\x22\x4d\x18"
# FLG 0x60: version 01, independent blocks, no checksums, no content size;
# BD 0x40: 64 KiB blocks; 0x82 = (xxh32(FLG BD) >> 8) & 0xFF.
_LZ4_FRAME_HEADER = LZ4_MAGIC + b"\x60\x40\x82"
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000

# Longest output a raw snappy stream can produce per input byte: a 3-byte
# copy emits at most 64 bytes.
_SNAPPY_MAX_RATIO = 22

# Most a compressed records area (or legacy wrapper) may decompress to.  Areas
# are decompressed whole, and a few KiB of zstd or gzip can claim gigabytes
# (200 MiB of zeros is a 6 KiB zstd frame): without a cap one hostile Produce
# to a compacted topic would take the broker's memory.  Kafka has no such
# limit because it streams records; real batches are at most
# ``max.message.bytes`` compressed and rarely 10x that uncompressed.
MAX_DECOMPRESSED_BYTES = 256 << 20
_FIRST_GUESS_RATIO = 8  # the first output buffer, times the compressed size (at least 4 KiB)
_MAPPED_OUTPUT = 4 << 20  # output buffers from this size up are anonymous mappings
_LZ4_MAX_RATIO = 255  # lz4 cannot expand more: a length byte buys at most 255 bytes of output


class CompressionError(ValueError):
    """Compressed data could not be decoded, or the codec id is unknown."""


# --- snappy -----------------------------------------------------------------

def _snappy_raw_decompress(block: bytes | memoryview) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:  # cramjam raises its own, undocumented types
        raise CompressionError(f"snappy: {exc}") from None
    if size > _SNAPPY_MAX_RATIO * len(block) + 32:
        raise CompressionError(f"snappy block of {len(block)} bytes claims {size} bytes")
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:
        raise CompressionError(f"snappy: {exc}") from None


def snappy_decompress(data: bytes | memoryview) -> bytes:
    """Xerial stream (all blocks) or a bare raw snappy block."""
    data = memoryview(data)
    if data[:8] != XERIAL_MAGIC:
        return _snappy_raw_decompress(data)
    pos, end = 16, len(data)
    if end < pos:
        raise CompressionError("truncated xerial snappy header")
    out = []
    while pos < end:
        if end - pos < 4:
            raise CompressionError("truncated xerial snappy block length")
        (n,) = _U32BE.unpack_from(data, pos)
        pos += 4
        if n > end - pos:
            raise CompressionError("xerial snappy block runs past the end")
        out.append(_snappy_raw_decompress(data[pos:pos + n]))
        pos += n
    return b"".join(out)


def snappy_compress(data: bytes) -> bytes:
    """Xerial framing with 32 KiB blocks, byte-compatible in shape with snappy-java."""
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_U32BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# --- lz4 --------------------------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes) -> int:
    """XXH32 with seed 0 for inputs under 16 bytes (an lz4 frame descriptor is at most 15)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short handles fewer than 16 bytes")
    h = (_P5 + len(data)) & _M32
    p = 0
    while p + 4 <= len(data):
        h = _rotl32((h + _U32LE.unpack_from(data, p)[0] * _P3) & _M32, 17) * _P4 & _M32
        p += 4
    while p < len(data):
        h = _rotl32((h + data[p] * _P5) & _M32, 11) * _P1 & _M32
        p += 1
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    return h ^ (h >> 16)


def _lz4_fix_descriptor_checksum(data: bytes | memoryview) -> bytes:
    """Rewrite the frame-descriptor checksum (HC) to the correct value (magic-0 frames)."""
    if len(data) < 7 or data[:4] != LZ4_MAGIC:
        return bytes(data)
    flg = data[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) <= hc_pos:
        return bytes(data)
    fixed = bytearray(data)
    fixed[hc_pos] = (xxh32_short(bytes(data[4:hc_pos])) >> 8) & 0xFF
    return bytes(fixed)


def lz4_decompress(data: bytes | memoryview, *, broken_checksum: bool = False, hint: int | None = None) -> bytes:
    """LZ4 frame; ``broken_checksum`` accepts magic-0's miscomputed descriptor checksum."""
    if broken_checksum:
        data = _lz4_fix_descriptor_checksum(data)
    if _LZ4_MAX_RATIO * len(data) > MAX_DECOMPRESSED_BYTES:
        return _bounded(cramjam.lz4, "lz4", data, hint=hint)
    try:  # cannot pass the cap: cramjam's own path is faster (by 2x on a 1 MiB batch)
        return bytes(cramjam.lz4.decompress(data))
    except Exception as exc:
        raise CompressionError(f"lz4: {exc}") from None


def _bounded(codec, name: str, data: bytes | memoryview, copy: bool = True,
             hint: int | None = None) -> bytes | bytearray:
    """``codec.decompress(data)`` into at most ``MAX_DECOMPRESSED_BYTES``.

    Into a buffer of the size the framing announces (``hint``, from
    :func:`size_hint`), so a well-formed area costs one pass whatever its
    size; without a hint, or when it was short (a multi-member gzip, a
    lying trailer), the buffer grows fourfold while the output does not fit
    and a bomb stops at the cap.  One buffer lives at a time, and ``copy``
    False returns it cut to size instead of a ``bytes`` copy: a big area
    then costs its size once, not twice.
    """
    limit = MAX_DECOMPRESSED_BYTES
    guess = _FIRST_GUESS_RATIO * len(data) if hint is None else hint + 1  # +1: a short hint fails fast
    size = min(limit, max(1 << 12, guess))
    out = None
    while True:
        out = None  # the last attempt's buffer goes before the next one is made
        out = _output_buffer(size)
        try:
            n = codec.decompress_into(data, out)
        except Exception as exc:  # cramjam raises its own, undocumented types
            if "whole buffer" not in str(exc):  # corrupt, not merely longer than the buffer
                raise CompressionError(f"{name}: {exc}") from None
            if size >= limit:
                raise CompressionError(f"{name}: decompresses to more than {limit} bytes") from None
            size = min(limit, 4 * size)
            continue
        if not copy:
            if type(out) is bytearray:
                del out[n:]
                return out
            return memoryview(out)[:n]
        return bytes(memoryview(out)[:n])


def _output_buffer(size: int) -> bytearray | mmap.mmap:
    """A writable buffer of ``size`` bytes.  A big one is an anonymous mapping: its pages are
    zeroed by the kernel as the decompressor first writes them (with the GIL released), where
    ``bytearray(size)`` would zero them all first while holding the GIL (0.3 s for 256 MiB)."""
    return bytearray(size) if size < _MAPPED_OUTPUT else mmap.mmap(-1, size)


def lz4_compress(data: bytes) -> bytes:
    """LZ4 frame with independent 64 KiB blocks, as Kafka's KafkaLZ4BlockOutputStream writes,
    with lz4's fast compressor: Kafka's at its default level.  Kafka's other levels
    (``compression.lz4.level``) use lz4's high-compression one, which cramjam's block
    compressor does not offer (its ``mode``/``compression`` arguments change nothing), so
    every level compresses as the default does."""
    parts = [_LZ4_FRAME_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), LZ4_BLOCK_SIZE):
        chunk = view[start:start + LZ4_BLOCK_SIZE]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            parts.append(_U32LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BLOCK))
            parts.append(bytes(chunk))
        else:
            parts.append(_U32LE.pack(len(block)))
            parts.append(block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


# --- dispatch ---------------------------------------------------------------

def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """Compress a records area (magic 2) or an inner message set with ``codec``, at ``level``
    (KIP-390's ``compression.<codec>.level``; None or the default: Kafka's default level)."""
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL if level in (None, -1) else level))
    if codec == SNAPPY:
        return snappy_compress(data)
    if codec == LZ4:
        return lz4_compress(data)  # every level as the default (lz4_compress says why)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL if level is None else level))
    if codec == NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview, *, magic: int = 2, copy: bool = True) -> bytes | bytearray:
    """Inverse of :func:`compress`; ``magic`` selects legacy quirks (lz4 on magic 0, no zstd before 2).

    ``copy`` False may return a ``bytearray`` (gzip, zstd): for a reader of
    ints, such as Produce's record walk, it saves a copy of the whole area.
    The output buffer is sized from the framing's :func:`size_hint`.
    """
    hint = size_hint(codec, data, stop_above=MAX_DECOMPRESSED_BYTES) if codec in (GZIP, ZSTD, LZ4) else None
    if codec == GZIP:
        return _bounded(cramjam.gzip, "gzip", data, copy, hint)
    if codec == ZSTD and magic >= 2:
        return _bounded(cramjam.zstd, "zstd", data, copy, hint)
    if codec == SNAPPY:
        return snappy_decompress(data)
    if codec == LZ4:
        return lz4_decompress(data, broken_checksum=magic == 0, hint=hint)
    if codec == NONE:
        return bytes(data)
    raise CompressionError(f"unknown compression codec {codec} for magic {magic}")


# --- sizes announced by the framing -------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # ...0x184D2A5F
_ZSTD_BLOCK_MAX = 128 << 10
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_U64LE = struct.Struct("<Q")


def size_hint(codec: int, data: bytes | memoryview, *, stop_above: int | None = None) -> int | None:
    """The output size ``data``'s framing announces, read without decompressing; None if it does not say.

    Exact for zstd frames that carry their content size, a gzip member's
    ISIZE trailer and snappy's length prefixes; an upper bound for lz4 and
    for zstd frames without a content size (each compressed block yields at
    most its maximum block size).  Hostile data may lie, so the decompressor
    still enforces its cap; the hint only sizes the output buffer and tells
    the broker whether a batch is big enough to be checked off the event
    loop.  Walking block headers stops once the total passes ``stop_above``.
    """
    try:
        if codec == GZIP:
            return _U32LE.unpack_from(data, len(data) - 4)[0] if len(data) >= 18 and data[:2] == b"\x1f\x8b" else None
        if codec == ZSTD:
            return _zstd_size(memoryview(data), stop_above)
        if codec == LZ4:
            return _lz4_size(memoryview(data), stop_above)
        if codec == SNAPPY:
            return _snappy_size(memoryview(data), stop_above)
    except (struct.error, IndexError, ValueError):
        return None
    return len(data) if codec == NONE else None


def _zstd_size(data: memoryview, stop_above: int | None) -> int | None:
    total, pos, end = 0, 0, len(data)
    while pos < end:
        (magic,) = _U32LE.unpack_from(data, pos)
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            return None
        fhd = data[pos + 4]
        single, fcs_flag = fhd >> 5 & 1, fhd >> 6
        pos += 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
        fcs_len = (1 if single else 0, 2, 4, 8)[fcs_flag]
        if fcs_len:
            fcs = int.from_bytes(data[pos:pos + fcs_len], "little") + (256 if fcs_len == 2 else 0)
            pos += fcs_len
        else:
            fcs = None
        if fcs is not None and stop_above is not None and total + fcs > stop_above:
            return total + fcs
        pos, blocks = _zstd_blocks(data, pos, stop_above and stop_above - total)
        total += blocks if fcs is None else fcs
        if pos < 0 or stop_above is not None and total > stop_above:
            return total
        pos += 4 if fhd & 4 else 0  # content checksum
    return total


def _zstd_blocks(data: memoryview, pos: int, stop_above: int | None) -> tuple[int, int]:
    """(position after the frame's last block, most output its blocks yield); -1 once past ``stop_above``."""
    out = 0
    while True:
        head = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        last, kind, size = head & 1, head >> 1 & 3, head >> 3
        if kind == 3:
            raise ValueError("reserved zstd block type")
        out += size if kind < 2 else _ZSTD_BLOCK_MAX
        pos += 3 + (1 if kind == 1 else size)
        if last:
            return pos, out
        if stop_above is not None and out > stop_above:
            return -1, out


def _lz4_size(data: memoryview, stop_above: int | None) -> int | None:
    if bytes(data[:4]) != LZ4_MAGIC:
        return None
    flg, bd = data[4], data[5]
    block_max = _LZ4_BLOCK_MAX.get(bd >> 4 & 7)
    if block_max is None:
        return None
    if flg & 0x08:
        return _U64LE.unpack_from(data, 6)[0]
    pos = 7 + (4 if flg & 0x01 else 0)
    out = 0
    while True:
        (size,) = _U32LE.unpack_from(data, pos)
        if size == 0:
            return out
        raw = size & ~_LZ4_UNCOMPRESSED_BLOCK
        out += raw if size & _LZ4_UNCOMPRESSED_BLOCK else block_max
        if stop_above is not None and out > stop_above:
            return out
        pos += 4 + raw + (4 if flg & 0x10 else 0)


def _snappy_size(data: memoryview, stop_above: int | None) -> int | None:
    if bytes(data[:8]) != XERIAL_MAGIC:
        return int(cramjam.snappy.decompress_raw_len(data))
    pos, out = 16, 0
    while pos < len(data):
        (n,) = _U32BE.unpack_from(data, pos)
        out += int(cramjam.snappy.decompress_raw_len(data[pos + 4:pos + 4 + n]))
        if stop_above is not None and out > stop_above:
            return out
        pos += 4 + n
    return out

