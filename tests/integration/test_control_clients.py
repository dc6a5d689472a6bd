"""What real clients do with injected faults, over TCP: each scenario its own test.

kafka-python and aiokafka consumers recover from NOT_COORDINATOR and
COORDINATOR_LOAD_IN_PROGRESS on OffsetCommit, and from NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE on Heartbeat (the commit lands; after
NOT_COORDINATOR they look the coordinator up again) -- Kafka never answers
a Heartbeat COORDINATOR_LOAD_IN_PROGRESS, so that rule is refused; a
REBALANCE_IN_PROGRESS heartbeat makes an aiokafka group rejoin;
confluent-kafka's idempotent producer retries NOT_ENOUGH_REPLICAS and the
record is written once; a connection closed after a commit was applied
leaves the commit and the retry is harmless; a delay shows in the client's
round trip; after a broker-down window consumers resume from their
committed offsets; capture sees real clients' joins and commits.
"""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.testing import Broker, ThreadedBroker
from tests.integration.group_helpers import (
    FAST_GROUPS,
    await_for,
    create_topic_kafka_python,
    kafka_python_subscriber,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

COORDINATOR_ERRORS = ["NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def fbroker():
    with ThreadedBroker(overrides=FAST_GROUPS) as b:
        yield b


def produce(bs: str, topic: str, n: int, start: int = 0) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, retries=20, retry_backoff_ms=100)
    try:
        for i in range(start, start + n):
            p.send(topic, str(i).encode(), partition=0)
        p.flush(30)
    finally:
        p.close()


def new_topic(bs: str, n: int = 0) -> str:
    topic = unique("ctl")
    create_topic_kafka_python(bs, topic, 1)
    if n:
        produce(bs, topic, n)
    return topic


def kp_consumer(bs: str, topic: str, group: str, **kw):
    return kafka_python_subscriber(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                                   enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=100,
                                   retry_backoff_ms=50, **kw)


def kp_poll_until(c, count: int) -> list:
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=100).values():
            got += msgs
    return got


def committed(b, group: str, topic: str) -> int:
    """The group's committed offset of partition 0, asked with a raw OffsetFetch (no client cache)."""
    from odradek.broker.wire_client import SyncClient

    port = b.app.endpoint.port if b.app else b.broker._port
    with SyncClient("127.0.0.1", port) as c:
        r = c.request(9, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]})
    return r.topics[0].partitions[0].committed_offset


def find_coordinator_count(b, group: str) -> int:
    return len(b.captured("FindCoordinator", group_id=group))


# --- kafka-python: coordinator errors on OffsetCommit and Heartbeat -----------------------------------

@pytest.mark.parametrize("error", COORDINATOR_ERRORS)
def test_kafka_python_commit_recovers_from_coordinator_error(fbroker, error):
    from kafka import TopicPartition

    topic, group = new_topic(fbroker.bootstrap_servers, 5), unique("g")
    c = kp_consumer(fbroker.bootstrap_servers, topic, group)
    try:
        assert len(kp_poll_until(c, 5)) == 5
        looked_up = find_coordinator_count(fbroker, group)
        with fbroker.fault("OffsetCommit", error=error, group_id=group, times=2):
            c.commit()  # sync: retries until the commit lands
        assert committed(fbroker, group, topic) == 5
        assert c.committed(TopicPartition(topic, 0)) == 5
        commits = fbroker.captured("OffsetCommit", group_id=group)
        assert len(commits) >= 3  # two refused, then the one that landed
        if error == "NOT_COORDINATOR":
            assert find_coordinator_count(fbroker, group) > looked_up  # it looked the coordinator up again
    finally:
        c.close()


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"])
def test_kafka_python_heartbeat_recovers_from_coordinator_error(fbroker, error):
    topic, group = new_topic(fbroker.bootstrap_servers, 3), unique("g")
    c = kp_consumer(fbroker.bootstrap_servers, topic, group)
    try:
        assert len(kp_poll_until(c, 3)) == 3
        looked_up = find_coordinator_count(fbroker, group)
        fault = fbroker.fault("Heartbeat", error=error, group_id=group, times=3)
        wait_for(lambda: not fbroker.faults(), what="three refused heartbeats")
        fault.remove()
        before = len(fbroker.captured("Heartbeat", group_id=group))

        def heartbeating() -> bool:
            c.poll(timeout_ms=50)
            return len(fbroker.captured("Heartbeat", group_id=group)) > before + 2
        wait_for(heartbeating, what="heartbeats after the fault")
        c.commit()
        assert committed(fbroker, group, topic) == 3
        assert find_coordinator_count(fbroker, group) > looked_up  # both mark the coordinator dead
    finally:
        c.close()


def test_coordinator_load_in_progress_on_heartbeat_is_refused_and_a_loading_coordinator_still_heartbeats(fbroker):
    """Kafka answers a heartbeat NONE while loading (``GroupCoordinator.handleHeartbeat``), so the
    rule is refused; ``coordinator_unavailable`` with that error fails the group's other requests."""
    with pytest.raises(ValueError, match="COORDINATOR_LOAD_IN_PROGRESS .* not an error Heartbeat can return"):
        fbroker.fault("Heartbeat", error="COORDINATOR_LOAD_IN_PROGRESS")
    topic, group = new_topic(fbroker.bootstrap_servers, 2), unique("g")
    c = kp_consumer(fbroker.bootstrap_servers, topic, group)
    try:
        assert len(kp_poll_until(c, 2)) == 2
        with fbroker.coordinator_unavailable(group, "COORDINATOR_LOAD_IN_PROGRESS", seconds=1.0):
            c.commit()  # retried until the window closes
        assert committed(fbroker, group, topic) == 2
        assert len(fbroker.captured("OffsetCommit", group_id=group)) >= 2  # refused at least once
        beats = fbroker.captured("Heartbeat", group_id=group)
        assert beats and beats[-1].time_ms - beats[0].time_ms > 0  # heartbeats went on meanwhile
    finally:
        c.close()


# --- aiokafka: the same, plus a rebalance on REBALANCE_IN_PROGRESS ------------------------------------

async def aio_consumer(bs: str, topic: str, group: str, **kw):
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=100,
                         retry_backoff_ms=50, **kw)
    await c.start()
    return c


async def aio_poll_until(c, count: int) -> list:
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for msgs in (await c.getmany(timeout_ms=100)).values():
            got += msgs
    return got


async def aio_topic(b, n: int) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = unique("ctl")
    admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    p = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers)
    await p.start()
    try:
        for i in range(n):
            await p.send_and_wait(topic, str(i).encode(), partition=0)
    finally:
        await p.stop()
    return topic


@pytest.mark.parametrize("error", COORDINATOR_ERRORS)
async def test_aiokafka_commit_recovers_from_coordinator_error(error):
    from aiokafka.structs import TopicPartition

    async with Broker(overrides=FAST_GROUPS) as b:
        topic, group = await aio_topic(b, 5), unique("g")
        c = await aio_consumer(b.bootstrap_servers, topic, group)
        try:
            assert len(await aio_poll_until(c, 5)) == 5
            looked_up = find_coordinator_count(b, group)
            with b.fault("OffsetCommit", error=error, group_id=group, times=2):
                await c.commit()
            assert await c.committed(TopicPartition(topic, 0)) == 5
            assert [p.committed_offset for r in b.captured("OffsetCommit", group_id=group)
                    for t in r.body.topics for p in t.partitions][-1] == 5
            assert len(b.captured("OffsetCommit", group_id=group)) >= 3
            if error == "NOT_COORDINATOR":
                assert find_coordinator_count(b, group) > looked_up
        finally:
            await c.stop()


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"])
async def test_aiokafka_heartbeat_recovers_from_coordinator_error(error):
    from aiokafka.structs import TopicPartition

    async with Broker(overrides=FAST_GROUPS) as b:
        topic, group = await aio_topic(b, 3), unique("g")
        c = await aio_consumer(b.bootstrap_servers, topic, group)
        try:
            assert len(await aio_poll_until(c, 3)) == 3
            looked_up = find_coordinator_count(b, group)
            with b.fault("Heartbeat", error=error, group_id=group, times=3):
                await await_for(lambda: not b.faults(), what="three refused heartbeats")
            before = len(b.captured("Heartbeat", group_id=group))
            await await_for(lambda: len(b.captured("Heartbeat", group_id=group)) > before + 2,
                            what="heartbeats after the fault")
            await c.commit()
            assert await c.committed(TopicPartition(topic, 0)) == 3
            assert find_coordinator_count(b, group) > looked_up
        finally:
            await c.stop()


async def test_aiokafka_rebalances_on_rebalance_in_progress_heartbeat():
    from aiokafka import ConsumerRebalanceListener

    assigned: list[set] = []

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            pass

        async def on_partitions_assigned(self, new):
            assigned.append(set(new))

    async with Broker(overrides=FAST_GROUPS) as b:
        topic, group = await aio_topic(b, 1), unique("g")
        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                             session_timeout_ms=3000, heartbeat_interval_ms=100)
        c.subscribe([topic], listener=Listener())
        await c.start()
        try:
            await aio_poll_until(c, 1)
            await await_for(lambda: len(assigned) == 1, what="first assignment")
            joins = len(b.captured("JoinGroup", group_id=group))
            with b.fault("Heartbeat", error="REBALANCE_IN_PROGRESS", group_id=group, times=1):
                await await_for(lambda: len(assigned) == 2, what="a second assignment after the rejoin")
            assert len(b.captured("JoinGroup", group_id=group)) > joins
            assert assigned[1] == assigned[0]
        finally:
            await c.stop()


# --- confluent-kafka: idempotent producer and NOT_ENOUGH_REPLICAS ----------------------------------------

def test_confluent_idempotent_producer_retries_not_enough_replicas_and_writes_once(fbroker):
    from confluent_kafka import Consumer, Producer

    topic = new_topic(fbroker.bootstrap_servers)
    p = Producer({"bootstrap.servers": fbroker.bootstrap_servers, "enable.idempotence": True,
                  "retry.backoff.ms": 50, "linger.ms": 0})
    reports: list = []
    with fbroker.fault("Produce", error="NOT_ENOUGH_REPLICAS", topic=topic, times=2):
        p.produce(topic, b"once", partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        assert p.flush(30) == 0
    assert reports == [(None, 0)]
    assert len(fbroker.captured("Produce", topic=topic)) == 3  # two refused, one written
    c = Consumer({"bootstrap.servers": fbroker.bootstrap_servers, "group.id": unique("g"),
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.subscribe([topic])
    values = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if values:
                    break
                continue
            values.append(m.value())
    finally:
        c.close()
    assert values == [b"once"]


# --- a connection closed after the commit was applied ---------------------------------------------------

def test_kafka_python_commit_whose_answer_is_lost_is_kept_and_the_retry_is_harmless(fbroker):
    from kafka import TopicPartition

    topic, group = new_topic(fbroker.bootstrap_servers, 4), unique("g")
    c = kp_consumer(fbroker.bootstrap_servers, topic, group)
    try:
        assert len(kp_poll_until(c, 4)) == 4
        with fbroker.fault("OffsetCommit", close="after", group_id=group, times=1):
            c.commit()  # the first commit lands but its answer never comes; kafka-python retries
        commits = fbroker.captured("OffsetCommit", group_id=group)
        assert len(commits) == 2
        assert [p.committed_offset for r in commits for t in r.body.topics for p in t.partitions] == [4, 4]
        assert committed(fbroker, group, topic) == 4
        assert c.committed(TopicPartition(topic, 0)) == 4
    finally:
        c.close()


# --- added latency shows in the client's round trip ---------------------------------------------------

def test_kafka_python_sees_added_latency_in_its_round_trip(fbroker):
    from kafka import TopicPartition

    topic, group = new_topic(fbroker.bootstrap_servers, 1), unique("g")
    c = kp_consumer(fbroker.bootstrap_servers, topic, group)
    try:
        kp_poll_until(c, 1)
        c.commit()
        t0 = time.monotonic()
        c.committed(TopicPartition(topic, 0))
        plain = time.monotonic() - t0
        with fbroker.fault("OffsetFetch", delay_ms=800, group_id=group, times=1):
            t0 = time.monotonic()
            assert c.committed(TopicPartition(topic, 0)) == 1
            delayed = time.monotonic() - t0
        assert delayed >= 0.8 > plain
    finally:
        c.close()


# --- broker down, then up -------------------------------------------------------------------------------

def test_after_broker_down_consumers_resume_from_committed_offsets(fbroker):
    bs = fbroker.bootstrap_servers
    topic, group = new_topic(bs, 10), unique("g")
    c = kp_consumer(bs, topic, group)
    try:
        assert [m.value for m in kp_poll_until(c, 10)] == [str(i).encode() for i in range(10)]
        c.commit()
        fbroker.broker_down(1.0)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.2:  # polling while the broker is away: nothing, no crash
            assert not c.poll(timeout_ms=100)
        produce(bs, topic, 5, start=10)  # after the window: the producer connects again
        assert [m.value for m in kp_poll_until(c, 5)] == [str(i).encode() for i in range(10, 15)]
        c.commit()
    finally:
        c.close()
    c = kp_consumer(bs, topic, group)  # a new member of the group starts at the committed offset
    try:
        produce(bs, topic, 1, start=15)
        assert [m.value for m in kp_poll_until(c, 1)] == [b"15"]
    finally:
        c.close()
    assert committed(fbroker, group, topic) == 15


def test_broker_down_refuses_connections_until_it_is_up(fbroker):
    import socket

    fbroker.broker_down(30)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", fbroker.app.endpoint.port), timeout=2).close()
    fbroker.broker_up()
    wait_for(lambda: _connects(fbroker.app.endpoint.port), what="the listener back")


def _connects(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


# --- capture of real clients ----------------------------------------------------------------------------

async def test_capture_shows_an_aiokafka_consumers_join_and_commit():
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async with Broker(overrides=FAST_GROUPS) as b:
        topic, group = await aio_topic(b, 3), unique("g")
        c = await aio_consumer(b.bootstrap_servers, topic, group, client_id="app-1")
        try:
            await aio_poll_until(c, 3)
            await c.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "half")})
        finally:
            await c.stop()
        joins = b.captured("JoinGroup", group_id=group, client_id="app-1")
        assert joins and joins[-1].body.protocol_type == "consumer"
        (commit,) = b.captured("OffsetCommit", group_id=group, topic=topic)
        (part,) = commit.body.topics[0].partitions
        assert (commit.client_id, part.partition_index, part.committed_offset, part.committed_metadata) == \
            ("app-1", 0, 2, "half")
        assert b.captured("LeaveGroup", group_id=group)  # it left the group when it stopped
