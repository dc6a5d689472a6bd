"""Client telemetry (KIP-714) over TCP: what is advertised, confluent-kafka's pushes read back
through the test-control API, and every error code of GetTelemetrySubscriptions/PushTelemetry
as Kafka's ClientMetricsManager answers it (raw frames)."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode as E
from odradek.testing import ThreadedBroker

ZERO = uuid.UUID(int=0)
INTERVAL_MS = 60_000  # long: the raw-frame tests move the broker's clock, never wait
ON = {"client.metrics.default.metrics": "org.apache.kafka.",
      "client.metrics.default.interval.ms": INTERVAL_MS, "telemetry.max.bytes": 4096}


@pytest.fixture(scope="module")
def tbroker():
    with ThreadedBroker(overrides=ON) as b:
        yield b


def client(b) -> SyncClient:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    return SyncClient(host, int(port))


def otlp(**values: float) -> bytes:
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    data = MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    for name, value in values.items():
        metric = scope.metrics.add()
        metric.name = name
        metric.gauge.data_points.add().as_double = value
    return data.SerializeToString()


def get(c: SyncClient, instance: uuid.UUID = ZERO):
    return c.request(71, 0, {"client_instance_id": instance})


def push(c: SyncClient, sub, *, metrics: bytes = b"", codec: int = 0, terminating: bool = False,
         instance: uuid.UUID | None = None, subscription_id: int | None = None) -> int:
    body = {"client_instance_id": sub.client_instance_id if instance is None else instance,
            "subscription_id": sub.subscription_id if subscription_id is None else subscription_id,
            "terminating": terminating, "compression_type": codec, "metrics": metrics}
    return c.request(72, 0, body).error_code


def advertised(b) -> set[int]:
    r = client(b).request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    return {k.api_key for k in r.api_keys}


def test_off_by_default_as_in_kafka(broker):
    assert not {71, 72} & advertised(broker)


def test_advertised_when_on(tbroker):
    assert {71, 72} <= advertised(tbroker)


def test_get_assigns_an_instance_id_and_the_subscription(tbroker):
    r = get(client(tbroker))
    assert r.error_code == 0 and r.client_instance_id != ZERO
    assert r.requested_metrics == ["org.apache.kafka."]
    assert r.push_interval_ms == INTERVAL_MS and r.telemetry_max_bytes == 4096 and r.delta_temporality
    assert r.accepted_compression_types == [compression.ZSTD, compression.LZ4, compression.GZIP,
                                            compression.SNAPPY]
    again = get(client(tbroker), r.client_instance_id)  # another connection, same instance
    assert again.error_code == E.THROTTLING_QUOTA_EXCEEDED  # sooner than the push interval


def test_pushed_metrics_are_decoded_and_kept(tbroker):
    c = client(tbroker)
    sub = get(c)
    payload = compression.compress(compression.GZIP, otlp(**{"org.apache.kafka.x": 1.5}))
    assert push(c, sub, metrics=payload, codec=compression.GZIP) == 0
    assert tbroker.client_metrics()[str(sub.client_instance_id)] == {"org.apache.kafka.x": 1.5}
    captured = tbroker.captured("PushTelemetry")[-1]
    assert captured.body.metrics == payload and captured.ok


def test_push_interval_is_enforced_on_the_brokers_clock(tbroker):
    c = client(tbroker)
    sub = get(c)
    assert push(c, sub) == 0  # right after a Get: always on time
    assert push(c, sub) == E.THROTTLING_QUOTA_EXCEEDED
    tbroker.advance(ms=INTERVAL_MS)
    assert push(c, sub) == 0


def test_terminating_push_is_accepted_early_and_is_the_last(tbroker):
    c = client(tbroker)
    sub = get(c)
    assert push(c, sub) == 0
    assert push(c, sub, terminating=True) == 0
    tbroker.advance(ms=INTERVAL_MS)
    assert push(c, sub) == E.INVALID_REQUEST


def test_unknown_subscription_id_then_an_immediate_get(tbroker):
    c = client(tbroker)
    sub = get(c)
    assert push(c, sub, subscription_id=sub.subscription_id + 1) == E.UNKNOWN_SUBSCRIPTION_ID
    assert get(c, sub.client_instance_id).error_code == 0  # the client re-asks at once (Kafka allows it)


def test_reserved_instance_id_is_an_invalid_request(tbroker):
    c = client(tbroker)
    sub = get(c)
    assert push(c, sub, instance=ZERO) == E.INVALID_REQUEST


def test_unknown_compression_type(tbroker):
    c = client(tbroker)
    sub = get(c)
    assert push(c, sub, metrics=otlp(a=1), codec=9) == E.UNSUPPORTED_COMPRESSION_TYPE
    assert get(c, sub.client_instance_id).error_code == 0


def test_too_large(tbroker):
    c = client(tbroker)
    sub = get(c)
    assert push(c, sub, metrics=b"\0" * 4097) == E.TELEMETRY_TOO_LARGE


@pytest.mark.parametrize("codec, payload", [
    (0, b"\xff\xff\xff\xff"),  # not protobuf
    (0, b"\x0a\x05\x0a\x03"),  # a truncated ResourceMetrics
    (compression.ZSTD, b"not zstd at all"),
    (compression.GZIP, b"\x1f\x8b\x08\x00garbage"),
    (compression.SNAPPY, b"\x82SNAPPY\x00\x00\x00\x00\x01"),
    (compression.LZ4, b"\x04\x22\x4d\x18broken"),
], ids=["junk", "truncated", "zstd", "gzip", "snappy", "lz4"])
def test_malformed_payload_is_invalid_record_never_a_traceback(tbroker, codec, payload):
    c = client(tbroker)
    sub = get(c)
    assert push(c, sub, metrics=payload, codec=codec) == E.INVALID_RECORD
    assert str(sub.client_instance_id) not in tbroker.client_metrics()
    assert get(client(tbroker)).error_code == 0  # the broker still answers


def test_confluent_kafka_pushes_metrics_a_test_reads_back():
    """librdkafka (enable.metrics.push, on by default) gets the subscription, pushes zstd OTLP
    and a terminating push on close; the test reads the metrics back by client id."""
    from confluent_kafka import Producer

    overrides = {"client.metrics.default.metrics": "*", "client.metrics.default.interval.ms": 100}
    with ThreadedBroker(overrides=overrides) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "telemetry-test"})
        p.produce("telemetry", b"x")
        assert p.flush(10) == 0
        deadline = time.monotonic() + 15
        while not b.client_metrics("telemetry-test") and time.monotonic() < deadline:
            p.poll(0.05)
        (metrics,) = b.client_metrics("telemetry-test").values()
        assert "org.apache.kafka.producer.request.latency.avg" in metrics
        assert isinstance(metrics["org.apache.kafka.producer.connection.creation.total"], int)  # a delta
        pushes = b.captured("PushTelemetry", client_id="telemetry-test")
        assert pushes[0].body.compression_type == compression.ZSTD and pushes[0].ok
        del p  # closing pushes once more, terminating
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(i["terminating"] for i in b.client_instances()):
            time.sleep(0.05)
        assert [i["terminating"] for i in b.client_instances()] == [True]


def test_pushed_numbers_are_prometheus_samples():
    from tests.integration.test_metrics import _scrape

    with ThreadedBroker(overrides={**ON, "metrics.port": 0}) as b:
        c = client(b)
        sub = get(c)
        assert push(c, sub, metrics=otlp(**{"org.apache.kafka.y": 7.0})) == 0
        samples = _scrape(b.app.metrics_port)
    name = (f'odradek_client_telemetry{{attributes="",client_id="odradek-wire",'
            f'client_instance_id="{sub.client_instance_id}",metric="org.apache.kafka.y"}}')
    assert samples[name] == 7.0


# --- CLIENT_METRICS config resources (type 16) ------------------------------------------------

CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2


def alter(c: SyncClient, name: str, *ops: tuple[str, int, str | None]) -> int:
    r = c.request(44, 1, {"resources": [{
        "resource_type": CLIENT_METRICS, "resource_name": name,
        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
        "validate_only": False})
    return r.responses[0].error_code


def describe(c: SyncClient, name: str) -> dict[str, tuple[str, int]]:
    r = c.request(32, 4, {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": name,
                                         "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False})
    (result,) = r.results
    assert result.error_code == 0
    return {e.name: (e.value, e.config_source) for e in result.configs}


def test_client_metrics_resources_subscribe_matching_clients(tmp_path):
    with ThreadedBroker(data_dir=tmp_path, overrides={"client.telemetry.enable": "true"}) as b:
        c = client(b)
        assert get(c).requested_metrics == []  # on, but nothing subscribed: push nothing
        assert alter(c, "wire", ("metrics", SET, "org.apache.kafka.a,org.apache.kafka.b"),
                     ("interval.ms", SET, "1000"), ("match", SET, "client_id=odradek-w.*")) == 0
        r = get(c)
        assert (r.requested_metrics, r.push_interval_ms) == (["org.apache.kafka.a", "org.apache.kafka.b"], 1000)
        assert describe(c, "wire")["interval.ms"] == ("1000", 7)  # CLIENT_METRICS_CONFIG
        assert alter(c, "other", ("metrics", SET, "x"), ("match", SET, "client_id=someone-else")) == 0
        assert get(c).requested_metrics == ["org.apache.kafka.a", "org.apache.kafka.b"]
        assert alter(c, "local", ("metrics", SET, "y"), ("match", SET, r"client_source_address=127\.0\.0\.1")) == 0
        assert get(c).requested_metrics == ["org.apache.kafka.a", "org.apache.kafka.b", "y"]
        assert alter(c, "all", ("metrics", SET, "*"), ("interval.ms", SET, "500")) == 0
        r = get(c)
        assert (r.requested_metrics, r.push_interval_ms) == (["*"], 500)
        assert alter(c, "all", ("metrics", DELETE, None), ("interval.ms", DELETE, None)) == 0
        assert describe(c, "all")["metrics"] == ("", 5)  # gone: the defaults
    with ThreadedBroker(data_dir=tmp_path, overrides={"client.telemetry.enable": "true"}) as b:
        assert get(client(b)).push_interval_ms == 1000  # kept across a restart


def test_a_changed_subscription_makes_the_old_id_unknown(tbroker):
    c = client(tbroker)
    sub = get(c)
    assert alter(c, "changing", ("metrics", SET, "org.apache.kafka.z"),
                 ("match", SET, f"client_instance_id={sub.client_instance_id}")) == 0
    try:
        assert push(c, sub) == E.UNKNOWN_SUBSCRIPTION_ID
        again = get(c, sub.client_instance_id)
        assert again.error_code == 0 and again.subscription_id != sub.subscription_id
        assert sorted(again.requested_metrics) == ["org.apache.kafka.", "org.apache.kafka.z"]
    finally:
        alter(c, "changing", ("metrics", DELETE, None), ("match", DELETE, None))


@pytest.mark.parametrize("ops, code", [
    ([("interval.ms", SET, "50")], E.INVALID_CONFIG),
    ([("interval.ms", SET, "soon")], E.INVALID_CONFIG),
    ([("match", SET, "client_id=[")], E.INVALID_CONFIG),
    ([("match", SET, "no_such_selector=x")], E.INVALID_CONFIG),
    ([("match", SET, "client_software_name=x")], E.INVALID_CONFIG),  # Kafka's, not kept here
    ([("colour", SET, "blue")], E.INVALID_REQUEST),
    ([("interval.ms", APPEND, "5")], E.INVALID_CONFIG),
], ids=["interval-low", "interval-text", "regex", "selector", "software-name", "unknown-key", "append-int"])
def test_bad_client_metrics_configs(tbroker, ops, code):
    c = client(tbroker)
    assert alter(c, "bad", *ops) == code
    assert describe(c, "bad")["interval.ms"] == ("300000", 5)
