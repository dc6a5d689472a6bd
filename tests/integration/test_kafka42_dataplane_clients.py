"""The data-plane versions real clients negotiate with a broker serving Kafka 4.2's (Produce
0-13, Fetch 0-18), read from the request capture, and that path end to end: confluent-kafka
2.16 (librdkafka) produces at v10 and fetches at v16 by topic id without sessions, and asks
Metadata at v13;
kafka-python fetches at v12 with an incremental fetch session (KIP-227) kept over many polls;
aiokafka keeps its own versions."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.fetch_sessions import ZERO_UUID
from odradek.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.integration


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _fetches(broker, client_prefix: str) -> list:
    return [c for c in broker.captured("Fetch") if (c.client_id or "").startswith(client_prefix)]


def test_confluent_produces_at_v10_fetches_at_v16_by_topic_id_and_asks_metadata_v13(broker):
    from confluent_kafka import Consumer, Producer

    topic = _name("ck42")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "ck42"})
    for i in range(50):
        producer.produce(topic, key=b"k", value=b"v%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("ck42-g"),
                         "client.id": "ck42", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(50)]
    topic_id = broker.app.topics.id_by_name(topic, broker.app.cluster_id)
    produces = [c for c in broker.captured("Produce", topic=topic) if c.client_id == "ck42"]
    assert {c.version for c in produces} == {10} and all(c.ok for c in produces)
    fetches = _fetches(broker, "ck42")
    assert {c.version for c in fetches} == {16}
    assert all(c.body.session_id == 0 and c.body.session_epoch == -1 for c in fetches)  # librdkafka: none
    assert all(t.topic_id == topic_id for c in fetches for t in c.body.topics)
    answered = [c for c in fetches if c.answer is not None]  # the last may be cut short by close()
    assert answered and all(c.answer.error_code == E.NONE for c in answered)
    assert all(t.topic_id == topic_id for c in answered for t in c.answer.responses)
    metadata = [c for c in broker.captured("Metadata") if c.client_id == "ck42"]
    assert metadata and {c.version for c in metadata} == {13}  # KIP-1102's top-level error code
    assert all(c.answer.error_code == E.NONE for c in metadata if c.answer is not None)


def test_kafka_python_consumer_keeps_one_incremental_session_over_many_polls(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _name("kp42")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, client_id="kp42-consumer",
                             enable_auto_commit=False, fetch_max_wait_ms=50)
    try:
        producer.send(topic, partition=0, value=b"first").get(10)
        tps = [TopicPartition(topic, 0)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got: list[bytes] = []
        for round_ in range(20):
            producer.send(topic, partition=0, value=b"r%d" % round_).get(10)
            deadline = time.monotonic() + 10
            while len(got) < round_ + 2 and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend(r.value for r in records)
        assert got == [b"first"] + [b"r%d" % i for i in range(20)]
        for _ in range(3):  # idle: the session's fetches name nothing and are answered nothing
            assert consumer.poll(timeout_ms=300) == {}
    finally:
        consumer.close()
        producer.close()
    fetches = _fetches(broker, "kp42-consumer")
    assert {c.version for c in fetches} == {12}
    answered = [c for c in fetches if c.answer is not None]
    assert all(c.answer.error_code == E.NONE for c in answered)
    sessions = {c.answer.session_id for c in answered} - {0}
    assert len(sessions) == 1  # one session, opened once
    incremental = [c for c in answered if c.body.session_epoch > 0]
    assert len(incremental) >= 15 and max(c.body.session_epoch for c in incremental) >= 15
    # incremental requests name no partition once the session holds it; empty answers when idle
    assert any(not c.body.topics for c in incremental)
    assert any(not c.answer.responses for c in incremental)


async def test_aiokafka_keeps_working_at_its_versions(abroker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _name("aio42")
    producer = AIOKafkaProducer(bootstrap_servers=abroker.bootstrap_servers)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic, b"a%d" % i, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=abroker.bootstrap_servers, client_id="aio42",
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        while len(got) < 20:
            batch = await consumer.getmany(timeout_ms=2000)
            assert batch, "no records within 2 s"
            got.extend(r.value for rs in batch.values() for r in rs)
    finally:
        await consumer.stop()
    assert got == [b"a%d" % i for i in range(20)]
    fetches = _fetches(abroker, "aio42")
    assert fetches and all(c.version < 13 and c.answer.session_id == 0 for c in fetches if c.answer)
    assert all(t.get("topic_id") in (None, ZERO_UUID) for c in fetches for t in c.body.topics)


def test_kafka_python_opens_a_new_session_after_the_broker_lost_its_own(tmp_path):
    """Sessions live in the broker's memory (as Kafka's): after a restart, or a reset, the consumer's
    next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND and it carries on with a new session."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from odradek.testing import ThreadedBroker

    with ThreadedBroker(tmp_path) as broker:
        topic = _name("kp42r")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        producer.send(topic, partition=0, value=b"before").get(10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, client_id="kp42r",
                                 enable_auto_commit=False, fetch_max_wait_ms=50, reconnect_backoff_ms=50)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek_to_beginning()
            got: list[bytes] = []

            def poll_until(n: int) -> None:
                deadline = time.monotonic() + 20
                while len(got) < n and time.monotonic() < deadline:
                    for records in consumer.poll(timeout_ms=200).values():
                        got.extend(r.value for r in records)

            poll_until(1)
            for _ in range(3):
                consumer.poll(timeout_ms=100)  # idle: incremental fetches in the session
            broker.restart()
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            producer.send(topic, partition=0, value=b"after").get(10)
            producer.close()
            poll_until(2)
            assert got == [b"before", b"after"]
            fetches = _fetches(broker, "kp42r")  # the restarted broker's capture
            answered = [c for c in fetches if c.answer is not None]
            # the first fetch after the restart names the lost session; the next one opens a new one
            first, second = answered[:2]
            assert first.body.session_epoch > 0 and (first.answer.error_code, first.answer.session_id) == (
                E.FETCH_SESSION_ID_NOT_FOUND, 0)
            assert (second.body.session_id, second.body.session_epoch) == (0, 0) and second.answer.session_id != 0
        finally:
            consumer.close()


def test_confluent_producer_follows_the_leader_hint_of_an_injected_not_leader(broker):
    """librdkafka reads Produce v10's KIP-951 hint (this node, epoch 0) and retries: the record
    lands once."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = _name("ck42l")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "ck42l",
                         "retry.backoff.ms": 20})
    producer.produce(topic, value=b"warm")
    assert producer.flush(15) == 0  # the topic exists, the leader known
    delivered: list = []
    with broker.fault("Produce", error="NOT_LEADER_OR_FOLLOWER", topic=topic, times=1):
        producer.produce(topic, value=b"once", on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(15) == 0
    assert delivered == [None]
    refused = [c for c in broker.captured("Produce", topic=topic, error="NOT_LEADER_OR_FOLLOWER")
               if c.client_id == "ck42l"]
    assert refused and refused[0].version == 10
    part = refused[0].answer.responses[0].partition_responses[0]
    assert part.current_leader.leader_id == broker.app.node_id
    assert [n.node_id for n in refused[0].answer.node_endpoints] == [broker.app.node_id]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("g")})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 20
        while len(values) < 2 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
    finally:
        consumer.close()
    assert values == [b"warm", b"once"]
