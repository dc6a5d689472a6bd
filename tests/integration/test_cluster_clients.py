"""Real clients against three brokers in one process (docs/CLUSTER.md): leaders that move, a broker
that goes down, a coordinator that moves, an unclean leader change a consumer must detect."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from odradek.testing.handle import BrokerHandle

pytestmark = pytest.mark.integration

N = 60


@pytest.fixture(scope="module")
def cluster():
    with BrokerHandle(brokers=3) as handle:
        # the tests look for one answer among every request of a run that polls, fetches and commits
        # every 100 ms for up to a minute: more than the default ring of 1,000 on a slow machine
        handle.set_capture(50_000)
        yield handle


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def other_node(cluster, topic: str, partition: int = 0) -> int:
    """A replica of the partition that does not lead it."""
    state = cluster.layout(topic)["partitions"][f"{topic}-{partition}"]
    return next(n for n in state["replica_nodes"] if n != state["leader_id"])


def leader_of(cluster, topic: str, partition: int = 0) -> int:
    return cluster.layout(topic)["partitions"][f"{topic}-{partition}"]["leader_id"]


def read_all(bootstrap: str, topic: str, count: int, timeout: float = 30) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        m = c.poll(1.0)  # nothing more
        if m is not None and m.error() is None:
            got.append(m.value())
    finally:
        c.close()
    return got


# --- admin clients ----------------------------------------------------------------------------

def test_kafka_python_admin_creates_a_topic_with_three_replicas(cluster):
    from kafka import KafkaAdminClient  # noqa: PLC0415
    from kafka.admin import NewTopic  # noqa: PLC0415
    from kafka.errors import InvalidReplicationFactorError  # noqa: PLC0415

    topic = unique("kp-rf3")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, 3, 3)])
        described = admin.describe_topics([topic])[0]
        for p in described["partitions"]:
            assert sorted(p["replica_nodes"]) == [1, 2, 3] and sorted(p["isr_nodes"]) == [1, 2, 3]
            assert p["leader_id"] == p["replica_nodes"][0]
        assert {p["leader_id"] for p in described["partitions"]} == {1, 2, 3}
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic(unique("kp-rf4"), 1, 4)])
    finally:
        admin.close()


def test_confluent_admin_creates_a_topic_with_three_replicas(cluster):
    from confluent_kafka import KafkaException  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    topic = unique("ck-rf3")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(10)
    described = admin.describe_topics(_topics([topic]))[topic].result(10)
    for p in described.partitions:
        assert sorted(n.id for n in p.replicas) == [1, 2, 3] and sorted(n.id for n in p.isr) == [1, 2, 3]
    assert len(admin.describe_cluster().result(10).nodes) == 3
    bad = unique("ck-rf4")
    with pytest.raises(KafkaException, match="REPLICATION_FACTOR"):
        admin.create_topics([NewTopic(bad, 1, 4)])[bad].result(10)


def test_confluent_admin_preferred_election_returns_leadership(cluster):
    from confluent_kafka import ElectionType, TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    topic = rf3_topic(cluster, "ck-elect")
    preferred = leader_of(cluster, topic)
    cluster.move_leader(topic, 0, other_node(cluster, topic))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(10)
    assert list(results.values()) == [None]
    state = cluster.layout(topic)["partitions"][f"{topic}-0"]
    assert (state["leader_id"], state["leader_epoch"]) == (preferred, 2)
    again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(10)
    assert [e.name() for e in again.values()] == ["ELECTION_NOT_NEEDED"]


async def test_aiokafka_admin_creates_a_topic_with_three_replicas(cluster):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: PLC0415

    topic = unique("aio-rf3")
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 3, 3)])
        described = (await admin.describe_topics([topic]))[0]
        for p in described["partitions"]:
            assert sorted(p.get("replicas", p.get("replica_nodes"))) == [1, 2, 3]
            assert sorted(p.get("isr", p.get("isr_nodes"))) == [1, 2, 3]
    finally:
        await admin.close()


def _topics(names):
    from confluent_kafka import TopicCollection  # noqa: PLC0415

    return TopicCollection(names)


# --- producers across a leader move and a broker down ------------------------------------------

def rf3_topic(cluster, prefix: str) -> str:
    topic = unique(prefix)
    cluster.create_topic(topic, 1, replication_factor=3)
    return topic


class Disturbance:
    """At a third of the messages the leader moves; at two thirds the leader's broker goes down
    (brought back, and leadership returned by preferred election, when the test ends)."""

    def __init__(self, cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.downed: int | None = None

    def at(self, i: int) -> None:
        if i == N // 3:
            self.cluster.move_leader(self.topic, 0, other_node(self.cluster, self.topic))
        elif i == 2 * N // 3:
            self.downed = leader_of(self.cluster, self.topic)
            self.cluster.node_down(self.downed)

    def restore(self) -> None:
        if self.downed is not None:
            self.cluster.node_up(self.downed)
            self.cluster.elect_preferred(self.topic)


def expected(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(N)]


def test_kafka_python_idempotent_producer_across_a_leader_move_and_a_broker_down(cluster):
    from kafka import KafkaProducer  # noqa: PLC0415

    topic = rf3_topic(cluster, "kp-move")
    moves = Disturbance(cluster, topic)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, acks="all",
                             retries=100, retry_backoff_ms=50, request_timeout_ms=10000)
    try:
        for i, value in enumerate(expected("kp")):
            moves.at(i)
            producer.send(topic, value, partition=0)
            if i % 10 == 9:
                producer.flush(30)
        producer.flush(30)
    finally:
        producer.close(5)
        moves.restore()
    assert read_all(cluster.bootstrap_servers, topic, N) == expected("kp")
    assert cluster.captured("Produce", topic=topic, error="NOT_LEADER_OR_FOLLOWER")


async def test_aiokafka_idempotent_producer_across_a_leader_move_and_a_broker_down(cluster):
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415

    topic = rf3_topic(cluster, "aio-move")
    moves = Disturbance(cluster, topic)
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True,
                                retry_backoff_ms=50, request_timeout_ms=10000)
    await producer.start()
    try:
        pending = []
        for i, value in enumerate(expected("aio")):
            await asyncio.to_thread(moves.at, i)
            pending.append(await producer.send(topic, value, partition=0))
            if i % 10 == 9:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
        moves.restore()
    got = await asyncio.to_thread(read_all, cluster.bootstrap_servers, topic, N)
    assert got == expected("aio")


def test_confluent_idempotent_producer_across_a_leader_move_and_a_broker_down(cluster):
    from confluent_kafka import Producer  # noqa: PLC0415

    topic = rf3_topic(cluster, "ck-move")
    moves = Disturbance(cluster, topic)
    failed = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 5, "retry.backoff.ms": 50})
    try:
        for i, value in enumerate(expected("ck")):
            moves.at(i)
            producer.produce(topic, value, partition=0,
                             on_delivery=lambda err, _m: err is not None and failed.append(err))
            if i % 10 == 9:
                assert producer.flush(30) == 0
        assert producer.flush(30) == 0
    finally:
        moves.restore()
    assert failed == []
    assert read_all(cluster.bootstrap_servers, topic, N) == expected("ck")


def test_confluent_transactional_producer_across_coordinator_and_leader_moves(cluster):
    from confluent_kafka import Producer  # noqa: PLC0415

    topic = rf3_topic(cluster, "ck-txn")
    txn_id = unique("txn")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                         "retry.backoff.ms": 50})
    producer.init_transactions(30)
    values = expected("txn")
    for start in range(0, N, N // 3):
        producer.begin_transaction()
        for value in values[start:start + N // 3]:
            producer.produce(topic, value, partition=0)
        if start == 0:
            producer.flush(30)
            cluster.move_coordinator(other_node(cluster, "__transaction_state"), transactional_id=txn_id)
            cluster.move_leader(topic, 0, other_node(cluster, topic))
        producer.commit_transaction(30)
    assert read_all(cluster.bootstrap_servers, topic, N) == values
    assert cluster.captured("EndTxn", error="NOT_COORDINATOR", transactional_id=txn_id)


class TxnDisturbance(Disturbance):
    """The partition's leader moves, the transaction's coordinator moves (onto that leader's broker,
    or ``spared``: onto another), then the leader's broker goes down, each inside a transaction."""

    def __init__(self, cluster, topic: str, txn_id: str, spared: bool = False) -> None:
        super().__init__(cluster, topic)
        self.txn_id = txn_id
        self.spared = spared

    def at(self, i: int) -> None:
        super().at(i)
        if i == N // 2:
            leader = leader_of(self.cluster, self.topic)
            node = other_node(self.cluster, self.topic) if self.spared else leader
            self.cluster.move_coordinator(node, transactional_id=self.txn_id)


def test_kafka_python_transactional_producer_across_moves_and_a_broker_down(cluster):
    """The coordinator is spared the broker going down: kafka-python 3.0.12's producer sends nothing
    more once its transaction coordinator's broker is gone (docs/compatibility.md)."""
    from kafka import KafkaProducer  # noqa: PLC0415

    topic, txn_id = rf3_topic(cluster, "kp-txn"), unique("kp-txn")
    moves = TxnDisturbance(cluster, topic, txn_id, spared=True)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, transactional_id=txn_id,
                             retries=100, retry_backoff_ms=50, request_timeout_ms=10000)
    values = expected("kp-txn")
    try:
        producer.init_transactions()
        for start in range(0, N, 10):
            producer.begin_transaction()
            for i in range(start, start + 10):
                moves.at(i)
                producer.send(topic, values[i], partition=0)
            producer.commit_transaction()
    finally:
        producer.close(5)
        moves.restore()
    assert read_all(cluster.bootstrap_servers, topic, N) == values


async def test_aiokafka_transactional_producer_across_moves_and_a_broker_down(cluster):
    """The broker that goes down leads the partition and coordinates the transaction."""
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415

    topic, txn_id = rf3_topic(cluster, "aio-txn"), unique("aio-txn")
    moves = TxnDisturbance(cluster, topic, txn_id)
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, transactional_id=txn_id,
                                retry_backoff_ms=50, request_timeout_ms=10000)
    values = expected("aio-txn")
    await producer.start()
    try:
        for start in range(0, N, 10):
            async with producer.transaction():
                for i in range(start, start + 10):
                    await asyncio.to_thread(moves.at, i)
                    await producer.send(topic, values[i], partition=0)
    finally:
        await producer.stop()
        moves.restore()
    got = await asyncio.to_thread(read_all, cluster.bootstrap_servers, topic, N)
    assert got == values


# --- consumers in a group across a coordinator move --------------------------------------------

def fill(cluster, topic: str, values: list[bytes], batch_each: bool = False) -> None:
    """``values`` into ``topic``-0; ``batch_each``: one batch per record (truncation points)."""
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=0)
        if batch_each:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def committed(cluster, group: str, topic: str) -> tuple[int, int | None]:
    """(offset, leader epoch) committed by ``group`` for ``topic``-0, read by a confluent consumer."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        tp = c.committed([TopicPartition(topic, 0)], timeout=10)[0]
        return tp.offset, tp.leader_epoch
    finally:
        c.close()


def test_confluent_group_consumer_across_a_coordinator_move_keeps_leader_epochs(cluster):
    """Auto-commit every 100 ms while the coordinator moves; the committed offset carries the leader
    epoch of the last record consumed (KIP-320), which a restarted consumer validates against."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    topic = rf3_topic(cluster, "ck-group")
    group = unique("g")
    fill(cluster, topic, expected("g")[:N // 2])  # stamped with leader epoch 0
    cluster.move_leader(topic, 0, other_node(cluster, topic))
    fill(cluster, topic, expected("g")[N // 2:])  # stamped with leader epoch 1
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                  "auto.offset.reset": "earliest", "auto.commit.interval.ms": 100})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error() is not None:
                continue
            got.append(m.value())
            if len(got) == N // 2:
                cluster.move_coordinator(other_node(cluster, "__consumer_offsets"), group=group)
        while time.monotonic() < deadline and _committed_now(c, TopicPartition(topic, 0)) != N:
            c.poll(0.2)
    finally:
        c.close()
    assert got == expected("g")
    assert committed(cluster, group, topic) == (N, 1)  # the epoch of the last record consumed
    assert cluster.captured(["OffsetCommit", "Heartbeat", "OffsetFetch"], group_id=group, error="NOT_COORDINATOR")


def _committed_now(consumer, tp) -> int | None:
    """The group's committed offset, None while the coordinator is being looked up again."""
    from confluent_kafka import KafkaException  # noqa: PLC0415

    try:
        return consumer.committed([tp], 2)[0].offset
    except KafkaException:
        return None


def test_kafka_python_group_consumer_across_a_coordinator_move(cluster):
    from tests.integration.group_helpers import kafka_python_subscriber  # noqa: PLC0415

    topic = rf3_topic(cluster, "kp-group")
    group = unique("g")
    fill(cluster, topic, expected("kpg"))
    got: list[bytes] = []
    c = kafka_python_subscriber(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        deadline = time.monotonic() + 60
        moved = False
        while len(got) < N and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got += [r.value for r in records]
            if got and not moved:
                c.commit()
                cluster.move_coordinator(other_node(cluster, "__consumer_offsets"), group=group)
                moved = True
        c.commit()
    finally:
        c.close()
    assert got == expected("kpg")
    assert committed(cluster, group, topic)[0] == N


# --- truncation by an unclean leader change (KIP-320) ------------------------------------------

def _consume_then_truncate(cluster, policy: str):
    """A confluent consumer reads 10 records (epoch 0); the leader changes uncleanly to a replica
    that had only the first 5, which then takes 3 new records (epoch 1, offsets 5-7).  Returns the
    consumer and the topic."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    topic = rf3_topic(cluster, f"ck-trunc-{policy}")
    fill(cluster, topic, [f"old-{i}".encode() for i in range(10)], batch_each=True)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("t"),
                  "auto.offset.reset": policy, "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 10 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen.append(m.offset())
    assert seen == list(range(10))
    cluster.move_leader(topic, 0, other_node(cluster, topic), truncate_to=5)
    fill(cluster, topic, [f"new-{i}".encode() for i in range(3)])
    return c, topic


def test_confluent_consumer_detects_truncation_and_resumes_at_the_divergence(cluster):
    """With a reset policy, librdkafka validates its position (OffsetForLeaderEpoch) and seeks to
    where the histories diverge: the new records at 5-7 are read, the old 0-4 are not read again."""
    c, _topic = _consume_then_truncate(cluster, "earliest")
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value(), m.leader_epoch()))
        m = c.poll(1.0)
        assert m is None or m.error() is not None
    finally:
        c.close()
    assert got == [(5, b"new-0", 1), (6, b"new-1", 1), (7, b"new-2", 1)]


def test_confluent_consumer_without_a_reset_policy_reports_the_truncation(cluster):
    """``auto.offset.reset=error``: librdkafka reports the truncation it detected (as an offset
    reset error naming it) instead of reading on."""
    from confluent_kafka import KafkaError  # noqa: PLC0415

    c, _topic = _consume_then_truncate(cluster, "error")
    errors = []
    deadline = time.monotonic() + 30
    try:
        while not errors and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is not None:
                errors.append(m.error())
            assert m is None or m.error() is not None, "read past a truncation"
    finally:
        c.close()
    assert [e.code() for e in errors] == [KafkaError._AUTO_OFFSET_RESET]
    assert "truncation detected at offset 10 (leader epoch 0): broker end offset is 5" in errors[0].str()


def test_offset_for_leader_epoch_answers_from_the_epoch_history(cluster):
    """After two moves and an unclean truncation the history is Kafka's (epoch, start offset) list."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    topic = rf3_topic(cluster, "epochs")
    fill(cluster, topic, [b"a"] * 4, batch_each=True)
    cluster.move_leader(topic, 0, other_node(cluster, topic))  # epoch 1 from offset 4
    fill(cluster, topic, [b"b"] * 4, batch_each=True)
    cluster.move_leader(topic, 0, other_node(cluster, topic), truncate_to=6)  # epoch 2 from 6
    assert (cluster.data_dir / f"{topic}-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n1 4\n2 6\n"
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("e")})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), 10)
        assert (low, high) == (0, 6)
        found = c.offsets_for_times([TopicPartition(topic, 0, -1)], 10)[0]  # LATEST: the current epoch
        assert found.leader_epoch in (2, None)
    finally:
        c.close()


async def test_aiokafka_group_consumer_across_its_coordinators_broker_going_down(cluster):
    """The broker coordinating the group (and leading the partition) goes down mid-stream and comes
    back: the group's coordinator fails over with ``__consumer_offsets``' leadership, nothing is
    read twice or skipped, and the commits land."""
    from aiokafka import AIOKafkaConsumer  # noqa: PLC0415

    topic = rf3_topic(cluster, "aio-group")
    group = unique("g")
    await asyncio.to_thread(fill, cluster, topic, expected("aiog"))
    coordinator = leader_of(cluster, "__consumer_offsets")
    await asyncio.to_thread(cluster.move_leader, topic, 0, coordinator)
    c = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False, retry_backoff_ms=50)
    await c.start()
    got: list[bytes] = []
    downed = False
    try:
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            batches = await c.getmany(timeout_ms=300, max_records=10)
            for records in batches.values():
                got += [r.value for r in records]
            if batches:
                await c.commit()
            if len(got) >= N // 2 and not downed:
                await asyncio.to_thread(cluster.node_down, coordinator)
                downed = True
        await c.commit()
    finally:
        await c.stop()
        if downed:
            await asyncio.to_thread(cluster.node_up, coordinator)
            await asyncio.to_thread(cluster.elect_preferred)
    assert got == expected("aiog")
    assert (await asyncio.to_thread(committed, cluster, group, topic))[0] == N


def test_kafka_python_admin_lists_each_group_once(cluster):
    """Each broker lists the groups it coordinates; the admin client asks them all."""
    from kafka import KafkaAdminClient  # noqa: PLC0415

    from tests.integration.group_helpers import kafka_python_subscriber  # noqa: PLC0415

    topic = rf3_topic(cluster, "kp-list")
    groups = [unique("listed"), unique("listed")]
    for group in groups:
        c = kafka_python_subscriber(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group)
        c.poll(1000)
        c.close()
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        listed = [g["group_id"] for g in admin.list_groups() if g["group_id"] in groups]
    finally:
        admin.close()
    assert sorted(listed) == sorted(groups)
