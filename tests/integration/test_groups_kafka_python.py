"""kafka-python consumers form groups, rebalance, survive a broker restart; admin group APIs."""

from __future__ import annotations

import threading
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
    kafka_python_subscriber,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

PARTITIONS = 6


@pytest.fixture
def kbroker():
    with ThreadedBroker(overrides=FAST_GROUPS, brokers=BROKERS) as b:
        yield b


@pytest.fixture
def topic(kbroker):
    name = f"t-{uuid.uuid4().hex[:8]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, name, PARTITIONS)
    return name


class Member(threading.Thread):
    """One KafkaConsumer polling in its own thread; ``assignment`` is its latest view."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        super().__init__(daemon=True)
        self.args = (bootstrap, topic, group)
        self.assignment: frozenset = frozenset()
        self.stopping = threading.Event()
        self.started_polling = threading.Event()
        self.start()

    def run(self) -> None:
        bootstrap, topic, group = self.args
        consumer = kafka_python_subscriber(topic, bootstrap_servers=bootstrap, group_id=group,
                                           session_timeout_ms=3000, heartbeat_interval_ms=200,
                                           max_poll_interval_ms=10000, auto_offset_reset="earliest",
                                           request_timeout_ms=15000)
        try:
            while not self.stopping.is_set():
                consumer.poll(timeout_ms=1000)
                self.assignment = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
                self.started_polling.set()
        finally:
            consumer.close()  # a dynamic member sends LeaveGroup

    def leave(self) -> None:
        self.stopping.set()
        self.join(timeout=20)


def covered(members: list[Member], topic: str) -> bool:
    return disjoint_cover((m.assignment for m in members), topic, PARTITIONS)


def test_group_of_three_rebalances_on_join_and_clean_leave(kbroker, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(kbroker.bootstrap_servers, topic, group) for _ in range(3)]
    try:
        wait_for(lambda: covered(members, topic), what="three-way disjoint cover")
        state, generation, ids = group_state(kbroker, group)
        assert state == "Stable" and len(ids) == 3
        members.append(Member(kbroker.bootstrap_servers, topic, group))  # a fourth joins
        wait_for(lambda: covered(members, topic), what="four-way cover after a join")
        assert group_state(kbroker, group)[1] > generation
        leaving = members.pop(0)
        leaving.leave()  # clean leave: LeaveGroup, the rest rebalance at once
        wait_for(lambda: covered(members, topic), what="three-way cover after a leave")
        assert len(group_state(kbroker, group)[2]) == 3
    finally:
        for m in members:
            m.leave()


def test_group_survives_broker_restart_without_rebalancing(kbroker, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(kbroker.bootstrap_servers, topic, group) for _ in range(2)]
    try:
        wait_for(lambda: covered(members, topic), what="two-way cover")
        before = group_state(kbroker, group)
        assignments = [m.assignment for m in members]
        kbroker.restart()
        kbroker.wait_loaded()  # it serves while it replays the log: the group is not there yet
        loaded = group_state(kbroker, group)
        assert loaded == before  # rebuilt from the log: Stable, same generation and members
        # members reconnect and heartbeat; their sessions restarted at load, none expires
        wait_for(lambda: all(m.is_alive() for m in members), timeout=5)
        time.sleep(4)  # longer than the session timeout
        assert group_state(kbroker, group) == before
        assert [m.assignment for m in members] == assignments
    finally:
        for m in members:
            m.leave()


def test_admin_lists_describes_and_deletes_groups(kbroker, topic):
    from kafka import KafkaAdminClient

    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(kbroker.bootstrap_servers, topic, group) for _ in range(2)]
    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap_servers, request_timeout_ms=10000)
    try:
        wait_for(lambda: covered(members, topic), what="two-way cover")
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed[group]["protocol_type"], listed[group]["group_state"]) == ("consumer", "Stable")
        described = admin.describe_groups([group])[group]
        assert described["error"] is None and described["group_state"] == "Stable"
        assert (described["protocol_type"], described["protocol_data"]) == ("consumer", "range")
        assert len(described["members"]) == 2
        assigned = {(a["topic"], p) for m in described["members"]
                    for a in m["member_assignment"]["assigned_partitions"] for p in a["partitions"]}
        assert assigned == {(topic, p) for p in range(PARTITIONS)}
        assert admin.delete_groups([group])[group] == "NonEmptyGroupError"
        for m in members:
            m.leave()
        wait_for(lambda: group_state(kbroker, group)[0] == "Empty", what="empty group")
        assert admin.delete_groups([group, "never-existed"]) == {
            group: "OK", "never-existed": "GroupIdNotFoundError"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
    finally:
        for m in members:
            m.leave()
        admin.close()
