"""confluent-kafka's ``ShareConsumer`` against three brokers: the share fetches go to each
partition's leader, and a leader that moves sends the consumers to the new one (NOT_LEADER_OR_FOLLOWER
with the KIP-951 hint), with no record delivered twice."""

from __future__ import annotations

import pytest

from odradek.testing.handle import BrokerHandle

from .test_share_data_confluent import _consumer, _ids, _poll_until, _setup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

from confluent_kafka import Producer  # noqa: E402  (test_share_data_confluent skipped without it)


@pytest.fixture(scope="module")
def cluster():
    with BrokerHandle(brokers=3, overrides={"group.share.heartbeat.interval.ms": 500}) as handle:
        yield handle


def test_two_share_consumers_split_a_topic_led_by_three_brokers(cluster):
    topic, group = _setup(cluster, partitions=3, records=30)
    leaders = {p["leader_id"] for p in cluster.layout(topic)["partitions"].values()}
    assert len(leaders) == 3
    a, b = _consumer(cluster, group, topic), _consumer(cluster, group, topic)
    try:
        got = _poll_until([a, b], lambda g: len(g) >= 30)
        assert sorted(_ids(got)) == sorted({(i % 3, i // 3) for i in range(30)})
        moved = cluster.layout(topic)["partitions"][f"{topic}-0"]["leader_id"] % 3 + 1
        cluster.move_leader(topic, 0, moved)
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(6):
            p.produce(topic, f"w{i}".encode(), partition=0)
        p.flush(10)
        more = _poll_until([a, b], lambda g: len(g) >= 6)
        assert sorted(_ids(more)) == [(0, 10 + i) for i in range(6)]
        assert all(m.delivery_count() == 1 for _i, m in got + more)
    finally:
        a.close()
        b.close()
