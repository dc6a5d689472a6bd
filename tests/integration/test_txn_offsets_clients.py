"""``send_offsets_to_transaction`` of real clients: the consumer group's offsets commit with the transaction.

confluent-kafka (librdkafka) and kafka-python each run consume-transform-produce
with a group member's metadata (TxnOffsetCommit v3 carries its member id and
generation: KIP-447's fencing); a committed transaction moves the group's
offsets, an aborted one does not, and a read_committed consumer of the
group (OffsetFetch with require_stable) reads exactly the committed ones.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.integration.group_helpers import kafka_python_subscriber

from . import txn_versions

pytestmark = pytest.mark.integration
broker = txn_versions.broker  # every test under transaction.version 1 and 2


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(10)


def fill(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, f"in-{i}".encode())
    assert p.flush(10) == 0


def consume(consumer, n: int) -> list:
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg)
    assert len(got) == n
    return got


def test_confluent_kafka_consume_transform_produce(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bs = broker.bootstrap_servers
    src, dst, group = _id("in"), _id("out"), _id("g")
    create_topics(bs, src, dst)
    fill(bs, src, 10)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bs, "transactional.id": _id("ck")})
    try:
        consumer.subscribe([src])
        producer.init_transactions(10)
        for batch, commit in ((4, True), (3, False), (3, True)):
            msgs = consume(consumer, batch)
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, m.value().upper())
            position = [TopicPartition(src, 0, msgs[-1].offset() + 1)]
            producer.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), 10)
            if commit:
                producer.commit_transaction(10)
            else:
                producer.abort_transaction(10)
                [tp] = consumer.committed([TopicPartition(src, 0)], 10)
                assert tp.offset == 4  # the aborted offsets never count
                consumer.seek(TopicPartition(src, 0, msgs[0].offset()))  # the next transaction redoes them
        [tp] = consumer.committed([TopicPartition(src, 0)], 10)
        assert tp.offset == 7
    finally:
        consumer.close()
    reader = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed"})
    try:
        [tp] = reader.committed([TopicPartition(src, 0)], 10)
        assert tp.offset == 7
    finally:
        reader.close()
    out = Consumer({"bootstrap.servers": bs, "group.id": _id("r"), "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed"})
    try:
        out.subscribe([dst])
        assert sorted(m.value() for m in consume(out, 7)) == sorted(f"IN-{i}".encode() for i in range(7))
        assert out.poll(1.0) is None  # the aborted transaction's copies are not delivered: exactly once
    finally:
        out.close()


def test_kafka_python_send_offsets_with_group_metadata(broker):
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    bs = broker.bootstrap_servers
    src, dst, group = _id("in"), _id("out"), _id("g")
    create_topics(bs, src, dst)
    fill(bs, src, 6)
    consumer = kafka_python_subscriber(src, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                                       enable_auto_commit=False, isolation_level="read_committed",
                                       session_timeout_ms=6000, heartbeat_interval_ms=500)
    producer = KafkaProducer(bootstrap_servers=bs, transactional_id=_id("kp"))
    tp = TopicPartition(src, 0)
    try:
        producer.init_transactions()
        records: list = []
        deadline = time.monotonic() + 20
        while len(records) < 6 and time.monotonic() < deadline:
            for batch in consumer.poll(500).values():
                records.extend(batch)
        assert len(records) == 6
        for upto, commit in ((4, True), (6, False)):
            producer.begin_transaction()
            producer.send(dst, b"x")
            producer.send_offsets_to_transaction({tp: OffsetAndMetadata(upto, "", -1)}, consumer.group_metadata())
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        assert consumer.committed(tp) == 4
    finally:
        producer.close(5)
        consumer.close()
