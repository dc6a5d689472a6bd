"""Request/response headers and size-prefixed framing."""

from __future__ import annotations

import struct

from .primitives import Reader, Writer
from .schema import F, Message

REQUEST_HEADER = Message("RequestHeader", [
    F("request_api_key", "int16"),
    F("request_api_version", "int16"),
    F("correlation_id", "int32"),
    # client_id keeps the classic encoding even in header v2 (Kafka's one exception)
    F("client_id", "string", "1+", nullable="1+", default=None, flexible="none"),
], valid="0-2", flexible="2+")

RESPONSE_HEADER = Message("ResponseHeader", [
    F("correlation_id", "int32"),
], valid="0-1", flexible="1+")

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")
_PEEK = struct.Struct(">hhi")


def request_header_version(flexible: bool) -> int:
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    """ApiVersions always answers with header v0 so any client can read it."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


def peek_request(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) -- readable in every header version."""
    if len(frame) < 8:
        raise ValueError("request shorter than a header")
    return _PEEK.unpack_from(frame, 0)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def encode_response(correlation_id: int, header_version: int, body: bytes) -> bytes:
    """A size-prefixed response: header + already-encoded body."""
    return b"".join(encode_response_parts(correlation_id, header_version, body))


# size prefix + ResponseHeader v0 (correlation id) and v1 (the same and no tagged fields), in one
# pack each: every answer pays it (checked equal to RESPONSE_HEADER's codec in test_headers)
_FRAMED_HEAD = (struct.Struct(">ii"), struct.Struct(">iiB"))


def encode_response_parts(correlation_id: int, header_version: int, body: bytes) -> tuple[bytes, bytes]:
    """(size prefix + header, body): lets the server hand a large body to the socket uncopied."""
    if header_version:
        return _FRAMED_HEAD[1].pack(len(body) + 5, correlation_id, 0), body
    return _FRAMED_HEAD[0].pack(len(body) + 4, correlation_id), body


def encode_request(header: dict, header_version: int, body: bytes) -> bytes:
    """A size-prefixed request (used by tests, the health check and benchmarks)."""
    w = Writer()
    REQUEST_HEADER.write(w, header, header_version)
    head = w.getvalue()
    return _SIZE.pack(len(head) + len(body)) + head + body


def read_request_header(reader: Reader, header_version: int):
    return REQUEST_HEADER.read(reader, header_version)
