"""Real clients produce and consume through the data plane: kafka-python, aiokafka, confluent-kafka.

Without a group: manual assign, seek_to_beginning/end, offsets_for_times,
compressed batches across client families, and a consumer parked on an
empty topic getting a later message before its fetch deadline.  With a
group (needs the coordinator's APIs): consume exactly once, commit, restart
broker and consumer, resume from the committed offset.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from tests.integration.group_helpers import kafka_python_subscriber

pytestmark = pytest.mark.integration

N = 300
GROUP_APIS = {8, 9, 10, 11, 12, 13, 14}


def create_topic(b, name: str, partitions: int = 3) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        assert c.request(19, 5, body).topics[0].error_code == 0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def payloads(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def needs_groups(b) -> None:
    served = {k for k, _lo, _hi in b.app.handlers.served()}
    if not GROUP_APIS <= served:
        pytest.skip("group coordinator APIs are not served yet")


# --- producers -----------------------------------------------------------------------

def kp_produce(bs: str, topic: str, values: list[bytes], **cfg) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, **cfg)  # idempotent by default (kafka-python 3)
    try:
        futures = [p.send(topic, key=v, value=v) for v in values]
        p.flush(30)
        for f in futures:
            f.get(10)
    finally:
        p.close(10)


async def aio_produce(bs: str, topic: str, values: list[bytes], **cfg) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bs, **cfg)
    await p.start()
    try:
        batch = [await p.send(topic, key=v, value=v) for v in values]
        await asyncio.gather(*batch)
    finally:
        await p.stop()


def ck_produce(bs: str, topic: str, values: list[bytes], **cfg) -> None:
    from confluent_kafka import Producer

    errors = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, **cfg})
    for v in values:
        p.produce(topic, key=v, value=v, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(30) == 0
    assert errors == []


# --- assigned consumers (no group) ------------------------------------------------------

def kp_consume(bs: str, topic: str, partitions: int, count: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                got += [m.value for m in msgs]
        return got
    finally:
        c.close()


async def aio_consume(bs: str, topic: str, partitions: int, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for msgs in (await c.getmany(timeout_ms=500)).values():
                got += [m.value for m in msgs]
        return got
    finally:
        await c.stop()


def ck_consume(bs: str, topic: str, partitions: int, count: int) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": unique("unused"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        return got
    finally:
        c.close()


def assert_exactly(got: list[bytes], expected: list[bytes]) -> None:
    assert len(got) == len(expected), f"{len(got)} messages, expected {len(expected)}"
    assert sorted(got) == sorted(expected)


# --- each family alone, and mixed -------------------------------------------------------

def test_kafka_python_idempotent_produce_then_assigned_consume(broker):
    topic = unique("kp")
    create_topic(broker, topic)
    values = payloads("kp", N)
    kp_produce(broker.bootstrap_servers, topic, values)
    assert_exactly(kp_consume(broker.bootstrap_servers, topic, 3, N), values)


async def test_aiokafka_produce_then_assigned_consume(broker):
    topic = unique("aio")
    create_topic(broker, topic)
    values = payloads("aio", N)
    await aio_produce(broker.bootstrap_servers, topic, values, enable_idempotence=True)
    assert_exactly(await aio_consume(broker.bootstrap_servers, topic, 3, N), values)


def test_confluent_produce_then_assigned_consume(broker):
    topic = unique("ck")
    create_topic(broker, topic)
    values = payloads("ck", N)
    ck_produce(broker.bootstrap_servers, topic, values, **{"enable.idempotence": True})
    assert_exactly(ck_consume(broker.bootstrap_servers, topic, 3, N), values)


def test_producers_auto_create_topics(broker):
    """kafka-python and librdkafka producers ask Metadata to create the topic (num.partitions=1)."""
    for produce_fn, tag in ((kp_produce, "kp"), (ck_produce, "ck")):
        topic = unique(f"auto-{tag}")
        produce_fn(broker.bootstrap_servers, topic, payloads(tag, 10))
        assert_exactly(kp_consume(broker.bootstrap_servers, topic, 1, 10), payloads(tag, 10))


CODECS = ["gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
async def test_compressed_batches_cross_clients(broker, codec):
    """aiokafka and librdkafka write each codec; the other family reads it back."""
    bs = broker.bootstrap_servers
    aio_topic, ck_topic = unique(f"aio-{codec}"), unique(f"ck-{codec}")
    create_topic(broker, aio_topic)
    create_topic(broker, ck_topic)
    values = payloads(codec, 200)
    await aio_produce(bs, aio_topic, values, compression_type=codec)
    await asyncio.to_thread(ck_produce, bs, ck_topic, values, **{"compression.type": codec})
    assert_exactly(await asyncio.to_thread(ck_consume, bs, aio_topic, 3, 200), values)
    assert_exactly(await aio_consume(bs, ck_topic, 3, 200), values)


async def test_gzip_from_kafka_python_read_by_everyone(broker):
    """kafka-python ships only gzip (snappy/lz4/zstd need extra packages it does not depend on)."""
    bs = broker.bootstrap_servers
    topic = unique("kp-gzip")
    create_topic(broker, topic)
    values = payloads("gz", 200)
    await asyncio.to_thread(kp_produce, bs, topic, values, compression_type="gzip")
    assert_exactly(await aio_consume(bs, topic, 3, 200), values)
    assert_exactly(await asyncio.to_thread(ck_consume, bs, topic, 3, 200), values)
    assert_exactly(await asyncio.to_thread(kp_consume, bs, topic, 3, 200), values)


# --- positions: seek_to_beginning/end, offsets_for_times ----------------------------------

BASE_TS = 1_600_000_000_000


def test_kafka_python_positions_and_offsets_for_times(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique("kp-pos")
    create_topic(broker, topic, 1)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(10):
        p.send(topic, value=b"%d" % i, timestamp_ms=BASE_TS + i * 1000)
    p.flush()
    p.close()
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    try:
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.position(tp) == 10
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        found = c.offsets_for_times({tp: BASE_TS + 4500})[tp]
        assert (found.offset, found.timestamp) == (5, BASE_TS + 5000)
        assert c.offsets_for_times({tp: BASE_TS + 99_000})[tp] is None
        assert (c.beginning_offsets([tp])[tp], c.end_offsets([tp])[tp]) == (0, 10)
        c.seek(tp, found.offset)
        first = next(m for msgs in [c.poll(timeout_ms=5000)] for m in msgs.get(tp, []))
        assert first.offset == 5 and first.value == b"5"
    finally:
        c.close()


async def test_aiokafka_positions_and_offsets_for_times(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = unique("aio-pos")
    create_topic(broker, topic, 1)
    p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await p.start()
    for i in range(10):
        await p.send_and_wait(topic, b"%d" % i, timestamp_ms=BASE_TS + i * 1000)
    await p.stop()
    tp = TopicPartition(topic, 0)
    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    await c.start()
    try:
        c.assign([tp])
        await c.seek_to_end(tp)
        assert await c.position(tp) == 10
        await c.seek_to_beginning(tp)
        assert await c.position(tp) == 0
        found = (await c.offsets_for_times({tp: BASE_TS + 4500}))[tp]
        assert (found.offset, found.timestamp) == (5, BASE_TS + 5000)
        assert (await c.offsets_for_times({tp: BASE_TS + 99_000}))[tp] is None
        assert (await c.beginning_offsets([tp]), await c.end_offsets([tp])) == ({tp: 0}, {tp: 10})
        c.seek(tp, found.offset)
        msg = await asyncio.wait_for(c.getone(), 10)
        assert (msg.offset, msg.value) == (5, b"5")
    finally:
        await c.stop()


def test_confluent_positions_and_offsets_for_times(broker):
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    topic = unique("ck-pos")
    create_topic(broker, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        p.produce(topic, value=b"%d" % i, timestamp=BASE_TS + i * 1000)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("unused"),
                  "enable.auto.commit": False})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        [found] = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 4500)], timeout=10)
        assert found.offset == 5
        [missing] = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 99_000)], timeout=10)
        assert missing.offset == OFFSET_END
        c.assign([TopicPartition(topic, 0, found.offset)])
        m = c.poll(10)
        assert m is not None and m.error() is None
        assert (m.offset(), m.value(), m.timestamp()[1]) == (5, b"5", BASE_TS + 5000)
    finally:
        c.close()


# --- long poll: a parked consumer gets a message produced later ---------------------------

def _wait_parked(b, timeout: float = 10.0) -> None:
    """Until a Fetch is parked on the broker (so the next produce must wake it)."""
    deadline = time.monotonic() + timeout
    while b.call(lambda: b.app.dataplane.waiters.waiting()) == 0:
        assert time.monotonic() < deadline, "no fetch ever parked"
        time.sleep(0.02)


FETCH_WAIT_MS = 5000


async def test_aiokafka_parked_consumer_gets_later_message_before_deadline(broker):
    """No fetch can return data before its own deadline unless an append wakes it; the first
    fetch starts after ``t_ref``, so data seen before t_ref + max_wait proves the wake-up."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic = unique("lp-aio")
    create_topic(broker, topic, 1)
    t_ref = time.monotonic()
    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, fetch_max_wait_ms=FETCH_WAIT_MS,
                         enable_auto_commit=False, auto_offset_reset="earliest")
    await c.start()
    try:
        c.assign([TopicPartition(topic, 0)])
        waiting = asyncio.ensure_future(c.getone())
        await asyncio.to_thread(_wait_parked, broker)
        await asyncio.to_thread(kp_produce, broker.bootstrap_servers, topic, [b"late"])
        msg = await asyncio.wait_for(waiting, 30)
        arrived = time.monotonic() - t_ref
    finally:
        await c.stop()
    assert msg.value == b"late"
    assert arrived < FETCH_WAIT_MS / 1000, "arrived at the fetch deadline, not before it"


def test_kafka_python_parked_consumer_gets_later_message_before_deadline(broker):
    from kafka import KafkaConsumer, TopicPartition

    topic = unique("lp-kp")
    create_topic(broker, topic, 1)
    t_ref = time.monotonic()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, fetch_max_wait_ms=FETCH_WAIT_MS,
                      enable_auto_commit=False, auto_offset_reset="earliest", request_timeout_ms=30000)
    got: list = []

    def poll():
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=1000).values():
                got.extend(msgs)
        got.append(time.monotonic())

    try:
        c.assign([TopicPartition(topic, 0)])
        t = threading.Thread(target=poll)
        t.start()
        _wait_parked(broker)
        ck_produce(broker.bootstrap_servers, topic, [b"late"])
        t.join(30)
    finally:
        c.close()
    msg, arrived = got[0], got[-1] - t_ref
    assert msg.value == b"late"
    assert arrived < FETCH_WAIT_MS / 1000, "arrived at the fetch deadline, not before it"


def test_confluent_parked_consumer_gets_later_message_before_deadline(broker):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = unique("lp-ck")
    create_topic(broker, topic, 1)
    t_ref = time.monotonic()
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("unused"),
                  "enable.auto.commit": False, "fetch.wait.max.ms": FETCH_WAIT_MS})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert c.poll(0.2) is None
        _wait_parked(broker)
        kp_produce(broker.bootstrap_servers, topic, [b"late"])
        m = c.poll(20)
        arrived = time.monotonic() - t_ref
    finally:
        c.close()
    assert m is not None and m.value() == b"late"
    assert arrived < FETCH_WAIT_MS / 1000, "arrived at the fetch deadline, not before it"


# --- consumer groups: exactly once, commit, restart, resume -------------------------------

def kp_group(bs: str, topic: str, group: str, count: int) -> list[bytes]:
    c = kafka_python_subscriber(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                got += [m.value for m in msgs]
        c.commit()
        return got + _drain_kp(c)
    finally:
        c.close()


def _drain_kp(c) -> list[bytes]:
    """Anything beyond what was expected (a duplicate would show up here)."""
    return [m.value for msgs in c.poll(timeout_ms=300).values() for m in msgs]


async def aio_group(bs: str, topic: str, group: str, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False)
    await c.start()
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for msgs in (await c.getmany(timeout_ms=500)).values():
                got += [m.value for m in msgs]
        await c.commit()
        extra = await c.getmany(timeout_ms=300)
        return got + [m.value for msgs in extra.values() for m in msgs]
    finally:
        await c.stop()


def ck_group(bs: str, topic: str, group: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        c.commit(asynchronous=False)
        got += [m.value() for m in c.consume(num_messages=500, timeout=0.3) if m.error() is None]
        return got
    finally:
        c.close()


def _sync(fn):
    def run(*args):
        return asyncio.run(fn(*args))
    return run


CONSUMERS = {"kafka-python": kp_group, "aiokafka": _sync(aio_group), "confluent": ck_group}
PRODUCERS = {"kafka-python": kp_produce, "aiokafka": _sync(aio_produce), "confluent": ck_produce}


@pytest.mark.parametrize("producer, consumer", [
    ("kafka-python", "kafka-python"), ("aiokafka", "aiokafka"), ("confluent", "confluent"),
    ("kafka-python", "confluent"), ("confluent", "aiokafka"), ("aiokafka", "kafka-python"),
])
def test_group_consumes_once_commits_and_resumes_after_restart(broker, producer, consumer):
    needs_groups(broker)
    bs = broker.bootstrap_servers
    topic, group = unique("grp"), unique("g")
    create_topic(broker, topic)
    first = payloads("first", N)
    PRODUCERS[producer](bs, topic, first)
    assert_exactly(CONSUMERS[consumer](bs, topic, group, N), first)
    more = payloads("more", 50)
    PRODUCERS[producer](bs, topic, more)
    broker.restart()
    assert_exactly(CONSUMERS[consumer](broker.bootstrap_servers, topic, group, 50), more)
