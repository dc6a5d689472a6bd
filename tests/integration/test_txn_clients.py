"""Transactions end to end with real clients over TCP: kafka-python and confluent-kafka.

Each client family separately: a transactional producer commits and aborts,
a second producer with the same id fences the first, offsets are committed
inside a transaction (``send_offsets_to_transaction``), and a
consume-transform-produce loop is seen exactly once by a read_committed
consumer.  What the tests read back goes through the same clients.
"""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient

from . import txn_versions

pytestmark = pytest.mark.integration
broker = txn_versions.broker  # every test under transaction.version 1 and 2


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def describe(broker, tid: str):
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        return c.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0]


def create(broker, topic: str, partitions: int = 1) -> None:
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        r = c.request(19, 5, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": -1,
                                          "assignments": [], "configs": []}],
                              "timeout_ms": 5000, "validate_only": False})
        assert r.topics[0].error_code == 0


# --- kafka-python --------------------------------------------------------------------------

def kp_read_committed(broker, topic: str, expect: int, group: str | None = None,
                      timeout: float = 15.0) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", isolation_level="read_committed",
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500)
            for records in batch.values():
                values.extend(r.value for r in records)
            if len(values) >= expect and not batch:
                break
    finally:
        consumer.close()
    return values


def test_kafka_python_commit_and_abort_seen_by_a_read_committed_consumer(broker):
    from kafka import KafkaProducer

    topic, tid = _id("kp-t"), _id("kp")
    create(broker, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=b"aborted-%d" % i, partition=i % 2)
        producer.abort_transaction()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, value=b"committed-%d" % i, partition=i % 2)
        producer.commit_transaction()
    finally:
        producer.close(5)
    assert sorted(kp_read_committed(broker, topic, 4)) == [b"committed-%d" % i for i in range(4)]
    assert describe(broker, tid).transaction_state == "CompleteCommit"


def test_kafka_python_send_offsets_to_transaction(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, out, tid, group = _id("kp-in"), _id("kp-out"), _id("kp"), _id("kp-g")
    create(broker, topic)
    create(broker, out)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(out, value=b"x")
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(7, "m", -1)}, group)
        producer.abort_transaction()
        assert consumer.committed(tp) is None  # aborted: never committed
        producer.begin_transaction()
        producer.send(out, value=b"y")
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(5, "m", -1)}, group)
        producer.commit_transaction()
        deadline = time.monotonic() + 10
        while consumer.committed(tp) != 5:  # the group's marker is written after EndTxn is answered
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        producer.close(5)
        consumer.close()
    assert kp_read_committed(broker, out, 1) == [b"y"]


def test_kafka_python_a_second_producer_fences_the_first(broker):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    topic, tid = _id("kp-t"), _id("kp")
    create(broker, topic)
    first = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    second = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(topic, value=b"from-first").get(10)
        second.init_transactions()  # aborts the first's open transaction, then takes the id over
        second.begin_transaction()
        second.send(topic, value=b"from-second")
        second.commit_transaction()
        with pytest.raises(KafkaError):
            first.commit_transaction()
    finally:
        first.close(5)
        second.close(5)
    assert kp_read_committed(broker, topic, 1) == [b"from-second"]


# --- confluent-kafka (librdkafka) -------------------------------------------------------------

def ck_read_committed(broker, topic: str, expect: int, timeout: float = 15.0) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _id("ck-read"),
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    idle = 0
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                idle += 1
                if len(values) >= expect and idle >= 2:
                    break
                continue
            if msg.error() is None:
                idle = 0
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def ck_producer(broker, tid: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid,
                     "transaction.timeout.ms": 60000})


def test_confluent_kafka_init_begin_commit_abort(broker):
    topic, tid = _id("ck-t"), _id("ck")
    create(broker, topic, 2)
    producer = ck_producer(broker, tid)
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    producer.abort_transaction(10)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(10)
    assert sorted(ck_read_committed(broker, topic, 4)) == [b"committed-%d" % i for i in range(4)]


def test_confluent_kafka_abort_then_retry_commits_once(broker):
    topic, tid = _id("ck-t"), _id("ck")
    create(broker, topic)
    producer = ck_producer(broker, tid)
    producer.init_transactions(10)
    for attempt in range(3):  # the first two attempts fail and are aborted, the third commits
        producer.begin_transaction()
        producer.produce(topic, value=b"payload")
        producer.flush(10)
        if attempt < 2:
            producer.abort_transaction(10)
        else:
            producer.commit_transaction(10)
    assert ck_read_committed(broker, topic, 1) == [b"payload"]


def test_confluent_kafka_a_second_producer_fences_the_first(broker):
    from confluent_kafka import KafkaException

    topic, tid = _id("ck-t"), _id("ck")
    create(broker, topic)
    first = ck_producer(broker, tid)
    first.init_transactions(10)
    first.begin_transaction()
    first.produce(topic, value=b"from-first")
    first.flush(10)
    second = ck_producer(broker, tid)
    second.init_transactions(10)
    second.begin_transaction()
    second.produce(topic, value=b"from-second")
    second.commit_transaction(10)
    with pytest.raises(KafkaException) as failure:
        first.commit_transaction(10)
    assert failure.value.args[0].fatal()
    assert ck_read_committed(broker, topic, 1) == [b"from-second"]


def test_confluent_kafka_consume_transform_produce_exactly_once(broker):
    """Read from ``source``, write upper-cased to ``sink`` and commit the input offsets in the
    same transaction; one transaction is aborted and redone.  A read_committed consumer of the
    sink sees every input exactly once, and the group's committed offset is the input's end."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    source, sink, group, tid = _id("ck-src"), _id("ck-sink"), _id("ck-g"), _id("ck-eos")
    create(broker, source)
    create(broker, sink)
    inputs = [b"m%02d" % i for i in range(20)]
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in inputs:
        plain.produce(source, value=value)
    plain.flush(10)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe([source])
    producer = ck_producer(broker, tid)
    producer.init_transactions(10)
    done, aborted_once = 0, False
    deadline = time.monotonic() + 30
    try:
        while done < len(inputs):
            assert time.monotonic() < deadline, f"only {done} of {len(inputs)} inputs processed"
            msgs = [m for m in consumer.consume(num_messages=5, timeout=1.0) if m.error() is None]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, value=m.value().upper())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 10)
            if not aborted_once and done >= 5:
                aborted_once = True
                producer.abort_transaction(10)
                # rewind to the last committed position and process those inputs again
                committed = consumer.committed(consumer.assignment(), 10)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                continue
            producer.commit_transaction(10)
            done += len(msgs)
        assert aborted_once
        committed = consumer.committed([TopicPartition(source, 0)], 10)
        assert committed[0].offset == len(inputs)
    finally:
        consumer.close()
    assert ck_read_committed(broker, sink, len(inputs)) == [v.upper() for v in inputs]


# --- timeouts, with the broker's clock moved ---------------------------------------------------

def test_kafka_python_a_timed_out_transaction_is_aborted_and_its_producer_fenced(broker):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    topic, tid = _id("kp-t"), _id("kp")
    create(broker, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid,
                             transaction_timeout_ms=60000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, value=b"late").get(10)
        broker.advance(seconds=75)  # past the timeout and the next sweep: aborted, epoch bumped
        deadline = time.monotonic() + 10
        while describe(broker, tid).transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with pytest.raises(KafkaError):
            producer.commit_transaction()
    finally:
        producer.close(5)
    assert kp_read_committed(broker, topic, 0, timeout=3) == []


def test_confluent_kafka_a_timed_out_transaction_is_aborted_and_the_id_reusable(broker):
    from confluent_kafka import KafkaException

    topic, tid = _id("ck-t"), _id("ck")
    create(broker, topic)
    first = ck_producer(broker, tid)
    first.init_transactions(10)
    first.begin_transaction()
    first.produce(topic, value=b"late")
    first.flush(10)
    broker.advance(seconds=75)
    deadline = time.monotonic() + 10
    while describe(broker, tid).transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with pytest.raises(KafkaException):
        first.commit_transaction(10)
    second = ck_producer(broker, tid)  # the id is taken over by a new producer
    second.init_transactions(10)
    second.begin_transaction()
    second.produce(topic, value=b"on-time")
    second.commit_transaction(10)
    assert ck_read_committed(broker, topic, 1) == [b"on-time"]
