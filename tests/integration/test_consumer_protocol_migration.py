"""Online migration of a live group between the protocols with real clients over TCP (KIP-848,
``group.consumer.migration.policy=bidirectional``): kafka-python classic consumers and
confluent-kafka consumers with ``group.protocol=consumer`` in one group, upgraded member by member
and downgraded again.  Checked from every member's assign/revoke callbacks: no partition is ever
held by two members at once; the committed offsets carry over each conversion (nothing consumed
before is read again, nothing is skipped)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import create_topic_kafka_python, kafka_python_subscriber

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
BROKER = {"group.consumer.heartbeat.interval.ms": "300"}


@pytest.fixture
def kbroker():
    with ThreadedBroker(overrides=BROKER) as b:
        yield b


class Group:
    """The members of one group, classic and consumer protocol, each polled without pause on a thread
    of its own (as an application's poll loop); who holds which partition, from their callbacks (an
    assign of a held partition is a violation).

    A member polled in turn with the others misses rebalances: kafka-python 3.0.12 drops a
    JoinGroup/SyncGroup round that completes while no ``poll`` waits for it and sends a new
    JoinGroup on its next ``poll``; a leader doing so starts yet another rebalance, whose SyncGroup
    again lands between its polls, so a downgraded classic group rebalanced for tens of seconds or
    for good."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.members: dict[str, object] = {}
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.seen: list[int] = []
        self.lock = threading.Lock()
        self.pollers: dict[str, tuple[threading.Thread, threading.Event]] = {}

    def _assigned(self, name: str, partitions) -> None:
        with self.lock:
            for p in partitions:
                holder = self.owner.get(p)
                if holder is not None and holder != name:
                    self.violations.append(f"{name} got {p} still held by {holder}")
                self.owner[p] = name

    def _revoked(self, name: str, partitions) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == name:
                    del self.owner[p]

    def classic(self, name: str) -> None:
        from kafka import ConsumerRebalanceListener

        group = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                group._revoked(name, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned):
                group._assigned(name, [tp.partition for tp in assigned])

        c = kafka_python_subscriber(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    heartbeat_interval_ms=300, session_timeout_ms=10000)
        c.unsubscribe()
        c.subscribe([self.topic], listener=Listener())
        self._start(name, c, self._poll_classic)

    def consumer(self, name: str) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([self.topic],
                    on_assign=lambda _c, ps: self._assigned(name, [tp.partition for tp in ps]),
                    on_revoke=lambda _c, ps: self._revoked(name, [tp.partition for tp in ps]),
                    on_lost=lambda _c, ps: self._revoked(name, [tp.partition for tp in ps]))
        self._start(name, c, self._poll_consumer)

    def _start(self, name: str, c, poll) -> None:
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                poll(c)
        thread = threading.Thread(target=loop, name=f"poll-{name}", daemon=True)
        self.members[name] = c
        self.pollers[name] = (thread, stop)
        thread.start()

    def close(self, name: str) -> None:
        """Stop the member's poll loop, then close it (a leave; its partitions are no longer held)."""
        thread, stop = self.pollers.pop(name)
        stop.set()
        thread.join(30)
        c = self.members.pop(name)
        c.close()
        self._revoked(name, list(self.owner))

    def _poll_consumer(self, c) -> None:
        m = c.poll(0.1)
        if m is not None and not m.error():
            with self.lock:
                self.seen.append(int(m.value()))
            c.commit(message=m, asynchronous=False)

    def _poll_classic(self, c) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        for tp, records in c.poll(timeout_ms=100, max_records=10).items():
            with self.lock:
                self.seen.extend(int(r.value) for r in records)
            try:
                c.commit({TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(records[-1].offset + 1, "", -1)})
            except Exception:  # a commit refused during a rebalance: those records come again
                pass

    def poll_until(self, predicate, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if predicate():
                    return
                owners = dict(self.owner)
            assert time.monotonic() < deadline, f"timed out waiting for {what}: owners {owners}"
            time.sleep(0.05)

    def held(self, name: str) -> set[int]:
        return {p for p, n in self.owner.items() if n == name}

    def settled(self) -> bool:
        """Every partition held, every member holding some."""
        return len(self.owner) == PARTITIONS and all(self.held(n) for n in self.members)


def produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    p.flush(10)


def kind(broker, group: str) -> str:
    def read():
        shard = broker.app.coordinator.shard_for(group)
        return "consumer" if group in shard.consumer_groups else "classic" if group in shard.groups else "none"
    return broker.call(read)


def test_rolling_upgrade_and_downgrade_keep_offsets_and_never_share_a_partition(kbroker):
    topic, gid = f"t-{uuid.uuid4().hex[:8]}", f"mig-{uuid.uuid4().hex[:6]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, topic, PARTITIONS)
    g = Group(kbroker.bootstrap_servers, gid, topic)
    try:
        # two classic members consume the first batch and commit it
        produce(kbroker.bootstrap_servers, topic, 0, 60)
        g.classic("k1")
        g.classic("k2")
        g.poll_until(lambda: g.settled() and len(set(g.seen)) == 60, "two classic members to read 60")
        assert kind(kbroker, gid) == "classic"
        first = len(g.seen)
        # rolling upgrade: a consumer-protocol member joins (the group converts), then replaces k1, k2
        g.consumer("c1")
        g.poll_until(lambda: g.settled(), "the upgraded group to share the partitions with c1")
        assert kind(kbroker, gid) == "consumer"
        g.close("k1")
        g.consumer("c2")
        g.poll_until(lambda: g.settled(), "c2 to replace k1")
        g.close("k2")
        g.poll_until(lambda: g.settled(), "c1 and c2 alone")
        produce(kbroker.bootstrap_servers, topic, 60, 60)
        g.poll_until(lambda: len(set(g.seen)) == 120, "the consumer-protocol members to read the second 60")
        # rolling downgrade: classic members come back; the last consumer-protocol member leaving
        # turns the group classic again
        g.classic("k3")
        g.poll_until(lambda: g.settled(), "a classic member to join the consumer group")
        assert kind(kbroker, gid) == "consumer"
        g.close("c1")
        g.classic("k4")
        g.poll_until(lambda: g.settled(), "k4 to replace c1")
        g.close("c2")
        g.poll_until(lambda: g.settled() and kind(kbroker, gid) == "classic", "the downgraded classic group")
        produce(kbroker.bootstrap_servers, topic, 120, 60)
        g.poll_until(lambda: len(set(g.seen)) == 180, "the classic members to read the third 60")
        assert g.violations == []
        assert sorted(set(g.seen)) == list(range(180))
        assert len(g.seen[:first]) == len(set(g.seen[:first]))
        again = [v for v in g.seen[first:] if v < 60]
        assert again == [], f"read again after the upgrade: {again}"  # the committed offsets carried over
        state = kbroker.call(lambda: kbroker.app.coordinator.shard_for(gid).groups[gid].state.value)
        assert state in ("Stable", "PreparingRebalance", "CompletingRebalance")
    finally:
        for name in list(g.members):
            g.close(name)


async def test_aiokafka_members_and_a_consumer_protocol_member_share_a_group_and_part_again():
    """aiokafka's classic members (heartbeats and rejoins in its background task) through an upgrade
    and a downgrade; every sample of the members' assignments on the way is disjoint."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from confluent_kafka import Consumer

    from odradek.testing import Broker

    async with Broker(overrides=BROKER) as b:
        await b.app.wait_loaded()
        topic, gid = f"t-{uuid.uuid4().hex[:8]}", f"mig-{uuid.uuid4().hex[:6]}"
        admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        await admin.close()
        classic = [AIOKafkaConsumer(topic, bootstrap_servers=b.bootstrap_servers, group_id=gid,
                                    session_timeout_ms=6000, heartbeat_interval_ms=200) for _ in range(2)]
        for c in classic:
            await c.start()
        modern = None
        overlaps: list = []

        def held() -> list[set[int]]:
            sets = [{tp.partition for tp in c.assignment()} for c in classic]
            if modern is not None:
                sets.append({tp.partition for tp in modern.assignment()})
            return sets

        async def until(predicate, what: str, timeout: float = 60.0) -> None:
            deadline = asyncio.get_running_loop().time() + timeout
            while True:
                if modern is not None:
                    modern.poll(0)
                sets = held()
                if sum(len(s) for s in sets) != len(set().union(*sets)):
                    overlaps.append(sets)
                if predicate(sets):
                    return
                assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}: {sets}"
                await asyncio.sleep(0.05)

        def shared(sets: list[set[int]]) -> bool:
            return all(sets) and set().union(*sets) == set(range(PARTITIONS))

        try:
            await until(shared, "two aiokafka members to share the topic")
            modern = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": gid,
                               "group.protocol": "consumer", "auto.offset.reset": "earliest"})
            modern.subscribe([topic])
            await until(lambda sets: len(sets) == 3 and shared(sets), "the upgraded group of three")
            assert gid in b.app.coordinator.shard_for(gid).consumer_groups
            leaving, modern = modern, None
            await asyncio.to_thread(leaving.close)  # it waits for its leave's answer: off the broker's loop
            await until(lambda sets: shared(sets) and gid in b.app.coordinator.shard_for(gid).groups,
                        "the downgraded classic group of two")
            assert overlaps == []
        finally:
            if modern is not None:
                await asyncio.to_thread(modern.close)
            for c in classic:
                await c.stop()
