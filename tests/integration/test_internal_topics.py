"""The internal topics in Metadata, as Kafka lists them: ``__consumer_offsets``, ``__share_group_state`` and
``__transaction_state`` in every all-topics listing and by name, IsInternal true, with
every client's admin API; pattern subscriptions of every client leave them out."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.integration

INTERNAL = {"__consumer_offsets", "__transaction_state", "__share_group_state"}
METADATA = 3


def _metadata(b, topics, version):
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15) as c:
        if version == 0 and topics is None:
            body["topics"] = []  # v0 has no null: an empty list asks for every topic
        return c.request(METADATA, version, body)


def _partitions(b) -> dict[str, int]:
    return {"__consumer_offsets": b.app.coordinator_config.num_partitions,
            "__transaction_state": b.app.txn_config.num_partitions,
            "__share_group_state": len(b.app.share_coordinator.shards)}


@pytest.mark.parametrize("version", [0, 1, 9, 12])
def test_all_topics_metadata_lists_both_internal_topics(broker, version):
    listed = {t.name: (t.error_code, t.is_internal if version >= 1 else True, len(t.partitions))
              for t in _metadata(broker, None, version).topics}
    counts = _partitions(broker)
    assert {n: listed[n] for n in INTERNAL} == {n: (E.NONE, True, counts[n]) for n in INTERNAL}


@pytest.mark.parametrize("version", [1, 9, 12])
def test_internal_topics_are_served_by_name(broker, version):
    r = _metadata(broker, sorted(INTERNAL), version)
    counts = _partitions(broker)
    assert [(t.name, t.error_code, t.is_internal, len(t.partitions)) for t in r.topics] == [
        (n, E.NONE, True, counts[n]) for n in sorted(INTERNAL)]
    for t in r.topics:
        assert all(p.leader_id == broker.app.node_id for p in t.partitions)


def test_internal_topics_are_served_by_the_id_metadata_gives_them(broker):
    """Metadata v12 hands out the internal topics' ids; asking by those ids finds them."""
    ids = {t.name: t.topic_id for t in _metadata(broker, None, 12).topics if t.is_internal}
    assert set(ids) == INTERNAL
    with SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=15) as c:
        r = c.request(METADATA, 12, {"topics": [{"name": None, "topic_id": ids[n]} for n in sorted(INTERNAL)],
                                     "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        assert [(t.name, t.error_code, t.is_internal) for t in r.topics] == [
            (n, E.NONE, True) for n in sorted(INTERNAL)]
        gone = c.request(20, 6, {"topics": [{"name": None, "topic_id": ids["__transaction_state"]}],
                                 "timeout_ms": 5000})
        assert gone.responses[0].error_code == E.INVALID_TOPIC_EXCEPTION  # internal: never deleted


def test_kafka_python_admin_lists_and_describes_them(broker):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        assert INTERNAL <= set(admin.list_topics())
        described = {t["name"]: t for t in admin.describe_topics(sorted(INTERNAL))}
        assert {n: (t["error_code"], t["is_internal"]) for n, t in described.items()} == {
            n: (0, True) for n in INTERNAL}
    finally:
        admin.close()


async def test_aiokafka_admin_lists_and_describes_them(abroker):
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=abroker.bootstrap_servers)
    await admin.start()
    try:
        assert INTERNAL <= set(await admin.list_topics())
        described = {t["topic"]: t for t in await admin.describe_topics(sorted(INTERNAL))}
        assert {n: (t["error_code"], t["is_internal"]) for n, t in described.items()} == {
            n: (0, True) for n in INTERNAL}
    finally:
        await admin.close()


def test_confluent_admin_lists_them_and_finds_each_by_name(broker):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert INTERNAL <= set(admin.list_topics(timeout=10).topics)
    counts = _partitions(broker)
    for name in INTERNAL:
        md = admin.list_topics(topic=name, timeout=10).topics[name]
        assert md.error is None and len(md.partitions) == counts[name]


# --- pattern subscriptions leave them out (each client's exclude.internal.topics) -------------

def _topics(b, n: int = 2) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = f"pat{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    for f in admin.create_topics([NewTopic(f"{prefix}-{i}", 1) for i in range(n)]).values():
        f.result(10)
    return prefix


def test_kafka_python_pattern_subscription_skips_internal_topics(broker):
    from kafka import KafkaConsumer

    prefix = _topics(broker)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{prefix}",
                             metadata_max_age_ms=500)
    try:
        consumer.subscribe(pattern=".*")
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assigned = {tp.topic for tp in consumer.assignment()}
        assert {f"{prefix}-0", f"{prefix}-1"} <= assigned and not assigned & INTERNAL
    finally:
        consumer.close()


async def test_aiokafka_pattern_subscription_skips_internal_topics(abroker):
    from aiokafka import AIOKafkaConsumer

    from odradek.broker.wire_client import AsyncClient

    prefix = f"pat{uuid.uuid4().hex[:6]}"
    c = await AsyncClient.connect("127.0.0.1", abroker.port)
    try:
        for i in range(2):
            await c.request(19, 5, {"topics": [{"name": f"{prefix}-{i}", "num_partitions": 1,
                                                "replication_factor": -1, "assignments": [], "configs": []}],
                                    "timeout_ms": 5000, "validate_only": False})
    finally:
        await c.close()
    consumer = AIOKafkaConsumer(bootstrap_servers=abroker.bootstrap_servers, group_id=f"g-{prefix}",
                                metadata_max_age_ms=500)
    await consumer.start()
    try:
        consumer.subscribe(pattern=".*")
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            await consumer.getmany(timeout_ms=200)
        assigned = {tp.topic for tp in consumer.assignment()}
        assert {f"{prefix}-0", f"{prefix}-1"} <= assigned and not assigned & INTERNAL
    finally:
        await consumer.stop()


def test_confluent_pattern_subscription_skips_blacklisted_internal_topics(broker):
    """librdkafka has no exclude.internal.topics: against Kafka its ``^.*`` matches the internal
    topics too (confluentinc/librdkafka#3458), and ``topic.blacklist`` is how a user leaves
    them out; both hold here as there."""
    from confluent_kafka import Consumer

    prefix = _topics(broker)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{prefix}",
                         "topic.metadata.refresh.interval.ms": 500, "topic.blacklist": "^__.*"})
    try:
        consumer.subscribe(["^.*"])
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        assigned = {tp.topic for tp in consumer.assignment()}
        assert {f"{prefix}-0", f"{prefix}-1"} <= assigned and not assigned & INTERNAL
    finally:
        consumer.close()


def test_transaction_state_is_readable_by_name(broker):
    """Tools that read ``__transaction_state`` find it and its records: ListOffsets and Fetch
    by name once a transactional producer registered."""
    with SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=15) as c:
        init = c.request(22, 4, {"transactional_id": "tools-read-me", "transaction_timeout_ms": 60000,
                                 "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == E.NONE
        n = broker.app.txn_config.num_partitions
        ends = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "__transaction_state", "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in range(n)]}]})
        written = [p.partition_index for p in ends.topics[0].partitions if p.error_code == E.NONE and p.offset > 0]
        assert len(written) == 1
        r = c.request(1, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                              "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                              "forgotten_topics_data": [], "topics": [{"topic": "__transaction_state", "partitions": [
                                  {"partition": written[0], "current_leader_epoch": -1, "fetch_offset": 0,
                                   "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
        part = r.responses[0].partitions[0]
        assert part.error_code == E.NONE and b"tools-read-me" in part.records
