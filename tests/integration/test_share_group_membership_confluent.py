"""confluent-kafka's ``ShareConsumer`` (librdkafka's KIP-932 share consumer) against the group
coordinator over TCP: it joins with ShareGroupHeartbeat v1, gets its partitions on a later heartbeat
(after their share-partition state is initialized), two consumers split the topic, every record is
delivered once, and a closed consumer leaves the group."""

from __future__ import annotations

import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):  # pragma: no cover - older clients
    pytest.skip("confluent-kafka without ShareConsumer (2.15+)", allow_module_level=True)

from confluent_kafka import Producer, ShareConsumer  # noqa: E402

from odradek.broker.wire_client import SyncClient  # noqa: E402
from odradek.testing import ThreadedBroker  # noqa: E402
from tests.integration.group_helpers import create_topic_kafka_python  # noqa: E402

pytestmark = pytest.mark.integration


def describe(b, group: str):
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        [d] = c.request(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups
        return d


def wait_for(predicate, timeout: float = 20.0, poll=lambda: None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        poll()
        if predicate():
            return True
    return False


def test_two_share_consumers_split_a_topic_and_leave_on_close():
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", "shared-topic"
    with ThreadedBroker(overrides={"group.share.heartbeat.interval.ms": 500}) as b:
        create_topic_kafka_python(b.bootstrap_servers, topic, 4)
        b.app.group_configs.set_overrides(group, {"share_auto_offset_reset": "earliest"})
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(40):
            producer.produce(topic, value=f"v{i}".encode(), partition=i % 4)
        producer.flush(10)
        consumers = [ShareConsumer({"bootstrap.servers": b.bootstrap_servers, "group.id": group})
                     for _ in range(2)]
        got: list[bytes] = []

        def poll() -> None:
            for c in consumers:
                for m in c.poll(0.2) or []:
                    if m.error() is None:
                        got.append(m.value())
        try:
            for c in consumers:
                c.subscribe([topic])

            def split() -> bool:
                d = describe(b, group)
                sets = [{p for tp in m.assignment.topic_partitions for p in tp.partitions} for m in d.members]
                return len(sets) == 2 and all(len(s) == 2 for s in sets) and sets[0] | sets[1] == {0, 1, 2, 3}
            assert wait_for(split, poll=poll)
            assert wait_for(lambda: len(got) >= 40, poll=poll)
            assert sorted(got) == sorted(f"v{i}".encode() for i in range(40))  # each once
            d = describe(b, group)
            assert (d.group_state, d.assignor_name, {m.client_host for m in d.members}) == (
                "Stable", "simple", {"/127.0.0.1"})
        finally:
            consumers[0].close()
        assert wait_for(lambda: len(describe(b, group).members) == 1, poll=lambda: consumers[1].poll(0.2))
        consumers[1].close()
        assert wait_for(lambda: describe(b, group).group_state == "Empty")
