"""Requests for every served API and version, built from the declarations, for hostile tests.

``sample`` fills every field a version carries (arrays with one element,
nullable fields sometimes null, records fields real batches of every codec),
so a mutation of its bytes exercises each field's decoder; ``seed`` varies
the choices.  Nothing here names an API: the templates come from the
protocol declarations (``protocol.registry``) and the versions from the
broker's handler table, so an API is fuzzed the day it is served.
"""

from __future__ import annotations

import random
import re
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from odradek.protocol import headers
from odradek.protocol.compression import CODEC_NAMES
from odradek.protocol.primitives import ProtocolError, Reader
from odradek.protocol.records import encode_batch
from odradek.protocol.registry import APIS
from odradek.protocol.schema import F

_INTS = {"int8": (-128, 127), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
         "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1)}
_NICE_INTS = (-1, 0, 1, 2, 100, 5000)
CODECS = tuple(CODEC_NAMES)


def _prim(kind: str, rng: random.Random, name: str) -> Any:
    if kind in _INTS:
        lo, hi = _INTS[kind]
        return max(lo, min(hi, rng.choice(_NICE_INTS))) if rng.random() < 0.8 else rng.randint(lo, hi)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return 1.5
    if kind == "uuid":
        return uuid.UUID(int=0) if rng.random() < 0.5 else uuid.UUID(int=rng.getrandbits(128))
    if kind == "string":
        return rng.choice(["t", "g", "fuzz-topic", "", "x" * rng.randint(1, 300)])
    if kind == "bytes":
        return rng.randbytes(rng.randint(0, 24))
    if kind == "records":
        return _records(rng)
    raise ValueError(kind)


def _records(rng: random.Random) -> bytes | None:
    """A records field: null, stray bytes, or a real batch (each codec, sometimes keyless or
    idempotent), so mutations reach the batch checks and the decompressors behind them."""
    roll = rng.random()
    if roll < 0.15:
        return None
    if roll < 0.35:
        return rng.randbytes(rng.randint(0, 80))
    records = [(None if rng.random() < 0.2 else b"k", rng.randbytes(rng.randint(0, 40)))
               for _ in range(rng.randint(1, 3))]
    ids = {"producer_id": 1, "producer_epoch": 0, "base_sequence": 0} if rng.random() < 0.2 else {}
    return encode_batch(records, compression=rng.choice(CODECS), **ids)


def _value(f: F, version: int, rng: random.Random) -> Any:
    if version in f.nullable and rng.random() < 0.25:
        return None
    if f.is_array:
        n = rng.choice([0, 1, 1, 2])
        if f.fields is not None:
            return [sample_fields(f.fields, version, rng) for _ in range(n)]
        return [_prim(f.elem_type, rng, f.name) for _ in range(n)]
    if f.fields is not None:
        return sample_fields(f.fields, version, rng)
    return _prim(f.type, rng, f.name)


def sample_fields(fields: list[F], version: int, rng: random.Random) -> dict:
    return {f.name: _value(f, version, rng) for f in fields if version in f.versions}


def sample(api_key: int, version: int, seed: int = 0) -> dict:
    """A request body for (api_key, version) that encodes."""
    rng = random.Random(f"{api_key}/{version}/{seed}")
    return sample_fields(APIS[api_key].request.fields, version, rng)


def present_error_codes(fields: list[F], obj: Any, version: int) -> list[int]:
    """Every ``error_code`` a decoded message carries at ``version`` (absent fields left out)."""
    out: list[int] = []
    for f in fields:
        if version not in f.versions:
            continue
        value = obj[f.name]
        if f.name == "error_code":
            out.append(value)
        elif f.fields is not None and value is not None:
            for item in value if f.is_array else [value]:
                out += present_error_codes(f.fields, item, version)
    return out


_ERROR_LINE = re.compile(r"level='(error|critical)'|\"level\": \"(error|critical)\"|\[(error|critical)\s*\]")


def error_lines(text: str) -> list[str]:
    """The error-level lines of the broker's log (text or JSON): tracebacks, failed handlers."""
    return [line for line in text.splitlines() if _ERROR_LINE.search(line)]


# --- mutated frames against a live broker ------------------------------------------------------

# Requests a broker may rightly keep unanswered for a while (a long poll, a rebalance), and
# acks=0 Produce, which is never answered: for these, an open connection is enough.
MAY_PARK = {1, 11, 14}
# CreateTopics, CreatePartitions: a fuzzed count of thousands of partitions creates that many
# directories and files before the answer, which takes seconds on a loaded machine (not silence)
MAY_TAKE_SECONDS = {19, 37}


class ServedTable:
    """A broker's served (API, version) table read from its ApiVersions answer: what ``fuzz``
    needs of a handler table, for a broker in another process."""

    def __init__(self, api_keys) -> None:
        self.ranges = {k.api_key: (k.min_version, k.max_version) for k in api_keys}

    def served(self):
        return [(k, lo, hi) for k, (lo, hi) in sorted(self.ranges.items())]

    def get(self, api_key: int):
        r = self.ranges.get(api_key)
        return None if r is None else SimpleNamespace(versions=range(r[0], r[1] + 1))


def served(handlers) -> list[tuple[int, int]]:
    """(api key, version) for every version the broker serves (its ApiVersions answer)."""
    return [(k, v) for k, lo, hi in handlers.served() for v in range(lo, hi + 1)]


def seed_frame(api_key: int, version: int, seed: int, correlation_id: int) -> bytes:
    """A well-formed request frame without its size prefix."""
    payload = APIS[api_key].request.build(sample(api_key, version, seed), version)
    flexible = APIS[api_key].is_flexible(version)
    framed = headers.encode_request({"request_api_key": api_key, "request_api_version": version,
                                     "correlation_id": correlation_id, "client_id": "fuzz"},
                                    headers.request_header_version(flexible), payload)
    return framed[4:]


_PATTERNS = (b"\xff", b"\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00", b"\x00\x00\x7f\xff",
             b"\xff\xff\xff\xfe")


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One to three byte-level mutations, mostly after the 8 bytes naming the API and version."""
    data = bytearray(frame)
    for _ in range(rng.randint(1, 3)):
        lo = 8 if rng.random() < 0.9 and len(data) > 8 else 0
        pos = rng.randint(lo, max(lo, len(data) - 1))
        kind = rng.randrange(5)
        if kind == 0 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:
            pattern = rng.choice(_PATTERNS)
            data[pos:pos + len(pattern)] = pattern
        elif kind == 2:
            del data[pos:]
        elif kind == 3:
            data[pos:pos] = rng.randbytes(rng.randint(1, 16))
        else:
            data += rng.randbytes(rng.randint(1, 32))
    return bytes(data)


def decodes(frame: bytes, handlers) -> tuple[int, int, Any] | None:
    """(api key, version, request) when the broker's own decoder reads ``frame`` and serves it.

    Exactly the server's steps; any exception but the three the server
    treats as a malformed request is a decoder bug and propagates.
    """
    try:
        api_key, version, _cid = headers.peek_request(frame)
    except ValueError:
        return None
    handler = handlers.get(api_key)
    if handler is None or version not in handler.versions:
        return None
    spec = APIS[api_key]
    read_header = headers.REQUEST_HEADER.codec(headers.request_header_version(spec.is_flexible(version)))[0]
    try:
        _header, pos = read_header(frame, 0)
        body, _end = spec.request.codec(version)[0](frame, pos)
    except (ProtocolError, ValueError, UnicodeDecodeError):
        return None
    return api_key, version, body


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def exchange(port: int, frame: bytes, wait: float) -> bytes | str:
    """Send one frame on a fresh connection: the answer frame, "closed" or "silent"."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        try:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            head = _recv_exact(sock, 4)
            if head is None:
                return "closed"
            answer = _recv_exact(sock, struct.unpack(">i", head)[0])
            return "closed" if answer is None else answer
        except TimeoutError:
            return "silent"
        except (ConnectionResetError, BrokenPipeError):
            return "closed"


def check_answer(api_key: int, version: int, correlation_id: int, answer: bytes) -> None:
    """The answer is well formed: our correlation id, a body the response declaration reads whole."""
    spec = APIS[api_key]
    if api_key == headers.API_VERSIONS_KEY and version not in spec.response.valid:
        version = 0
    hv = headers.response_header_version(api_key, spec.is_flexible(version))
    reader = Reader(answer)
    head = headers.RESPONSE_HEADER.read(reader, hv)
    assert head.correlation_id == correlation_id, (api_key, version)
    spec.response.read(reader, version)
    assert reader.pos == len(answer), f"{spec.name} v{version}: {len(answer) - reader.pos} bytes left over"


@dataclass
class FuzzStats:
    sent: int = 0
    answered: int = 0
    refused: int = 0  # not decodable: closed, as Kafka does
    parked: int = 0
    failures: list[str] = field(default_factory=list)
    decodable: set[tuple[int, int]] = field(default_factory=set)  # (API, version) sent decodable at least once


def fuzz(port: int, handlers, rounds: int, seed: int = 0, wait: float = 5.0,
         park_wait: float = 0.2, deadline: float | None = None) -> FuzzStats:
    """``rounds`` mutated frames per served (API, version); every decodable one must be answered."""
    rng = random.Random(seed)
    stats = FuzzStats()
    versions = served(handlers)
    for r in range(rounds):
        for api_key, version in versions:
            if deadline is not None and time.monotonic() > deadline:
                return stats
            cid = rng.randrange(1, 2**31)
            frame = seed_frame(api_key, version, seed * 1000 + r, cid)
            if r % 4:  # every fourth round sends the seeds unmutated: odd but well-formed requests
                frame = mutate(frame, rng)
            stats.sent += 1
            got = decodes(frame, handlers)
            parks = got is not None and (got[0] in MAY_PARK or got[0] == 0 and got[2].acks == 0)
            outcome = exchange(port, frame, park_wait if parks else 6 * wait if api_key in MAY_TAKE_SECONDS else wait)
            if got is None:
                stats.refused += 1
                if isinstance(outcome, bytes):  # the ApiVersions fallback for an unserved version
                    try:
                        check_answer(*headers.peek_request(frame), outcome)
                    except Exception as exc:  # noqa: BLE001 - collected and reported by the test
                        stats.failures.append(f"undecodable frame answered badly: {exc!r}: {frame.hex()}")
                continue
            stats.decodable.add((api_key, version))
            if isinstance(outcome, bytes):
                stats.answered += 1
                try:
                    check_answer(got[0], got[1], headers.peek_request(frame)[2], outcome)
                except Exception as exc:  # noqa: BLE001 - collected and reported by the test
                    stats.failures.append(f"{APIS[api_key].name} v{version}: bad answer: {exc!r}")
            elif parks:
                stats.parked += 1
            else:
                stats.failures.append(f"{APIS[api_key].name} v{version}: decodable request {outcome}: "
                                      f"{frame.hex()}")
    return stats
