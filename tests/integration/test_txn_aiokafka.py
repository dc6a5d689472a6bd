"""aiokafka over TCP: a transactional producer and read_committed consumers — commit, abort,
fencing by a second producer with the same transactional id, a broker restart after which the
producer re-acquires its id."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.testing import Broker

from .txn_versions import overrides

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(params=[1, 2], ids=["tv1", "tv2"])
async def tbroker(tmp_path, request):
    """Under both transaction.version levels (``txn_versions``)."""
    async with Broker(data_dir=tmp_path, overrides=overrides(request.param)) as b:
        await b.app.wait_loaded()
        yield b


async def create_topic(bootstrap: str, partitions: int = 1) -> str:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()
    return name


async def start_producer(bootstrap: str, txn_id: str):
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, enable_idempotence=True,
                         request_timeout_ms=10_000)
    await p.start()
    return p


async def consume(bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 1,
                  idle_ms: int = 1500) -> list[bytes]:
    """Values read from the start until ``expect`` arrived and nothing more came for ``idle_ms``."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        got: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while loop.time() < deadline:
            batch = await c.getmany(timeout_ms=idle_ms if len(got) >= expect else 200)
            values = [m.value for msgs in batch.values() for m in msgs]
            if not values and len(got) >= expect:
                break
            got.extend(values)
        return got
    finally:
        await c.stop()


async def end_offsets(bootstrap: str, topic: str, isolation: str) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        return (await c.end_offsets([tp]))[tp]
    finally:
        await c.stop()


async def test_commit_is_seen_by_read_committed_only_after_the_commit(tbroker):
    bs = tbroker.bootstrap_servers
    topic = await create_topic(bs)
    p = await start_producer(bs, "tx-commit")
    try:
        await p.begin_transaction()
        for i in range(3):
            await p.send_and_wait(topic, b"c%d" % i)
        # open: read_uncommitted sees the records, read_committed stops at the LSO
        assert await consume(bs, topic, "read_uncommitted", 3) == [b"c0", b"c1", b"c2"]
        assert await consume(bs, topic, "read_committed", 0, idle_ms=500) == []
        assert await end_offsets(bs, topic, "read_committed") == 0
        await p.commit_transaction()
    finally:
        await p.stop()
    assert await consume(bs, topic, "read_committed", 3) == [b"c0", b"c1", b"c2"]
    assert await end_offsets(bs, topic, "read_committed") == 4  # three records and the marker


async def test_aborted_records_are_never_delivered_to_read_committed(tbroker):
    bs = tbroker.bootstrap_servers
    topic = await create_topic(bs, 2)
    p = await start_producer(bs, "tx-abort")
    try:
        await p.begin_transaction()
        for i in range(4):
            await p.send_and_wait(topic, b"aborted-%d" % i, partition=i % 2)
        await p.abort_transaction()
        async with p.transaction():
            for i in range(2):
                await p.send_and_wait(topic, b"kept-%d" % i, partition=i % 2)
    finally:
        await p.stop()
    committed = await consume(bs, topic, "read_committed", 2, partitions=2)
    assert sorted(committed) == [b"kept-0", b"kept-1"]
    uncommitted = await consume(bs, topic, "read_uncommitted", 6, partitions=2)
    assert len(uncommitted) == 6


async def test_second_producer_with_the_same_id_fences_the_first(tbroker):
    from aiokafka.errors import ProducerFenced

    bs = tbroker.bootstrap_servers
    topic = await create_topic(bs)
    old = await start_producer(bs, "tx-fence")
    new = None
    try:
        await old.begin_transaction()
        await old.send_and_wait(topic, b"zombie")
        new = await start_producer(bs, "tx-fence")  # aborts the old producer's open transaction
        async with new.transaction():
            await new.send_and_wait(topic, b"fresh")
        with pytest.raises(ProducerFenced):  # the zombie learns it was fenced
            await old.send_and_wait(topic, b"zombie-2")
            await old.commit_transaction()
    finally:
        for p in (old, new):
            if p is not None:
                try:
                    await p.stop()
                except Exception:  # a fenced producer may fail its own shutdown
                    pass
    assert await consume(bs, topic, "read_committed", 1) == [b"fresh"]


async def test_producer_reacquires_its_id_after_a_broker_restart(tbroker):
    bs = tbroker.bootstrap_servers
    topic = await create_topic(bs)
    p = await start_producer(bs, "tx-restart")
    try:
        async with p.transaction():
            await p.send_and_wait(topic, b"before")
        await p.begin_transaction()
        await p.send_and_wait(topic, b"left-open")
    finally:
        await p.stop()  # without committing: the transaction stays open in the log
    await tbroker.restart()
    await tbroker.app.wait_loaded()
    assert await consume(bs, topic, "read_committed", 1) == [b"before"]  # the open one is held back
    p = await start_producer(bs, "tx-restart")  # InitProducerId aborts what was left open
    try:
        async with p.transaction():
            await p.send_and_wait(topic, b"after")
    finally:
        await p.stop()
    assert await consume(bs, topic, "read_committed", 2) == [b"before", b"after"]


async def test_open_transactional_offsets_bound_the_offsets_topic_cleaner(tbroker):
    """The cleaner of ``__consumer_offsets`` stops at its oldest open transaction (the pending
    offsets of ``send_offsets_to_transaction``), and goes on to the log end once it commits."""
    from aiokafka import TopicPartition

    bs = tbroker.bootstrap_servers
    topic = await create_topic(bs)
    offsets_log = tbroker.app.logs.get("__consumer_offsets", 0)
    p = await start_producer(bs, "tx-offsets")
    try:
        await p.begin_transaction()
        await p.send_and_wait(topic, b"out")
        start = offsets_log.log_end_offset
        await p.send_offsets_to_transaction({TopicPartition(topic, 0): 5}, "g-txn")
        assert await tbroker.app.logs.stable_offset(offsets_log) == start
        await p.commit_transaction()
    finally:
        await p.stop()
    assert await tbroker.app.logs.stable_offset(offsets_log) == offsets_log.log_end_offset
