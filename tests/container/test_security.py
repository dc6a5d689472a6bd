"""The image configured for SASL_SSL with Kafka's KAFKA_* variables (as in a docker-compose file
written for Kafka's images): the health check probes the TLS port, and a real client produces
and consumes as user alice with the throw-away CA."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.testing.security import PLAIN_MODULE, make_security
from tests.container.engine import free_port

pytestmark = [pytest.mark.container, pytest.mark.integration, pytest.mark.timeout(600)]


def test_sasl_ssl_from_kafka_environment_variables(engine, tmp_path):
    from kafka import KafkaConsumer, KafkaProducer

    certs = tmp_path / "tls"
    _settings, client = make_security("SASL_SSL", certs, password="alice-secret")
    certs.chmod(0o755)
    for f in certs.iterdir():
        f.chmod(0o644)  # the image runs as uid 10001
    port = free_port()
    container = engine.run(inner_port=9093, port=port, advertise=False,
                           binds={str(certs): "/etc/odradek/tls"}, env={
        "KAFKA_LISTENERS": "SASL_SSL://0.0.0.0:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"SASL_SSL://127.0.0.1:{port}",
        "KAFKA_SASL_ENABLED_MECHANISMS": "PLAIN",
        "KAFKA_LISTENER_NAME_SASL__SSL_PLAIN_SASL_JAAS_CONFIG":
            f'{PLAIN_MODULE} required username="admin" password="x" user_alice="alice-secret";',
        "KAFKA_SSL_KEYSTORE_TYPE": "PEM",
        "KAFKA_SSL_KEYSTORE_LOCATION": "/etc/odradek/tls/server.pem",
    })
    container.wait_healthy()
    assert "alice-secret" not in container.logs()
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=container.bootstrap, **client.kafka_python())
    for i in range(10):
        producer.send(topic, str(i).encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=container.bootstrap, auto_offset_reset="earliest",
                             **client.kafka_python())
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=300).values():
            seen += [r.value for r in records]
    consumer.close()
    assert sorted(seen) == sorted(str(i).encode() for i in range(10))
