"""Real clients against the running container: a consumer group's life cycle across a restart
on the same volume, a clean stop (SIGTERM) and a SIGKILL, with nothing acknowledged lost."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.integration.group_helpers import kafka_python_subscriber

pytestmark = [pytest.mark.container, pytest.mark.integration, pytest.mark.timeout(600)]

N = 20
FAST = {"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0", "KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bs: str, topic: str, n: int, start: int = 0) -> None:
    """acks=all: each record is acknowledged before this returns."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, acks="all")
    try:
        for i in range(start, start + n):
            p.send(topic, str(i).encode(), partition=0).get(timeout=30)
    finally:
        p.close()


# --- one life cycle per client: join, consume, commit; restart; resume at the commit ----------------

def kafka_python_round(bs: str, topic: str, group: str, count: int, commit_at: int | None) -> list[int]:
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = kafka_python_subscriber(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=300)
    try:
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=200).values():
                got += [m.offset for m in msgs]
        if commit_at is not None:
            tp = TopicPartition(topic, 0)
            c.commit({tp: OffsetAndMetadata(commit_at, "", -1)})
            assert c.committed(tp) == commit_at
        return got
    finally:
        c.close()


def aiokafka_round(bs: str, topic: str, group: str, count: int, commit_at: int | None) -> list[int]:
    async def run() -> list[int]:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition

        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=300)
        await c.start()
        try:
            got: list[int] = []
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    got += [m.offset for m in msgs]
            if commit_at is not None:
                tp = TopicPartition(topic, 0)
                await c.commit({tp: commit_at})
                assert await c.committed(tp) == commit_at
            return got
        finally:
            await c.stop()

    return asyncio.run(run())


def confluent_round(bs: str, topic: str, group: str, count: int, commit_at: int | None) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 300})
    c.subscribe([topic])
    try:
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.2):
                assert m.error() is None, m.error()
                got.append(m.offset())
        if commit_at is not None:
            c.commit(offsets=[TopicPartition(topic, 0, commit_at)], asynchronous=False)
            assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == commit_at
        return got
    finally:
        c.close()


CLIENTS = {"kafka-python": kafka_python_round, "aiokafka": aiokafka_round, "confluent-kafka": confluent_round}


@pytest.mark.parametrize("client", CLIENTS)
def test_group_life_cycle_survives_a_container_restart(engine, client):
    round_ = CLIENTS[client]
    c = engine.run(mount=engine.volume(), env=FAST)
    c.wait_healthy()
    topic, group = unique("t"), unique("g")
    produce(c.bootstrap, topic, N)
    assert round_(c.bootstrap, topic, group, N, commit_at=12) == list(range(N))
    c.restart()  # SIGTERM, exit 0, start on the same volume and port
    assert round_(c.bootstrap, topic, group, N - 12, commit_at=None) == list(range(12, N))


def test_stop_exits_zero_promptly_and_loses_nothing(engine):
    c = engine.run(mount=engine.volume(), env=FAST)
    c.wait_healthy()
    topic, group = unique("t"), unique("g")
    produce(c.bootstrap, topic, N)
    kafka_python_round(c.bootstrap, topic, group, N, commit_at=N)
    engine("stop", "-t", "30", c.name)
    # exit 0 means the broker finished on SIGTERM itself; the engine's SIGKILL after the
    # 30 s grace would read 137
    assert c.exit_code() == 0, c.logs()[-2000:]
    assert '"broker.stopped"' in c.logs()
    engine("start", c.name)
    c.wait_healthy()
    produce(c.bootstrap, topic, 2, start=N)
    assert kafka_python_round(c.bootstrap, topic, group, 2, commit_at=None) == [N, N + 1]


def test_sigkill_loses_no_acknowledged_commit(engine):
    c = engine.run(mount=engine.volume(), env=FAST)
    c.wait_healthy()
    topic, group = unique("t"), unique("g")
    produce(c.bootstrap, topic, N)
    previous = 0
    for at in (3, 9, 15):  # each commit is acknowledged before the next starts
        got = confluent_round(c.bootstrap, topic, group, N - previous, commit_at=at)
        assert got == list(range(previous, N))
        previous = at
    c.kill_and_start()
    assert confluent_round(c.bootstrap, topic, group, N - 15, commit_at=None) == list(range(15, N))
