"""kafka-python 3.0.12 loses a rejoin whose ``poll`` times out mid-join; knowing the partitions
before the first ``poll`` avoids that rejoin (``group_helpers.kafka_python_subscriber``).

The broker answers every request in order and on time here: the member goes silent
because the client never applies the SyncGroup answer it got.  Made deterministic
with two delays: the consumer's first Metadata for its topic (so the leader's first
assignment has no partitions and it rejoins once the metadata comes), and every
SyncGroup of the group (so the ``poll`` that started the rejoin times out between
the JoinGroup answer and the SyncGroup one).  Against Kafka this needs a group that
forms before the consumer's metadata arrives, as with group.initial.rebalance.delay.ms=0
(the usual test setting); Kafka's 3 s default hides it.  A restarted broker serves
while it replays the log, so group state is read after ``wait_loaded``.
"""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import (
    FAST_GROUPS,
    create_topic_kafka_python,
    group_state,
    kafka_python_subscriber,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture
def fbroker():
    with ThreadedBroker(overrides=FAST_GROUPS) as b:
        yield b


def produce(bs: str, topic: str, n: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs)
    try:
        for i in range(n):
            p.send(topic, str(i).encode(), partition=0)
        p.flush(30)
    finally:
        p.close()


def poll_for(c, count: int, seconds: float) -> list:
    got: list = []
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=100).values():  # shorter than the SyncGroup delay
            got += msgs
    return got


@pytest.mark.parametrize("knows_partitions", [
    pytest.param(False, marks=pytest.mark.xfail(strict=True, reason="kafka-python 3.0.12 loses the rejoin: "
                                                 "when this passes, the client is fixed")),
    True,
], ids=["subscribed-only", "partitions-first"])
def test_kafka_python_rejoin_after_a_poll_timed_out_mid_join(fbroker, knows_partitions):
    from kafka import KafkaConsumer

    bs = fbroker.bootstrap_servers
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic_kafka_python(bs, topic, 1)
    produce(bs, topic, 3)
    fbroker.fault("Metadata", topic=topic, delay_ms=500, times=1)
    fbroker.fault("SyncGroup", group_id=group, delay_ms=300)
    config = {"bootstrap_servers": bs, "group_id": group, "auto_offset_reset": "earliest",
              "enable_auto_commit": False, "session_timeout_ms": 3000, "heartbeat_interval_ms": 100}
    c = kafka_python_subscriber(topic, **config) if knows_partitions else KafkaConsumer(topic, **config)
    try:
        # past the 3 s session: a lost member has expired by then
        assert len(poll_for(c, 3, seconds=5)) == 3
        state, generation, members = group_state(fbroker, group)
        assert state == "Stable" and len(members) == 1
    finally:
        c.close()


def test_group_state_after_a_restart_is_read_once_loaded(fbroker):
    """``restart`` returns when the broker listens; the groups are there after ``wait_loaded``."""
    bs = fbroker.bootstrap_servers
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic_kafka_python(bs, topic, 1)
    produce(bs, topic, 3)
    c = kafka_python_subscriber(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=3000,
                                heartbeat_interval_ms=300)
    try:
        assert len(poll_for(c, 3, seconds=30)) == 3
        before = group_state(fbroker, group)
        fbroker.restart()
        fbroker.wait_loaded()
        assert fbroker.call(lambda: fbroker.app.coordinator_loaded.is_set())
        assert group_state(fbroker, group) == before
    finally:
        c.close()
