"""Reset and a producer that still holds records for a partition the re-created topic lacks
(docs/test-control.md, "Reset between tests"): what each client does, so the docs can say it."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch
from odradek.testing.handle import BrokerHandle

pytestmark = pytest.mark.integration

PRODUCE, PRODUCE_VERSION = 0, 9
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture
def handle():
    with BrokerHandle() as h:  # num.partitions=1: an auto-created topic has one partition
        yield h


def _topic() -> str:
    return f"reset-prod-{uuid.uuid4().hex[:8]}"


def _produce(handle: BrokerHandle, topic: str, partition: int) -> int:
    """One idempotence-free record batch to ``topic``/``partition`` over the wire; its error code."""
    batch = encode_batch([(None, b"v")])
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    with SyncClient(handle.host, handle.port, timeout=30) as c:
        return c.request(PRODUCE, PRODUCE_VERSION, body).responses[0].partition_responses[0].error_code


def test_the_missing_partition_is_unknown_and_the_others_are_written(handle):
    """After a reset the auto-created topic has ``num.partitions`` partitions: a Produce naming a
    partition past them is UNKNOWN_TOPIC_OR_PARTITION (Kafka's answer for a partition that does
    not exist), one naming an existing partition is written."""
    topic = _topic()
    handle.create_topic(topic, partitions=3)
    assert _produce(handle, topic, 2) == 0
    handle.reset()
    assert _produce(handle, topic, 2) == UNKNOWN_TOPIC_OR_PARTITION  # Produce does not create
    assert _produce(handle, topic, 0) == 0  # auto-created, one partition
    assert _produce(handle, topic, 2) == UNKNOWN_TOPIC_OR_PARTITION


def test_kafka_python_expires_the_held_records_and_writes_the_rest(handle):
    """kafka-python (without idempotence): records for the missing partition wait for a leader
    until ``delivery_timeout_ms`` expires them; records for an existing partition are written."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    topic = _topic()
    handle.create_topic(topic, partitions=3)
    producer = KafkaProducer(bootstrap_servers=handle.bootstrap_servers, enable_idempotence=False,
                             delivery_timeout_ms=2000, request_timeout_ms=1500, linger_ms=0)
    try:
        producer.send(topic, b"before", partition=2).get(10)
        handle.reset()
        with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
            producer.send(topic, b"held", partition=2).get(10)
        assert producer.send(topic, b"kept", partition=0).get(10).offset == 0
    finally:
        producer.close(0)


def test_confluent_kafka_fails_the_held_records_at_once(handle):
    """librdkafka: once Metadata shows the partition gone, its records fail with _UNKNOWN_PARTITION;
    the producer goes on writing to the partitions that exist."""
    from confluent_kafka import KafkaError, Producer

    topic = _topic()
    handle.create_topic(topic, partitions=3)
    reports: list = []
    producer = Producer({"bootstrap.servers": handle.bootstrap_servers, "message.timeout.ms": 10000})
    producer.produce(topic, b"before", partition=2, on_delivery=lambda e, m: reports.append(e))
    producer.flush(10)
    handle.reset()
    producer.produce(topic, b"held", partition=2, on_delivery=lambda e, m: reports.append(e))
    producer.flush(10)
    producer.produce(topic, b"kept", partition=0, on_delivery=lambda e, m: reports.append((e, m.offset())))
    producer.flush(10)
    assert reports[0] is None
    assert reports[1].code() == KafkaError._UNKNOWN_PARTITION
    assert reports[2] == (None, 0)


def test_re_creating_the_topic_as_before_lets_held_records_land(handle):
    """The way out: create the topic again with the partitions the producers know, right after
    the reset; even kafka-python's idempotent producer (its default) then writes to it."""
    from kafka import KafkaProducer

    topic = _topic()
    handle.create_topic(topic, partitions=3)
    producer = KafkaProducer(bootstrap_servers=handle.bootstrap_servers, delivery_timeout_ms=5000,
                             request_timeout_ms=2000)
    try:
        producer.send(topic, b"before", partition=2).get(10)
        handle.reset()
        handle.create_topic(topic, partitions=3)
        meta = producer.send(topic, b"held", partition=2).get(10)
        assert (meta.partition, meta.offset) == (2, 0)
    finally:
        producer.close(0)
