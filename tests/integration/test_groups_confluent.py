"""confluent-kafka (librdkafka) consumers: a group of three, a killed member, admin group APIs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from odradek.testing import ThreadedBroker
from tests.conftest import BROKERS
from tests.integration.group_helpers import (
    FAST_GROUPS,
    create_topic_kafka_python,
    disjoint_cover,
    group_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

PARTITIONS = 6
CONSUMER = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
            "max.poll.interval.ms": 10000, "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000}


@pytest.fixture
def kbroker():
    with ThreadedBroker(overrides=FAST_GROUPS, brokers=BROKERS) as b:
        yield b


@pytest.fixture
def topic(kbroker):
    name = f"t-{uuid.uuid4().hex[:8]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, name, PARTITIONS)
    return name


def consumer(bootstrap: str, group: str, topic: str):
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER})
    c.subscribe([topic])
    return c


def assignment(c) -> frozenset:
    return frozenset((tp.topic, tp.partition) for tp in c.assignment())


def poll_until(consumers: list, predicate, timeout: float = 30.0, what: str = "condition") -> None:
    """librdkafka runs the group protocol in its threads; poll() delivers the rebalances."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for c in consumers:
            c.poll(0.05)


KILLABLE = textwrap.dedent("""
    import json, sys
    from confluent_kafka import Consumer
    bootstrap, group, topic, config = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    c.subscribe([topic])
    last = None
    while True:
        c.poll(0.05)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            print(json.dumps(now), flush=True)
            last = now
""")


def spawn_member(bootstrap: str, group: str, topic: str) -> subprocess.Popen:
    import json

    return subprocess.Popen([sys.executable, "-c", KILLABLE, bootstrap, group, topic,
                             json.dumps(CONSUMER)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_killed_member_expires_and_the_rest_take_over(kbroker, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    local = [consumer(kbroker.bootstrap_servers, group, topic) for _ in range(2)]
    child = spawn_member(kbroker.bootstrap_servers, group, topic)
    try:
        poll_until(local, lambda: group_state(kbroker, group) is not None
                   and len(group_state(kbroker, group)[2]) == 3
                   and group_state(kbroker, group)[0] == "Stable"
                   and all(assignment(c) for c in local), what="a group of three")
        poll_until(local, lambda: len(assignment(local[0]) | assignment(local[1])) < PARTITIONS,
                   what="the child to hold partitions")
        mine = assignment(local[0]) | assignment(local[1])
        theirs = {(topic, p) for p in range(PARTITIONS)} - mine
        assert theirs and disjoint_cover([assignment(c) for c in local] + [frozenset(theirs)],
                                         topic, PARTITIONS)
        generation = group_state(kbroker, group)[1]
        child.send_signal(signal.SIGKILL)  # no LeaveGroup: only session expiry can notice
        child.wait(10)
        started = time.monotonic()
        poll_until(local, lambda: disjoint_cover([assignment(c) for c in local], topic, PARTITIONS),
                   what="the survivors to cover every partition")
        assert time.monotonic() - started < 15
        state, new_generation, ids = group_state(kbroker, group)
        assert state == "Stable" and len(ids) == 2 and new_generation > generation
    finally:
        if child.poll() is None:
            child.kill()
        for c in local:
            c.close()


def test_admin_lists_describes_and_deletes_groups(kbroker, topic):
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [consumer(kbroker.bootstrap_servers, group, topic) for _ in range(3)]
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap_servers})
    try:
        poll_until(members, lambda: disjoint_cover([assignment(c) for c in members], topic,
                                                   PARTITIONS), what="three-way cover")
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        mine = [g for g in listed.valid if g.group_id == group]
        assert mine and mine[0].state == ConsumerGroupState.STABLE
        assert not mine[0].is_simple_consumer_group
        described = admin.describe_consumer_groups([group])[group].result(timeout=15)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range" and len(described.members) == 3
        assigned = {(tp.topic, tp.partition) for m in described.members
                    for tp in m.assignment.topic_partitions}
        assert assigned == {(topic, p) for p in range(PARTITIONS)}
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups([group])[group].result(timeout=15)
        for c in members:
            c.close()
        members = []
        deleted = admin.delete_consumer_groups([group], request_timeout=10)
        assert deleted[group].result(timeout=15) is None
        with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
            admin.delete_consumer_groups(["never-existed"])["never-existed"].result(timeout=15)
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        assert group not in {g.group_id for g in listed.valid}
    finally:
        for c in members:
            c.close()


def test_group_survives_broker_restart(kbroker, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [consumer(kbroker.bootstrap_servers, group, topic) for _ in range(3)]
    try:
        poll_until(members, lambda: disjoint_cover([assignment(c) for c in members], topic,
                                                   PARTITIONS), what="three-way cover")
        before = group_state(kbroker, group)
        kbroker.restart()
        kbroker.wait_loaded()  # it serves while it replays the log: the group is not there yet
        assert group_state(kbroker, group) == before  # Stable, same generation, same members
        end = time.monotonic() + 4  # twice the session timeout: sessions restarted at load
        while time.monotonic() < end:
            for c in members:
                c.poll(0.05)
        assert group_state(kbroker, group) == before
        assert disjoint_cover([assignment(c) for c in members], topic, PARTITIONS)
    finally:
        for c in members:
            c.close()


def test_static_member_restarts_without_a_rebalance(kbroker, topic):
    from confluent_kafka import Consumer

    def static(instance: str):
        c = Consumer({"bootstrap.servers": kbroker.bootstrap_servers, "group.id": group,
                      "group.instance.id": instance, **CONSUMER})
        c.subscribe([topic])
        return c

    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [static("a"), static("b")]
    try:
        poll_until(members, lambda: disjoint_cover([assignment(c) for c in members], topic,
                                                   PARTITIONS), what="two-way cover")
        state, generation, ids = group_state(kbroker, group)
        held = assignment(members[1])
        members.pop().close()  # a static member leaves no LeaveGroup behind
        members.append(static("b"))
        poll_until(members, lambda: assignment(members[1]) == held, what="b's partitions back")
        state_after, generation_after, ids_after = group_state(kbroker, group)
        assert (state_after, generation_after) == ("Stable", generation) and ids_after != ids
    finally:
        for c in members:
            c.close()
