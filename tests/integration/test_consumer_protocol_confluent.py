"""confluent-kafka (librdkafka) consumers with ``group.protocol=consumer`` (KIP-848) over TCP:
a group of three consumes a topic exactly once; members come and go with no partition owned
twice (checked from the assign/revoke callbacks); a broker restart resumes the same group epoch,
assignment and committed offsets."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import create_topic_kafka_python

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 6
BROKER = {"group.consumer.heartbeat.interval.ms": "300"}


@pytest.fixture
def kbroker():
    with ThreadedBroker(overrides=BROKER) as b:
        yield b


@pytest.fixture
def topic(kbroker):
    name = f"t-{uuid.uuid4().hex[:8]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, name, PARTITIONS)
    return name


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    p.flush(10)


class Owners:
    """Who owns which partition, from the members' callbacks; an assign of an owned partition is
    recorded as a violation (callbacks run inside poll, all on this thread)."""

    def __init__(self) -> None:
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.names: dict[int, str] = {}  # id(consumer) -> its name

    def consumer(self, bootstrap: str, group: str, topic: str, name: str, **extra):
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})

        def on_assign(consumer, partitions):
            for tp in partitions:
                holder = self.owner.get(tp.partition)
                if holder is not None and holder != name:
                    self.violations.append(f"{name} got {tp.partition} still owned by {holder}")
                self.owner[tp.partition] = name

        def on_revoke(consumer, partitions):
            for tp in partitions:
                if self.owner.get(tp.partition) == name:
                    del self.owner[tp.partition]

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        self.names[id(c)] = name
        return c

    def held(self, who) -> set[int]:
        name = who if isinstance(who, str) else self.names[id(who)]
        return {p for p, n in self.owner.items() if n == name}


def consume(consumers: list, want: int, seen: list, timeout: float = 40.0, commit: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while len(seen) < want:
        assert time.monotonic() < deadline, f"consumed {len(seen)} of {want}"
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.append(int(m.value()))
                if commit:
                    c.commit(message=m, asynchronous=False)


def poll_until(consumers: list, predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for c in consumers:
            c.poll(0.05)


def test_three_consumers_read_a_topic_exactly_once_with_disjoint_assignments(kbroker, topic):
    produce(kbroker.bootstrap_servers, topic, 90)
    owners = Owners()
    cs = [owners.consumer(kbroker.bootstrap_servers, "g3", topic, f"c{i}") for i in range(3)]
    try:
        seen: list[int] = []
        consume(cs, 90, seen)
        poll_until(cs, lambda: all(len(owners.held(c)) == 2 for c in cs), what="two partitions each")
        assert sorted(seen) == list(range(90))
        assert owners.violations == []
        assert sorted(owners.owner) == list(range(PARTITIONS))
        group = kbroker.call(lambda: kbroker.app.coordinator.shards[0].consumer_groups["g3"])
        assert group.state == "Stable" and len(group.members) == 3
    finally:
        for c in cs:
            c.close()


def test_a_member_leaves_and_another_joins_with_no_partition_owned_twice(kbroker, topic):
    owners = Owners()
    bootstrap = kbroker.bootstrap_servers
    cs = [owners.consumer(bootstrap, "gm", topic, f"c{i}") for i in range(2)]
    poll_until(cs, lambda: len(owners.owner) == PARTITIONS and all(owners.held(c) for c in cs),
               what="two members sharing the topic")
    cs[0].close()
    cs = cs[1:]
    poll_until(cs, lambda: owners.held("c1") == set(range(PARTITIONS)), what="the survivor to take all")
    cs.append(owners.consumer(bootstrap, "gm", topic, "c2"))
    cs.append(owners.consumer(bootstrap, "gm", topic, "c3"))
    poll_until(cs, lambda: all(len(owners.held(c)) == 2 for c in cs), what="three members, two each")
    assert owners.violations == []
    produce(bootstrap, topic, 30)
    seen: list[int] = []
    consume(cs, 30, seen)
    assert sorted(seen) == list(range(30))
    for c in cs:
        c.close()
    assert owners.violations == []


def test_a_broker_restart_resumes_epoch_assignment_and_committed_offsets(kbroker, topic):
    owners = Owners()
    bootstrap = kbroker.bootstrap_servers
    produce(bootstrap, topic, 60)
    cs = [owners.consumer(bootstrap, "gr", topic, f"c{i}") for i in range(2)]
    try:
        seen: list[int] = []
        consume(cs, 60, seen)
        poll_until(cs, lambda: all(len(owners.held(c)) == 3 for c in cs), what="three each")

        def snapshot():
            g = kbroker.app.coordinator.shards[0].consumer_groups["gr"]
            return g.group_epoch, {m: dict(x.assigned) for m, x in g.members.items()}, g.state
        before = kbroker.call(snapshot)
        assert before[2] == "Stable"
        kbroker.restart()
        kbroker.wait_loaded()
        assert kbroker.call(snapshot)[:2] == before[:2]
        produce(bootstrap, topic, 30, start=60)
        consume(cs, 90, seen)
        assert sorted(seen) == list(range(90))  # nothing read twice: the committed offsets held
        after = kbroker.call(snapshot)
        assert after[:2] == before[:2]  # the clients came back as the same members, same epoch
        assert owners.violations == []
    finally:
        for c in cs:
            c.close()


def test_a_static_member_restarts_without_a_reassignment(kbroker, topic):
    owners = Owners()
    bootstrap = kbroker.bootstrap_servers
    cs = [owners.consumer(bootstrap, "gs", topic, f"s{i}", **{"group.instance.id": f"i{i}"}) for i in range(2)]
    poll_until(cs, lambda: all(len(owners.held(c)) == 3 for c in cs), what="three each")
    epoch = kbroker.call(lambda: kbroker.app.coordinator.shards[0].consumer_groups["gs"].group_epoch)
    kept = owners.held("s0")
    cs[0].close()  # a static member leaves with epoch -2: its partitions stay reserved
    assert owners.held("s1") == set(range(PARTITIONS)) - kept
    back = owners.consumer(bootstrap, "gs", topic, "s0", **{"group.instance.id": "i0"})
    cs = [back, cs[1]]
    poll_until(cs, lambda: owners.held("s0") == kept, what="the same partitions back")
    group = kbroker.call(lambda: kbroker.app.coordinator.shards[0].consumer_groups["gs"])
    assert group.group_epoch == epoch  # no rebalance
    assert owners.held("s1") == set(range(PARTITIONS)) - kept and owners.violations == []
    for c in cs:
        c.close()


def test_regex_subscription_and_new_partitions_reach_the_group(kbroker):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewPartitions

    bootstrap = kbroker.bootstrap_servers
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create_topic_kafka_python(bootstrap, f"{prefix}-a", 2)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "gx", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    c.subscribe([f"^{prefix}-.*"])
    try:
        def held() -> set:
            return {(tp.topic, tp.partition) for tp in c.assignment()}
        poll_until([c], lambda: held() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}, what="the first topic")
        create_topic_kafka_python(bootstrap, f"{prefix}-b", 1)  # created later: the regex picks it up
        poll_until([c], lambda: (f"{prefix}-b", 0) in held(), what="the topic created later")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(f"{prefix}-a", 3)])[f"{prefix}-a"].result(10)
        poll_until([c], lambda: (f"{prefix}-a", 2) in held(), what="the partition added")
    finally:
        c.close()


def test_with_fsync_always_the_group_forms_and_consumes():
    """log.fsync.mode=always: answers wait for the fsync, yet the next heartbeat already sees the
    previous one's records (``Shard.run(..., replay_now=True)``)."""
    with ThreadedBroker(overrides={**BROKER, "log.fsync.mode": "always"}) as b:
        name = f"t-{uuid.uuid4().hex[:8]}"
        create_topic_kafka_python(b.bootstrap_servers, name, PARTITIONS)
        produce(b.bootstrap_servers, name, 30)
        owners = Owners()
        cs = [owners.consumer(b.bootstrap_servers, "gf", name, f"f{i}") for i in range(3)]
        try:
            seen: list[int] = []
            consume(cs, 30, seen)
            poll_until(cs, lambda: all(len(owners.held(c)) == 2 for c in cs), what="two partitions each")
            assert sorted(seen) == list(range(30)) and owners.violations == []
        finally:
            for c in cs:
                c.close()
