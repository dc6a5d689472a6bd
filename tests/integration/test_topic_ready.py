"""A topic is usable the moment CreateTopics returns: Metadata names its leader, produce and fetch succeed.

On a real cluster CreateTopics answers when the controller has accepted the
topic, before every broker has its leader: a client that produces or
subscribes at once sees LEADER_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION
for a while (and a consumer with ``auto.offset.reset=latest`` that started in
that gap skips the records produced in it).  Here the registry entry, every
partition's log and its ``partition.metadata`` are in place before the
answer, so each client creates with its own admin API and immediately
produces and consumes, with no retry or wait in between.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient

pytestmark = pytest.mark.integration

PARTITIONS = 3


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{p}".encode() for p in range(PARTITIONS)]


def test_raw_create_then_metadata_on_the_same_connection(broker):
    """The next request on the same socket already sees a leader for every partition."""
    name = _name("ready-raw")
    body = {"topics": [{"name": name, "num_partitions": PARTITIONS, "replication_factor": -1,
                        "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False}
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        assert c.request(19, 5, body).topics[0].error_code == 0
        meta = c.request(3, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": False,
                                "include_topic_authorized_operations": False})
    (topic,) = meta.topics
    assert topic.error_code == 0
    assert sorted(p.partition_index for p in topic.partitions) == list(range(PARTITIONS))
    assert all(p.error_code == 0 and p.leader_id == broker.app.node_id for p in topic.partitions)


def test_kafka_python_admin_create_then_produce_and_consume(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    bs, name = broker.bootstrap_servers, _name("ready-kp")
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bs, retries=0)  # a gap would fail, not be retried away
    try:
        for p, v in enumerate(_values("kp")):
            meta = producer.send(name, value=v, partition=p).get(10)
            assert meta.offset == 0
    finally:
        producer.close(10)
    consumer = KafkaConsumer(bootstrap_servers=bs, consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition(name, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        got = sorted(m.value for _, m in zip(range(PARTITIONS), consumer, strict=False))
    finally:
        consumer.close()
    assert got == sorted(_values("kp"))


async def test_aiokafka_admin_create_then_produce_and_consume(abroker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    bs, name = abroker.bootstrap_servers, _name("ready-aio")
    admin = AIOKafkaAdminClient(bootstrap_servers=bs)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bs)
    await producer.start()
    try:
        for p, v in enumerate(_values("aio")):
            meta = await producer.send_and_wait(name, v, partition=p)
            assert meta.offset == 0
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bs)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(name, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        got: list[bytes] = []
        while len(got) < PARTITIONS:
            batches = await consumer.getmany(timeout_ms=5000)
            assert batches, "nothing fetched"
            got += [m.value for msgs in batches.values() for m in msgs]
    finally:
        await consumer.stop()
    assert sorted(got) == sorted(_values("aio"))


def test_confluent_kafka_admin_create_then_produce_and_consume(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bs, name = broker.bootstrap_servers, _name("ready-ck")
    admin = AdminClient({"bootstrap.servers": bs})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(10)
    errors: list = []
    producer = Producer({"bootstrap.servers": bs, "message.send.max.retries": 0})
    for p, v in enumerate(_values("ck")):
        producer.produce(name, value=v, partition=p,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
    assert producer.flush(10) == 0
    assert errors == []
    consumer = Consumer({"bootstrap.servers": bs, "group.id": _name("ready-ck-g"),
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(name, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []
        for _ in range(50):
            if len(got) == PARTITIONS:
                break
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(_values("ck"))
