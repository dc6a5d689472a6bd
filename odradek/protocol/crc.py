"""CRC-32C (Castagnoli), the checksum of RecordBatch v2 and of our snapshot files.

The ``crc32c`` package is loaded on the first checksum, not at import: its
``__init__`` reads its own version through ``importlib.metadata`` (about
15 ms of a cold start), and a fresh broker computes no checksum until its
first append.  Call it as ``crc.crc32c(data)``: after the first call the
module attribute is the C function itself.
"""

from __future__ import annotations


def _first_crc32c(data) -> int:
    """CRC-32C of ``data`` (bytes-like); rebinds ``crc32c`` to the package's function."""
    import crc32c as package  # noqa: PLC0415

    globals()["crc32c"] = package.crc32c
    return package.crc32c(data)


crc32c = _first_crc32c
