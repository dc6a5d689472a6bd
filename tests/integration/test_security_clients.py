"""Real clients over TLS and SASL: kafka-python, aiokafka and confluent-kafka produce, consume and
commit over SSL (server verification; client certificates with ssl.client.auth=required),
SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; a wrong
password or an unknown user is refused.

Each broker comes from the testing helper's one argument (``security=``), so these tests
are also what a user's suite would write.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

import pytest

from odradek.testing.handle import BrokerHandle
from tests.integration.group_helpers import kafka_python_subscriber

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MODES = {
    "ssl": "SSL",
    "ssl-client-cert": {"protocol": "SSL", "client_auth": "required"},
    "sasl-plaintext-plain": "SASL_PLAINTEXT",
    "sasl-plaintext-scram-sha-256": {"protocol": "SASL_PLAINTEXT", "mechanism": "SCRAM-SHA-256"},
    "sasl-plaintext-scram-sha-512": {"protocol": "SASL_PLAINTEXT", "mechanism": "SCRAM-SHA-512"},
    "sasl-ssl-plain": "SASL_SSL",
    "sasl-ssl-scram-sha-256": {"protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-256"},
    "sasl-ssl-scram-sha-512": {"protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512"},
}
MESSAGES = 20  # to both partitions alike, so each has a committed offset


@pytest.fixture(scope="module", params=list(MODES))
def secured(request):
    with BrokerHandle(security=MODES[request.param]) as b:
        yield b


def _topic(b) -> str:
    name = f"sec-{uuid.uuid4().hex[:8]}"
    b.create_topic(name, partitions=2)
    return name


def test_kafka_python_produces_consumes_and_commits(secured):
    from kafka import KafkaProducer, TopicPartition

    topic, group = _topic(secured), f"g-{uuid.uuid4().hex[:6]}"
    settings = secured.client.kafka_python()
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap_servers, **settings)
    for i in range(MESSAGES):
        producer.send(topic, f"m{i}".encode(), partition=i % 2)
    producer.flush(timeout=30)
    producer.close(timeout=5)
    consumer = kafka_python_subscriber(topic, bootstrap_servers=secured.bootstrap_servers, group_id=group,
                                       auto_offset_reset="earliest", enable_auto_commit=False, **settings)
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < MESSAGES and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            seen += [r.value for r in records]
    consumer.commit()
    committed = sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in (0, 1))
    consumer.close()
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(MESSAGES))
    assert committed == MESSAGES


def test_aiokafka_produces_consumes_and_commits(secured):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic, group = _topic(secured), f"g-{uuid.uuid4().hex[:6]}"

    async def run() -> tuple[list[bytes], int]:
        producer = AIOKafkaProducer(bootstrap_servers=secured.bootstrap_servers, **secured.client.aiokafka())
        await producer.start()
        try:
            for i in range(MESSAGES):
                await producer.send(topic, f"a{i}".encode(), partition=i % 2)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=secured.bootstrap_servers, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    **secured.client.aiokafka())
        await consumer.start()
        seen: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(seen) < MESSAGES and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    seen += [r.value for r in records]
            await consumer.commit()
            committed = sum([await consumer.committed(TopicPartition(topic, p)) or 0 for p in (0, 1)])
        finally:
            await consumer.stop()
        return seen, committed

    seen, committed = asyncio.run(run())
    assert sorted(seen) == sorted(f"a{i}".encode() for i in range(MESSAGES))
    assert committed == MESSAGES


def test_confluent_kafka_produces_consumes_and_commits(secured):
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic, group = _topic(secured), f"g-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": secured.bootstrap_servers, **secured.client.confluent()}
    producer = Producer(settings)
    for i in range(MESSAGES):
        producer.produce(topic, f"c{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < MESSAGES and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    consumer.close()
    assert sorted(seen) == sorted(f"c{i}".encode() for i in range(MESSAGES))
    assert sum(tp.offset for tp in committed) == MESSAGES


# --- refused credentials ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sasl_ssl():
    with BrokerHandle(security="SASL_SSL") as b:
        yield b


BAD = [(m, u, p) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
       for u, p in (("alice", "wrong"), ("mallory", "whatever"))]


@pytest.mark.parametrize("mechanism, user, password", BAD)
def test_confluent_kafka_reports_an_authentication_error(sasl_ssl, mechanism, user, password):
    from confluent_kafka import KafkaError, Producer

    bad = dataclasses.replace(sasl_ssl.client.using(mechanism), username=user, password=password)
    errors: list = []
    producer = Producer({"bootstrap.servers": sasl_ssl.bootstrap_servers, **bad.confluent(),
                         "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    expected = ("Invalid username or password" if mechanism == "PLAIN"
                else f"invalid credentials with SASL mechanism {mechanism}")
    assert expected in errors[0].str()


@pytest.mark.parametrize("mechanism, user, password", BAD)
def test_aiokafka_cannot_start_with_bad_credentials(sasl_ssl, mechanism, user, password):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    bad = dataclasses.replace(sasl_ssl.client.using(mechanism), username=user, password=password)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=sasl_ssl.bootstrap_servers, **bad.aiokafka())
        try:
            with pytest.raises(KafkaConnectionError):
                await producer.start()
        finally:
            await producer.stop()

    asyncio.run(run())


def test_kafka_python_cannot_bootstrap_with_a_wrong_password(sasl_ssl):
    """kafka-python 3.0.12 retries a refused SASL login until its bootstrap timeout (as against
    Kafka); what matters is that it never gets in."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    bad = dataclasses.replace(sasl_ssl.client, password="wrong")
    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=sasl_ssl.bootstrap_servers, bootstrap_timeout_ms=2000,
                      **bad.kafka_python())


def test_tls_client_without_the_ca_is_refused_by_confluent(sasl_ssl):
    from confluent_kafka import KafkaError, Producer

    settings = {k: v for k, v in sasl_ssl.client.confluent().items() if k != "ssl.ca.location"}
    settings["ssl.ca.location"] = "probe"  # the system store: not the throw-away CA
    errors: list = []
    producer = Producer({"bootstrap.servers": sasl_ssl.bootstrap_servers, **settings, "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def test_scram_user_created_with_the_admin_api_logs_in_after_a_restart():
    """AlterUserScramCredentials over SASL_SSL (as alice), a restart, then the new user's clients."""
    from aiokafka import AIOKafkaProducer
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from kafka import KafkaProducer

    with BrokerHandle(security="SASL_SSL") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers, **b.client.confluent()})
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(mechanism, 8192), b"carol-secret", b"carol-salt")])
            assert futures["carol"].result(10) is None
        b.restart()
        topic = _topic(b)
        carol = dataclasses.replace(b.client, username="carol", password="carol-secret")
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, **carol.using("SCRAM-SHA-512").confluent()})
        producer.produce(topic, b"confluent")
        assert producer.flush(30) == 0
        kp = KafkaProducer(bootstrap_servers=b.bootstrap_servers, **carol.using("SCRAM-SHA-256").kafka_python())
        kp.send(topic, b"kafka-python").get(timeout=30)
        kp.close()

        async def aio() -> None:
            p = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers, **carol.using("SCRAM-SHA-512").aiokafka())
            await p.start()
            try:
                await p.send_and_wait(topic, b"aiokafka")
            finally:
                await p.stop()

        asyncio.run(aio())
        errors: list = []
        wrong = dataclasses.replace(carol.using("SCRAM-SHA-256"), password="nope")
        bad = Producer({"bootstrap.servers": b.bootstrap_servers, **wrong.confluent(), "error_cb": errors.append})
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            bad.poll(0.2)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION


def test_clients_keep_working_across_session_ends_kip_368():
    """With connections.max.reauth.ms, kafka-python and librdkafka re-authenticate on their
    connections; aiokafka (no re-authentication) has its expired connection closed and reconnects."""
    from aiokafka import AIOKafkaProducer
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    with BrokerHandle(security="SASL_SSL", overrides={"connections.max.reauth.ms": "1500"}) as b:
        topic = _topic(b)
        kp = KafkaProducer(bootstrap_servers=b.bootstrap_servers, **b.client.kafka_python())
        cp = Producer({"bootstrap.servers": b.bootstrap_servers, **b.client.confluent()})

        async def aio(deadline: float) -> int:
            p = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers, **b.client.aiokafka())
            await p.start()
            sent = 0
            try:
                while time.monotonic() < deadline:
                    await p.send_and_wait(topic, b"aiokafka")
                    sent += 1
                    await asyncio.sleep(0.05)
            finally:
                await p.stop()
            return sent

        deadline = time.monotonic() + 4
        sent = 0
        while time.monotonic() < deadline:
            kp.send(topic, b"kafka-python").get(timeout=10)
            cp.produce(topic, b"confluent")
            assert cp.flush(10) == 0
            sent += 1
            time.sleep(0.05)
        assert asyncio.run(aio(time.monotonic() + 4)) > 0
        renewed = b.call(lambda app: sum(c.sasl.reauth_started_at is not None
                                         for c in app.server._connections if c.sasl), b.app)
        kp.close()
        assert sent > 0 and renewed >= 2  # kafka-python's and librdkafka's connections
