"""The TCP shell: negotiation, pipelining order and hostile frames, over a real socket."""

from __future__ import annotations

import asyncio
import random
import socket
import struct

import pytest

from odradek.broker.wire_client import AsyncClient, SyncClient, decode, encode
from odradek.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port)


def _closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closed the connection (EOF or reset)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_api_versions_every_version_lists_served_apis(broker):
    with _client(broker) as c:
        for v in range(0, 5):
            r = c.request(18, v, {"client_software_name": "t", "client_software_version": "1"})
            assert r.error_code == 0
            served = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
            assert served[18] == (0, 4)
            assert served[3] == (0, 13)  # Metadata v0 as Kafka 3.9 (empty list = all), v13 as 4.2
            assert (served[0], served[1], served[2]) == ((0, 13), (0, 18), (0, 11))
            assert served[10] == (0, 6)


def test_api_versions_unsupported_version_gets_v0_error_body(broker):
    """client-needs gotcha 1: a v0 header and v0 body naming key 18, connection kept."""
    with _client(broker) as c:
        raw = encode(18, 3, 7, {"client_software_name": "x", "client_software_version": "1"})
        raw = raw[:6] + struct.pack(">h", 9) + raw[8:]  # claim ApiVersions v9
        c.send_raw(raw)
        cid, body = decode(18, 0, c.recv_frame())
        assert cid == 7
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
        assert c.request(18, 0, {}).error_code == 0  # same connection still serves


@pytest.mark.parametrize("frame, why", [
    (struct.pack(">i", 200_000_000), "oversized frame"),
    (struct.pack(">i", -5), "negative size"),
    (struct.pack(">ihhi", 8, 999, 0, 1), "unknown api key"),
    (struct.pack(">ihhi", 8, 3, 0, 1), "unsupported Metadata v0"),
    (struct.pack(">ihhi", 8, 3, 12, 1), "truncated Metadata body"),
    (struct.pack(">i", 3) + b"abc", "frame shorter than a header"),
    (struct.pack(">ihhih", 12, 3, 9, 1, -1) + b"\xff\xff", "garbage flexible header"),
])
def test_bad_frames_close_only_that_connection(broker, frame, why):
    with _client(broker) as bad, _client(broker) as good:
        bad.send_raw(frame)
        assert _closed(bad.sock), why
        assert good.request(18, 3, {}).error_code == 0
    with _client(broker) as fresh:
        assert fresh.request(3, 12, {"topics": []}).brokers


def test_truncated_frame_then_disconnect_is_harmless(broker):
    with _client(broker) as c:
        c.send_raw(struct.pack(">i", 100) + b"\x00\x03")
    with _client(broker) as c:
        assert c.request(18, 0, {}).error_code == 0


def test_random_garbage_never_kills_the_broker(broker):
    rng = random.Random(1234)
    for _ in range(40):
        with _client(broker) as c:
            size = rng.randrange(0, 64)
            c.send_raw(struct.pack(">i", size) + rng.randbytes(size))
            c.sock.settimeout(2.0)
            try:
                c.sock.recv(65536)
            except (TimeoutError, ConnectionError):
                pass
    with _client(broker) as c:
        assert c.request(3, 9, {"topics": None}).controller_id == broker.app.node_id


async def test_responses_follow_request_order_when_handlers_finish_out_of_order(abroker):
    """Clients match responses by order: a slow handler must hold back later answers."""
    app = abroker.app
    original = app.handlers.get(60).fn

    async def slow_describe_cluster(ctx, req):
        await asyncio.sleep(0.05 if ctx.correlation_id % 3 == 1 else 0)
        return original(ctx, req)

    app.handlers.register(60, slow_describe_cluster)
    client = await AsyncClient.connect("127.0.0.1", abroker.port)
    try:
        sent = []
        for i in range(30):
            if i % 2:
                sent.append((client.send(60, 1, {"endpoint_type": 1}), 60, 1))
            else:
                sent.append((client.send(18, 3, {}), 18, 3))
        got = [(await client.recv(key, v))[0] for _, key, v in sent]
        assert got == [cid for cid, _, _ in sent]
    finally:
        await client.close()


def test_find_coordinator_single_and_batched(broker):
    ep = broker.app.endpoint
    with _client(broker) as c:
        for v in range(0, 4):
            r = c.request(10, v, {"key": "group-a", "key_type": 0})
            assert (r.error_code, r.node_id, r.host, r.port) == (0, ep.node_id, ep.host, ep.port)
        for v in (4, 5, 6):
            r = c.request(10, v, {"key_type": 0, "coordinator_keys": ["a", "b"]})
            assert [(x.key, x.node_id, x.port, x.error_code) for x in r.coordinators] == [
                ("a", ep.node_id, ep.port, 0), ("b", ep.node_id, ep.port, 0)]


def test_metadata_every_version_names_this_broker(broker):
    ep = broker.app.endpoint
    with _client(broker) as c:
        for v in range(1, 13):
            r = c.request(3, v, {"topics": [{"name": f"nope-{v}"}], "allow_auto_topic_creation": False})
            assert [(b.node_id, b.host, b.port) for b in r.brokers] == [(ep.node_id, ep.host, ep.port)]
            assert r.controller_id == ep.node_id
            if v >= 2:
                assert r.cluster_id == broker.app.cluster_id
            # Metadata v1-3 cannot opt out of auto-creation (the flag is v4+), as in Kafka
            expected = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if v >= 4 else ErrorCode.NONE
            assert [(t.name, t.error_code) for t in r.topics] == [(f"nope-{v}", expected)]


def test_frames_split_across_reads_and_coalesced_in_one_read(broker):
    """A request may arrive a byte at a time, or many requests in one segment: same answers."""
    frames = [encode(18, 3, cid, {"client_software_name": "t", "client_software_version": "1"})
              for cid in range(1, 6)]
    with _client(broker) as c:
        for b in frames[0]:  # one byte per send
            c.sock.sendall(bytes([b]))
        c.sock.sendall(b"".join(frames[1:]) + frames[0][:3])  # four whole frames and the start of one
        c.sock.sendall(frames[0][3:])
        got = []
        for _ in range(6):
            size = struct.unpack(">i", _recv_exactly(c.sock, 4))[0]
            got.append(struct.unpack(">i", _recv_exactly(c.sock, size)[:4])[0])
        assert got == [1, 2, 3, 4, 5, 1]


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    sock.settimeout(5.0)
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "broker closed the connection"
        data += chunk
    return data
