"""Every real client connects, negotiates versions and sees the cluster."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_kafka_python_bootstraps(broker):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == broker.app.node_id
        assert cluster["cluster_id"] == broker.app.cluster_id
        assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [
            ("127.0.0.1", broker.app.endpoint.port)]
        assert sorted(admin.list_topics()) == ["__consumer_offsets", "__share_group_state", "__transaction_state"]  # internal ones
    finally:
        admin.close()


async def test_aiokafka_bootstraps(abroker):
    from aiokafka import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=abroker.bootstrap_servers)
    await client.bootstrap()
    try:
        brokers = client.cluster.brokers()
        assert [(b.nodeId, b.host, b.port) for b in brokers] == [(1, "127.0.0.1", abroker.port)]
        assert client.cluster.topics() == set()  # internal topics excluded by default
    finally:
        await client.close()


def test_confluent_kafka_bootstraps(broker):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    md = admin.list_topics(timeout=10)
    assert md.cluster_id == broker.app.cluster_id
    assert md.controller_id == broker.app.node_id
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
        1: ("127.0.0.1", broker.app.endpoint.port)}
    assert set(md.topics) == {"__consumer_offsets", "__share_group_state", "__transaction_state"}  # internal ones


def test_cluster_id_survives_restart(broker):
    before = broker.app.cluster_id
    broker.restart()
    assert broker.app.cluster_id == before
