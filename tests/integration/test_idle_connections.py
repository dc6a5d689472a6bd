"""connections.max.idle.ms: idle sockets and never-finished frames are closed, busy ones are not.

A broker facing many careless clients must not keep every socket (and every
half-sent frame's buffer) forever; a client that is merely waiting for a
long poll or a rebalance must not lose its connection.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from odradek.broker.config import Config
from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

IDLE_MS = 400


@pytest.fixture(scope="module")
def idle_broker():
    with ThreadedBroker(overrides={"connections.max.idle.ms": IDLE_MS}) as b:
        yield b


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _connect(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=10)


def test_kafkas_default_is_ten_minutes():
    assert Config.load(None, overrides={}, environ={})["connections.max.idle.ms"] == 600000


def test_an_idle_connection_is_closed(idle_broker):
    with _connect(idle_broker) as c:
        assert c.request(18, 0, {}).error_code == 0
        assert _closed_within(c.sock, 10)


def test_a_frame_that_never_completes_is_closed_however_slowly_it_trickles(idle_broker):
    with socket.create_connection(("127.0.0.1", idle_broker.app.endpoint.port)) as s:
        s.sendall(struct.pack(">i", 100_000))  # a frame of 100 kB, sent a byte every 100 ms
        deadline = time.monotonic() + 10
        closed = False
        while not closed and time.monotonic() < deadline:
            try:
                s.sendall(b"\x00")
            except (BrokenPipeError, ConnectionResetError):
                break
            closed = _closed_within(s, 0.1)
        assert closed or time.monotonic() < deadline


def test_a_busy_connection_stays_open(idle_broker):
    with _connect(idle_broker) as c:
        until = time.monotonic() + 3 * IDLE_MS / 1000
        while time.monotonic() < until:
            assert c.request(18, 0, {}).error_code == 0
            time.sleep(IDLE_MS / 4000)


def test_a_long_poll_longer_than_the_idle_time_is_answered(idle_broker):
    with _connect(idle_broker) as c:
        c.request(19, 5, {"topics": [{"name": "idle-poll", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000})
        body = {"replica_id": -1, "max_wait_ms": 3 * IDLE_MS, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                "rack_id": "", "topics": [{"topic": "idle-poll", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}]}]}
        r = c.request(1, 12, body)  # waits 3x the idle time for data that never comes
        assert r.responses[0].partitions[0].error_code == 0


def test_a_partial_header_then_silence_is_closed(idle_broker):
    with socket.create_connection(("127.0.0.1", idle_broker.app.endpoint.port)) as s:
        s.sendall(struct.pack(">i", 1000) + b"\x00")
        assert _closed_within(s, 10)
