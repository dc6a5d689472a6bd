"""Client quotas enforced: Produce and Fetch byte rates, the answer's throttle time, KIP-219 muting.

The broker clock is frozen, so the quota windows move only when the test
advances it: the throttle times asserted are the exact ones Kafka's
``ClientQuotaManager`` computes, and a client that waits out each throttle
(advancing the clock instead of sleeping) is held to the quota over 10 s of
broker clock.  confluent-kafka's producer and consumer report the throttles
through ``throttle_cb``.
"""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, Producer

from odradek.broker.wire_client import SyncClient, decode, encode
from odradek.protocol.records import encode_batch, iter_batch_headers
from odradek.testing import ThreadedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PRODUCE, FETCH, METADATA, CREATE, ALTER_QUOTAS = 0, 1, 3, 19, 49
WINDOW_MS = 10_000  # (quota.window.num - 1) x quota.window.size.seconds: Kafka's defaults


@pytest.fixture(scope="module")
def broker():
    with ThreadedBroker() as b:
        yield b


@pytest.fixture(autouse=True)
def _fresh(broker):
    broker.control("reset")
    yield
    broker.control("reset")  # quotas off, clock running again


def _client(b, client_id: str) -> SyncClient:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    c = SyncClient(host, int(port), timeout=15)
    c.client_id = client_id
    return c


def _request(c: SyncClient, api_key: int, version: int, body: dict, cid: int = 1):
    c.send_raw(encode(api_key, version, cid, body, client_id=c.client_id))
    return decode(api_key, version, c.recv_frame())[1]


def _quota(b, client_id: str, **values) -> None:
    with _client(b, "admin") as c:
        r = _request(c, ALTER_QUOTAS, 1, {"entries": [{
            "entity": [{"entity_type": "client-id", "entity_name": client_id}],
            "ops": [{"key": k, "value": float(v), "remove": False} for k, v in values.items()]}],
            "validate_only": False})
        assert r.entries[0].error_code == 0


def _create(b, topic: str) -> None:
    with _client(b, "admin") as c:
        r = _request(c, CREATE, 5, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": -1,
                                                 "assignments": [], "configs": []}],
                                     "timeout_ms": 5000, "validate_only": False})
        assert r.topics[0].error_code == 0


def _produce_body(topic: str, value: bytes) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([(None, value)])}]}]}


def _fetch_body(topic: str, offset: int) -> dict:
    """Two 5-kB batches at most: a throttled fetch answers nothing (Kafka's), so an answer bigger
    than a window's worth of quota would never get through."""
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "log_start_offset": -1,
                                                        "partition_max_bytes": 12_000}]}]}


def test_a_produce_burst_gets_kafkas_throttle_time_and_the_connection_is_muted(broker):
    _create(broker, "burst")
    _quota(broker, "burster", producer_byte_rate=10_000)
    broker.control("freeze_clock")
    with _client(broker, "burster") as c:
        body = _produce_body("burst", b"x" * 200_000)
        size = len(encode(PRODUCE, 9, 1, body, client_id="burster"))
        r = _request(c, PRODUCE, 9, body)
        assert r.responses[0].partition_responses[0].error_code == 0
        # one sample, so the rate is over the 10 s minimum window: (size/10 - bound) / bound * 10 s
        expected = round((size / 10 - 10_000) / 10_000 * WINDOW_MS)
        assert r.throttle_time_ms == expected > 0
        # KIP-219: nothing more is read from this connection until the throttle has passed
        c.send_raw(encode(METADATA, 12, 2, {"topics": None, "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False},
                          client_id="burster"))
        c.sock.settimeout(0.5)
        with pytest.raises(socket.timeout):
            c.sock.recv(1)
        broker.control("advance_clock", ms=expected - 1)
        with pytest.raises(socket.timeout):
            c.sock.recv(1)
        c.sock.settimeout(15)
        broker.control("advance_clock", ms=1)
        assert decode(METADATA, 12, c.recv_frame())[0] == 2
    with _client(broker, "someone-else") as other:  # another client id is not limited
        assert _request(other, PRODUCE, 9, _produce_body("burst", b"y" * 200_000)).throttle_time_ms == 0


@pytest.mark.parametrize("api", ["produce", "fetch"])
def test_a_client_that_waits_out_its_throttles_is_held_to_the_quota(broker, api):
    """Bytes over broker-clock time within 10 % of 20 kB/s.

    Kafka's rate lets a quiet client start with a whole window's worth (10 s x the quota, in the
    first 1-s sample); when that sample leaves the 11-sample window the client may send it again,
    so the rate is measured past the first 11 s, over whole 11-s periods (4 of them)."""
    rate = 20_000
    topic = f"paced-{api}"
    _create(broker, topic)
    chunk = b"z" * 5_000
    if api == "fetch":
        with _client(broker, "loader") as c:
            for _ in range(300):
                assert _request(c, PRODUCE, 9, _produce_body(topic, chunk)).throttle_time_ms == 0
    _quota(broker, "paced", **{"producer_byte_rate" if api == "produce" else "consumer_byte_rate": rate})
    start = broker.control("freeze_clock")
    moved, throttled, offset = 0, 0, 0
    with _client(broker, "paced") as c:
        while (elapsed := broker.control("clock")["now_ms"] - start) < 55_000:
            if elapsed < 11_000:
                moved = throttled = 0  # warming up: the window fills
            if api == "produce":
                body = _produce_body(topic, chunk)
                r = _request(c, PRODUCE, 9, body)
                moved += len(encode(PRODUCE, 9, 1, body, client_id="paced"))
            else:
                r = _request(c, FETCH, 12, _fetch_body(topic, offset), cid=1)
                for t in r.responses:
                    for p in t.partitions:
                        if p.records:
                            moved += len(p.records)
                            offset = max(h.base_offset + h.last_offset_delta + 1
                                         for _, h in iter_batch_headers(p.records))
            if r.throttle_time_ms:
                throttled += 1
                broker.control("advance_clock", ms=r.throttle_time_ms)
            else:
                broker.control("advance_clock", ms=10)
    assert throttled > 0, (moved, offset)
    assert abs(moved - rate * 44) <= 0.1 * rate * 44, (moved, throttled)


def test_confluent_kafka_reports_the_throttles(broker):
    _create(broker, "cfk")
    _quota(broker, "cfk-producer", producer_byte_rate=100_000)
    _quota(broker, "cfk-consumer", consumer_byte_rate=100_000)
    seen: dict[str, list[int]] = {"producer": [], "consumer": []}

    def reporter(who):
        return lambda event: seen[who].append(event.throttle_time)

    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "cfk-producer",
                  "linger.ms": 50, "throttle_cb": reporter("producer")})
    for _ in range(12):
        p.produce("cfk", b"v" * 100_000)
    assert p.flush(60) == 0
    broker.control("advance_clock", seconds=30)  # the producer's throttle ends at once
    p.poll(0.5)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "cfk-consumer",
                  "group.id": "cfk", "auto.offset.reset": "earliest", "throttle_cb": reporter("consumer")})
    c.subscribe(["cfk"])
    got = 0
    for _ in range(120):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
        if got and seen["consumer"]:
            break
        if seen["consumer"]:
            broker.control("advance_clock", seconds=30)
    c.close()
    assert seen["producer"] and max(seen["producer"]) > 0
    assert seen["consumer"] and max(seen["consumer"]) > 0


def test_a_muted_connection_still_refuses_a_frame_over_the_request_limit(broker):
    """The request that gets a connection throttled may arrive in one read with the start of
    the next frame: that frame waits, but its size is checked first, so one announcing more
    than ``socket.request.max.bytes`` closes the connection instead of being buffered."""
    import struct

    _quota(broker, "muted", request_percentage=0.001)  # any request throttles
    broker.control("freeze_clock")
    limit = broker.app.config["socket.request.max.bytes"]
    with _client(broker, "muted") as c:
        metadata = encode(METADATA, 12, 1, {"topics": None, "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False}, client_id="muted")
        c.sock.sendall(metadata + struct.pack(">i", limit + 1) + b"x" * 64)
        c.sock.settimeout(15)
        while c.sock.recv(65536):  # (whatever was answered first) then the close, not a wait
            pass
