"""Real clients commit, fetch, alter and delete offsets over TCP, and resume after a broker restart.

kafka-python, aiokafka and confluent-kafka each commit synchronously,
asynchronously and by auto-commit; the broker restarts; a new consumer of
the group starts exactly at the committed position.  The admin APIs behave
as against Kafka, including GROUP_SUBSCRIBED_TO_TOPIC, and a committed
leader epoch reads back unchanged.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from odradek.testing import Broker, ThreadedBroker
from tests.conftest import BROKERS
from tests.integration.group_helpers import (
    FAST_GROUPS,
    create_topic_kafka_python,
    kafka_python_subscriber,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

N = 20


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def obroker():
    with ThreadedBroker(overrides=FAST_GROUPS, brokers=BROKERS) as b:
        yield b


def produce(bs: str, topic: str, n: int, start: int = 0) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs)
    try:
        for i in range(start, start + n):
            p.send(topic, str(i).encode(), partition=0)
        p.flush(30)
    finally:
        p.close()


def new_topic(bs: str, partitions: int = 1) -> str:
    topic = unique("off")
    create_topic_kafka_python(bs, topic, partitions)
    return topic


# --- kafka-python -----------------------------------------------------------------------------------

def kp_consumer(bs: str, topic: str, group: str, **kw):
    return kafka_python_subscriber(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                                   session_timeout_ms=3000, heartbeat_interval_ms=300, **kw)


def kp_poll_until(c, count: int) -> list:
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=200).values():
            got += msgs
    return got


def test_kafka_python_sync_async_commit_then_resume_after_restart(obroker):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    bs = obroker.bootstrap_servers
    topic, group = new_topic(bs), unique("g")
    tp = TopicPartition(topic, 0)
    produce(bs, topic, N)
    c = kp_consumer(bs, topic, group, enable_auto_commit=False)
    try:
        assert len(kp_poll_until(c, N)) == N
        c.commit({tp: OffsetAndMetadata(7, "sync", -1)})
        assert c.committed(tp) == 7
        done = threading.Event()
        results = []
        c.commit_async({tp: OffsetAndMetadata(9, "async", -1)},
                       callback=lambda offsets, exc: (results.append(exc), done.set()))
        wait_for(lambda: (c.poll(timeout_ms=1000), done.is_set())[1], what="commit_async callback")
        assert results == [None] and c.committed(tp) == 9
    finally:
        c.close()
    obroker.restart()
    c = kp_consumer(obroker.bootstrap_servers, topic, group, enable_auto_commit=False)
    try:
        got = kp_poll_until(c, N - 9)
        assert [m.offset for m in got] == list(range(9, N))
    finally:
        c.close()


def test_kafka_python_auto_commit_then_resume_after_restart(obroker):
    from kafka import TopicPartition

    bs = obroker.bootstrap_servers
    topic, group = new_topic(bs), unique("g")
    produce(bs, topic, N)
    c = kp_consumer(bs, topic, group, enable_auto_commit=True, auto_commit_interval_ms=200)
    try:
        assert len(kp_poll_until(c, N)) == N
        wait_for(lambda: (c.poll(timeout_ms=1000), c.committed(TopicPartition(topic, 0)) == N)[1],
                 what="auto-commit of the position")
    finally:
        c.close()
    obroker.restart()
    produce(obroker.bootstrap_servers, topic, 5, start=N)
    c = kp_consumer(obroker.bootstrap_servers, topic, group, enable_auto_commit=False)
    try:
        assert [m.offset for m in kp_poll_until(c, 5)] == list(range(N, N + 5))
    finally:
        c.close()


# --- aiokafka ----------------------------------------------------------------------------------------

async def aio_consume(bs: str, topic: str, group: str, count: int, **kw):
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                         session_timeout_ms=3000, heartbeat_interval_ms=300, **kw)
    await c.start()
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for msgs in (await c.getmany(timeout_ms=200)).values():
            got += msgs
    return c, got


async def test_aiokafka_commit_auto_commit_and_resume_after_restart():
    from aiokafka.structs import TopicPartition

    async with Broker(overrides=FAST_GROUPS) as b:
        bs = b.bootstrap_servers
        topic = await asyncio.to_thread(new_topic, bs)
        await asyncio.to_thread(produce, bs, topic, N)
        tp = TopicPartition(topic, 0)
        manual, auto = unique("g"), unique("g")
        c, got = await aio_consume(bs, topic, manual, N, enable_auto_commit=False)
        try:
            assert len(got) == N
            await c.commit({tp: 11})
            assert await c.committed(tp) == 11
        finally:
            await c.stop()
        c, got = await aio_consume(bs, topic, auto, N, enable_auto_commit=True,
                                   auto_commit_interval_ms=200)
        await c.stop()  # commits the consumed position on the way out
        await b.restart()
        bs = b.bootstrap_servers
        c, got = await aio_consume(bs, topic, manual, N - 11, enable_auto_commit=False)
        await c.stop()
        assert [m.offset for m in got] == list(range(11, N))
        await asyncio.to_thread(produce, bs, topic, 3, N)
        c, got = await aio_consume(bs, topic, auto, 3, enable_auto_commit=False)
        await c.stop()
        assert [m.offset for m in got] == [N, N + 1, N + 2]


# --- confluent-kafka ----------------------------------------------------------------------------------

def ck_consumer(bs: str, topic: str, group: str, **conf):
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 3000, "heartbeat.interval.ms": 300, **conf})
    c.subscribe([topic])
    return c


def ck_consume(c, count: int) -> list:
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for m in c.consume(num_messages=100, timeout=0.2):
            assert m.error() is None, m.error()
            got.append(m)
    return got


def test_confluent_sync_async_auto_commit_then_resume_after_restart(obroker):
    from confluent_kafka import TopicPartition

    bs = obroker.bootstrap_servers
    topic, manual, auto = new_topic(bs), unique("g"), unique("g")
    produce(bs, topic, N)
    c = ck_consumer(bs, topic, manual, **{"enable.auto.commit": False})
    try:
        assert len(ck_consume(c, N)) == N
        c.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 5
        c.commit(offsets=[TopicPartition(topic, 0, 13)], asynchronous=True)
        wait_for(lambda: c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 13,
                 what="the asynchronous commit")
    finally:
        c.close()
    c = ck_consumer(bs, topic, auto, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})
    try:
        assert len(ck_consume(c, N)) == N
    finally:
        c.close()  # commits the stored offsets
    obroker.restart()
    bs = obroker.bootstrap_servers
    c = ck_consumer(bs, topic, manual, **{"enable.auto.commit": False})
    try:
        assert [m.offset() for m in ck_consume(c, N - 13)] == list(range(13, N))
    finally:
        c.close()
    produce(bs, topic, 4, start=N)
    c = ck_consumer(bs, topic, auto, **{"enable.auto.commit": False})
    try:
        assert [m.offset() for m in ck_consume(c, 4)] == list(range(N, N + 4))
    finally:
        c.close()


# --- admin APIs -------------------------------------------------------------------------------------------

def test_kafka_python_admin_alter_list_delete(obroker):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import (
        GroupSubscribedToTopicError,
        NoError,
        UnknownMemberIdError,
        UnknownTopicOrPartitionError,
    )
    from kafka.structs import OffsetAndMetadata

    bs = obroker.bootstrap_servers
    topic, other = new_topic(bs, 2), new_topic(bs, 1)
    group = unique("g")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000)
    try:
        result = admin.alter_group_offsets(group, {
            TopicPartition(topic, 0): OffsetAndMetadata(5, "meta", 3),
            TopicPartition(topic, 1): OffsetAndMetadata(6, "", -1),
            TopicPartition(other, 0): OffsetAndMetadata(1, "", -1),
            TopicPartition("no-such-topic", 0): OffsetAndMetadata(1, "", -1)})
        assert result[TopicPartition(topic, 0)] is NoError
        assert result[TopicPartition("no-such-topic", 0)] is UnknownTopicOrPartitionError
        listed = admin.list_group_offsets({group: None})[group]
        assert listed[TopicPartition(topic, 0)] == OffsetAndMetadata(5, "meta", 3)  # epoch unchanged
        assert set(listed) == {TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(other, 0)}
        # an active consumer subscribed to ``topic`` (not to ``other``)
        c = kp_consumer(bs, topic, group, enable_auto_commit=False)
        try:
            wait_for(lambda: (c.poll(timeout_ms=1000), bool(c.assignment()))[1], what="assignment")
            deleted = admin.delete_group_offsets(group, [TopicPartition(topic, 0), TopicPartition(other, 0)])
            assert deleted[TopicPartition(topic, 0)] is GroupSubscribedToTopicError
            assert deleted[TopicPartition(other, 0)] is NoError
            altered = admin.alter_group_offsets(group, {TopicPartition(topic, 1): OffsetAndMetadata(0, "", -1)})
            assert altered[TopicPartition(topic, 1)] is UnknownMemberIdError  # not while members are in
        finally:
            c.close()
        deleted = admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
        assert deleted[TopicPartition(topic, 0)] is NoError
        assert set(admin.list_group_offsets({group: None})[group]) == {TopicPartition(topic, 1)}
    finally:
        admin.close()


def test_confluent_admin_alter_and_list_keep_the_leader_epoch(obroker):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    bs = obroker.bootstrap_servers
    topic, group = new_topic(bs, 2), unique("g")
    admin = AdminClient({"bootstrap.servers": bs})
    request = ConsumerGroupTopicPartitions(group, [
        TopicPartition(topic, 0, 42, leader_epoch=2), TopicPartition(topic, 1, 7, metadata="m")])
    for future in admin.alter_consumer_group_offsets([request]).values():
        future.result(timeout=20)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    (result,) = [f.result(timeout=20) for f in listed.values()]
    by_partition = {tp.partition: tp for tp in result.topic_partitions}
    assert by_partition[0].offset == 42 and by_partition[0].leader_epoch == 2
    assert by_partition[1].offset == 7 and by_partition[1].metadata == "m"
    assert all(tp.error is None for tp in result.topic_partitions)
    # a consumer of the group starts where the admin put it
    produce(bs, topic, 50)
    c = ck_consumer(bs, topic, group, **{"enable.auto.commit": False})
    try:
        got = ck_consume(c, 8)
        assert got and got[0].offset() == 42
    finally:
        c.close()


def test_deleting_a_topic_deletes_its_committed_offsets(obroker):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bs = obroker.bootstrap_servers
    gone, kept, group = new_topic(bs), new_topic(bs), unique("g")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000)
    try:
        admin.alter_group_offsets(group, {TopicPartition(gone, 0): OffsetAndMetadata(3, "", -1),
                                          TopicPartition(kept, 0): OffsetAndMetadata(4, "", -1)})
        admin.delete_topics([gone])
        assert admin.list_group_offsets({group: None})[group] == {
            TopicPartition(kept, 0): OffsetAndMetadata(4, "", -1)}
    finally:
        admin.close()
    obroker.restart()
    admin = KafkaAdminClient(bootstrap_servers=obroker.bootstrap_servers, request_timeout_ms=10000)
    try:
        assert set(admin.list_group_offsets({group: None})[group]) == {TopicPartition(kept, 0)}
    finally:
        admin.close()
