"""A minimal Kafka wire client over our own codec, for health checks, tests and benchmarks.

It speaks raw requests (any API, any version) so tests can send exactly the
bytes a scenario needs, including ones real clients never send.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import struct

from ..protocol import headers
from ..protocol.primitives import Reader
from ..protocol.registry import APIS

_SIZE = struct.Struct(">i")


def encode(api_key: int, version: int, correlation_id: int, body: dict,
           client_id: str | None = "odradek-wire") -> bytes:
    spec = APIS[api_key]
    flexible = spec.is_flexible(version)
    payload = spec.request.build(body, version)
    header = {"request_api_key": api_key, "request_api_version": version,
              "correlation_id": correlation_id, "client_id": client_id}
    return headers.encode_request(header, headers.request_header_version(flexible), payload)


def decode(api_key: int, version: int, frame: bytes):
    """(correlation id, body) of a response frame without its size prefix."""
    spec = APIS[api_key]
    hv = headers.response_header_version(api_key, spec.is_flexible(version))
    reader = Reader(frame)
    head = headers.RESPONSE_HEADER.read(reader, hv)
    return head.correlation_id, spec.response.read(reader, version)


class SaslError(ConnectionError):
    """The broker refused the SASL exchange (its error code and message)."""

    def __init__(self, code: int, message: str | None):
        super().__init__(f"SASL error {code}: {message}")
        self.code = code


class SyncClient:
    """Blocking client: one request, one response.

    ``ssl_context`` wraps the socket in TLS (SSL and SASL_SSL listeners);
    ``sasl_plain`` = (user, password) authenticates with SASL/PLAIN
    (SaslHandshake v1, SaslAuthenticate v2) before the first request.
    """

    def __init__(self, host: str, port: int, timeout: float = 5.0, *,
                 ssl_context: ssl.SSLContext | None = None, sasl_plain: tuple[str, str] | None = None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self._ids = itertools.count(1)
        if sasl_plain is not None:
            self.authenticate_plain(*sasl_plain)

    def authenticate_plain(self, user: str, password: str) -> None:
        handshake = self.request(17, 1, {"mechanism": "PLAIN"})
        if handshake.error_code:
            raise SaslError(handshake.error_code, f"mechanisms {handshake.mechanisms}")
        token = b"\0" + user.encode() + b"\0" + password.encode()
        answer = self.request(36, 2, {"auth_bytes": token})
        if answer.error_code:
            raise SaslError(answer.error_code, answer.error_message)

    def _recv_exact(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise ConnectionError("connection closed by broker")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        return self._recv_exact(_SIZE.unpack(self._recv_exact(4))[0])

    def request(self, api_key: int, version: int, body: dict):
        cid = next(self._ids)
        self.send_raw(encode(api_key, version, cid, body))
        got, response = decode(api_key, version, self.recv_frame())
        if got != cid:
            raise ConnectionError(f"correlation id {got} != {cid}")
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncClient:
    """asyncio client that may pipeline requests (responses come back in order)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self._ids = itertools.count(1)

    @classmethod
    async def connect(cls, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None,
                      sasl_plain: tuple[str, str] | None = None) -> AsyncClient:
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context,
                                                       server_hostname=host if ssl_context else None)
        client = cls(reader, writer)
        if sasl_plain is not None:
            user, password = sasl_plain
            handshake = await client.request(17, 1, {"mechanism": "PLAIN"})
            if handshake.error_code:
                raise SaslError(handshake.error_code, f"mechanisms {handshake.mechanisms}")
            answer = await client.request(36, 2, {"auth_bytes": b"\0" + user.encode() + b"\0" + password.encode()})
            if answer.error_code:
                raise SaslError(answer.error_code, answer.error_message)
        return client

    def send(self, api_key: int, version: int, body: dict) -> int:
        cid = next(self._ids)
        self.writer.write(encode(api_key, version, cid, body))
        return cid

    async def recv(self, api_key: int, version: int):
        size = _SIZE.unpack(await self.reader.readexactly(4))[0]
        return decode(api_key, version, await self.reader.readexactly(size))

    async def request(self, api_key: int, version: int, body: dict):
        cid = self.send(api_key, version, body)
        got, response = await self.recv(api_key, version)
        if got != cid:
            raise ConnectionError(f"correlation id {got} != {cid}")
        return response

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass
