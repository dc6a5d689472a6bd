"""read_committed consumers of kafka-python and confluent-kafka (librdkafka's default isolation)
over TCP: committed records delivered once, aborted ones and markers never, an open transaction
held back until its marker — on transactions written through a real transaction coordinator
(kafka-python's transactional producer)."""

from __future__ import annotations

import time
import uuid

import pytest

from . import txn_versions

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
broker = txn_versions.broker  # every test under transaction.version 1 and 2


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bs: str, name: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def write_transactions(bs: str, topic: str) -> tuple[object, list[bytes]]:
    """Committed, aborted, committed, then one left open; returns (the open producer, committed values)."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, transactional_id=unique("kp-txn"), enable_idempotence=True)
    p.init_transactions()
    committed = []
    for n, commit in enumerate((True, False, True)):
        p.begin_transaction()
        values = [f"t{n}-{i}".encode() for i in range(4)]
        for i, v in enumerate(values):
            p.send(topic, v, partition=i % 2)
        p.flush()
        if commit:
            p.commit_transaction()
            committed += values
        else:
            p.abort_transaction()
    p.begin_transaction()
    for i in range(2):
        p.send(topic, b"open-%d" % i, partition=i)
    p.flush()
    return p, committed


def kp_read_committed(bs: str, topic: str, count: int, settle_s: float = 1.5) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, isolation_level="read_committed")
    try:
        tps = [TopicPartition(topic, p) for p in range(2)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        quiet_until = None
        while time.monotonic() < deadline:
            batch = [m.value for msgs in c.poll(timeout_ms=300).values() for m in msgs]
            got += batch
            if len(got) >= count:
                quiet_until = quiet_until or time.monotonic() + settle_s
                if time.monotonic() > quiet_until:
                    break
        return got
    finally:
        c.close()


def ck_read_committed(bs: str, topic: str, count: int, settle_s: float = 1.5) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": unique("unused"), "enable.auto.commit": False})
    try:  # isolation.level defaults to read_committed in librdkafka
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        quiet_until = None
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.3):
                if m.error() is None:
                    got.append(m.value())
            if len(got) >= count:
                quiet_until = quiet_until or time.monotonic() + settle_s
                if time.monotonic() > quiet_until:
                    break
        return got
    finally:
        c.close()


@pytest.mark.parametrize("read", [kp_read_committed, ck_read_committed], ids=["kafka-python", "confluent-kafka"])
def test_read_committed_consumer_sees_committed_records_only(broker, read):
    bs = broker.bootstrap_servers
    topic = unique("rc")
    create_topic(bs, topic, 2)
    producer, committed = write_transactions(bs, topic)
    try:
        assert sorted(read(bs, topic, len(committed))) == sorted(committed)  # the open one held back
        producer.commit_transaction()
    finally:
        producer.close()
    assert sorted(read(bs, topic, len(committed) + 2)) == sorted(committed + [b"open-0", b"open-1"])
