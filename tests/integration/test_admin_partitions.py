"""Growing topics with real admin clients: CreatePartitions (kafka-python, aiokafka, confluent-kafka).

A user's suite grows a topic and expects Metadata to show the new partitions
at once, producers and consumers to use them, non-growing counts and wrong
assignments to fail with Kafka's error codes without changing anything, and
the new count to survive a restart.  A cooperative-sticky librdkafka consumer
picks up partitions added while it runs (it notices through Metadata, as
with Kafka, and rebalances incrementally).
"""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient

from .group_helpers import kafka_python_subscriber
from .wire_helpers import create_topic

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def partition_count(b, topic: str) -> int:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        md = c.request(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})
    assert md.topics[0].error_code == 0
    return len(md.topics[0].partitions)


def grow_raw(b, version: int, topics: list[dict], validate_only: bool = False) -> list:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(37, version, {"topics": topics, "timeout_ms": 5000, "validate_only": validate_only}).results


# --- kafka-python ----------------------------------------------------------------------------

def test_kafka_python_create_partitions(broker):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.errors import InvalidPartitionsError, InvalidReplicationAssignmentError

    topic = unique("grow-kp")
    create_topic(broker, topic, 4)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_partitions({topic: 6}, validate_only=True)
        assert partition_count(broker, topic) == 4  # validate_only changes nothing
        node = broker.app.node_id
        admin.create_partitions({topic: {"count": 6, "assignments": [[node], [node]]}})
        assert partition_count(broker, topic) == 6  # at once
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 6})
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 3})
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_partitions({topic: {"count": 8, "assignments": [[node]]}})  # two new, one assignment
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_partitions({topic: {"count": 7, "assignments": [[node + 1]]}})  # no such broker
        assert partition_count(broker, topic) == 6
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        p.send(topic, b"on-5", partition=5).get(10)
    finally:
        p.close(10)
    broker.restart()
    assert partition_count(broker, topic) == 6
    assert broker.app.topics.log(topic, 5).log_end_offset == 1


def test_create_partitions_wire_errors(broker):
    """Each version answers Kafka's codes: unknown topic, duplicates, empty/repeated replicas."""
    topic = unique("grow-wire")
    create_topic(broker, topic, 1)
    for v in range(4):
        results = grow_raw(broker, v, [{"name": "no-such-topic", "count": 2, "assignments": None}])
        assert results[0].error_code == 3
    results = grow_raw(broker, 3, [{"name": topic, "count": 2, "assignments": None},
                                   {"name": topic, "count": 3, "assignments": None}])
    assert [r.error_code for r in results] == [42, 42]
    node = broker.app.node_id
    assert grow_raw(broker, 1, [{"name": topic, "count": 2, "assignments": [{"broker_ids": []}]}])[0].error_code == 39
    assert grow_raw(broker, 2, [{"name": topic, "count": 2, "assignments": [{"broker_ids": [node, node]}]}])[0].error_code == 39
    assert grow_raw(broker, 0, [{"name": "__consumer_offsets", "count": 99, "assignments": None}])[0].error_code == 42
    assert partition_count(broker, topic) == 1
    r = grow_raw(broker, 0, [{"name": topic, "count": 3, "assignments": None}])[0]
    assert (r.error_code, r.error_message) == (0, None)
    r = grow_raw(broker, 3, [{"name": topic, "count": 2, "assignments": None}])[0]
    assert r.error_code == 37 and "would not be an increase" in r.error_message
    assert partition_count(broker, topic) == 3


# --- aiokafka ----------------------------------------------------------------------------------

async def test_aiokafka_create_partitions(abroker):
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.errors import InvalidPartitionsError

    topic = unique("grow-aio")
    admin = AIOKafkaAdminClient(bootstrap_servers=abroker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
        await admin.create_partitions({topic: NewPartitions(5)})
        assert abroker.app.topics.partition_count(topic) == 5
        with pytest.raises(InvalidPartitionsError):
            await admin.create_partitions({topic: NewPartitions(4)})
        desc = await admin.describe_topics([topic])
        assert len(desc[0]["partitions"]) == 5
    finally:
        await admin.close()


# --- confluent-kafka ----------------------------------------------------------------------------

def test_confluent_create_partitions(broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = unique("grow-ck")
    create_topic(broker, topic, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 4)], validate_only=True)[topic].result(10)
    assert partition_count(broker, topic) == 2
    admin.create_partitions([NewPartitions(topic, 4, replica_assignment=[[broker.app.node_id]] * 2)])[topic].result(10)
    assert partition_count(broker, topic) == 4
    with pytest.raises(KafkaException) as err:
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    assert err.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    md = admin.list_topics(topic, timeout=10)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2, 3]


def test_confluent_cooperative_consumer_picks_up_new_partitions(broker):
    """A running cooperative-sticky consumer is assigned partitions added under it, and reads them."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = unique("grow-coop")
    create_topic(broker, topic, 2)
    assigned: list[int] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("coop"),
                         "partition.assignment.strategy": "cooperative-sticky",
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})

    def on_assign(c, parts):
        assigned.extend(p.partition for p in parts)
        c.incremental_assign(parts)

    consumer.subscribe([topic], on_assign=on_assign)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "topic.metadata.refresh.interval.ms": 500})
    try:
        seen: set[tuple[int, bytes]] = set()
        _poll_until(consumer, lambda: sorted(assigned) == [0, 1], seen)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
        _poll_until(consumer, lambda: sorted(assigned) == [0, 1, 2, 3], seen)
        for p in range(4):
            producer.produce(topic, value=f"v{p}".encode(), partition=p)
        producer.flush(10)
        _poll_until(consumer, lambda: {p for p, _v in seen} == {0, 1, 2, 3}, seen)
        assert sorted(a.partition for a in consumer.assignment()) == [0, 1, 2, 3]
    finally:
        consumer.close()


def _poll_until(consumer, done, seen: set, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.add((msg.partition(), msg.value()))


def test_kafka_python_group_rebalances_onto_new_partitions(broker):
    """kafka-python's group leader notices the new count in Metadata and rejoins (eager protocol)."""
    from kafka import KafkaAdminClient, KafkaProducer

    topic = unique("grow-kpg")
    create_topic(broker, topic, 1)
    consumer = kafka_python_subscriber(topic, bootstrap_servers=broker.bootstrap_servers, group_id=unique("g"),
                                       auto_offset_reset="earliest", metadata_max_age_ms=500)
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline
            consumer.poll(timeout_ms=200)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        admin.create_partitions({topic: 3})
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        for p in range(3):
            producer.send(topic, f"v{p}".encode(), partition=p)
        producer.flush(10)
        producer.close(10)
        seen: set[int] = set()
        while seen != {0, 1, 2}:
            assert time.monotonic() < deadline, f"read only {sorted(seen)}"
            # the growth rejoin is the one kafka-python 3.0.12 can lose if a poll times out between
            # JoinGroup and SyncGroup (test_kafka_python_rejoin.py): a long poll makes that unlikely
            for records in consumer.poll(timeout_ms=2000).values():
                seen.update(r.partition for r in records)
        assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
    finally:
        consumer.close()
