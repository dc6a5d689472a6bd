"""Reset: one call empties a shared broker -- topics, groups, offsets, producer state -- and the
clients connected before it see the empty broker."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

CREATE_TOPICS, METADATA, OFFSET_COMMIT, LIST_GROUPS = 19, 3, 8, 16


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wire(broker) -> SyncClient:
    return SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=30)


def _create_many(c: SyncClient, names: list[str]) -> None:
    body = {"topics": [{"name": n, "num_partitions": 1, "replication_factor": -1, "assignments": [],
                        "configs": []} for n in names], "timeout_ms": 60000, "validate_only": False}
    assert all(t.error_code == 0 for t in c.request(CREATE_TOPICS, 5, body).topics)


def _commit(c: SyncClient, group: str, topic: str, offset: int) -> None:
    """A simple (memberless) group's commit, as an admin tool or a manually assigned consumer makes."""
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                        "committed_leader_epoch": -1,
                                                        "committed_metadata": ""}]}]}
    resp = c.request(OFFSET_COMMIT, 7, body)
    assert resp.topics[0].partitions[0].error_code == 0


def _topics(c: SyncClient) -> list[str]:
    meta = c.request(METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_cluster_authorized_operations": False,
                                   "include_topic_authorized_operations": False})
    return sorted(t.name for t in meta.topics if not t.is_internal)


def _groups(c: SyncClient) -> list[str]:
    return sorted(g.group_id for g in c.request(LIST_GROUPS, 4, {"states_filter": []}).groups)


def test_a_thousand_topics_and_a_hundred_groups_gone_in_one_call(broker):
    names = [f"reset-{i:04d}" for i in range(1000)]
    with _wire(broker) as c:
        _create_many(c, names)
        for g in range(100):
            _commit(c, f"reset-group-{g:03d}", names[g], g + 1)
        assert len(_topics(c)) == 1000 and len(_groups(c)) == 100
        gone = broker.reset()
        assert (gone["topics"], gone["groups"]) == (1000, 100)
        # the same connection, opened before the reset, sees the empty broker
        assert _topics(c) == [] and _groups(c) == []
        _create_many(c, names[:3])  # the names are free again, and start empty
        assert _topics(c) == names[:3]
    for lg in broker.call(lambda: list(broker.app.logs.logs().values())):
        assert lg.log_end_offset == 0


def test_connected_clients_see_the_empty_broker(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bs, topic, group = broker.bootstrap_servers, _name("reset-clients"), _name("reset-clients-g")
    producer = KafkaProducer(bootstrap_servers=bs)  # idempotent: producer state on the broker
    consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        for i in range(5):
            producer.send(topic, value=b"old-%d" % i, partition=0).get(10)  # auto-created
        consumer.commit({tp: OffsetAndMetadata(5, "", -1)})
        assert consumer.committed(tp) == 5

        broker.reset()

        assert consumer.committed(tp) is None  # the group and its offsets are gone
        assert topic not in consumer.topics()
        # the producer, connected all along, writes to a new, empty topic of the same name
        assert producer.send(topic, value=b"new", partition=0).get(10).offset == 0
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = consumer.poll(timeout_ms=5000, max_records=10).get(tp, [])
        assert [r.value for r in records] == [b"new"]
    finally:
        producer.close(10)
        consumer.close()


async def test_a_group_in_the_middle_of_its_life_rejoins_the_empty_broker(abroker):
    """aiokafka's group member is answered NOT_COORDINATOR / UNKNOWN_MEMBER_ID after the reset
    and joins the new, empty coordinator: the group exists again, with one member."""
    from aiokafka import AIOKafkaConsumer

    from .group_helpers import await_for

    topic, group = _name("reset-aio"), _name("reset-aio-g")
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=abroker.bootstrap_servers, group_id=group,
                                heartbeat_interval_ms=100)
    await abroker.app.topics.create(topic, 1)
    await consumer.start()
    try:
        await await_for(lambda: len(consumer.assignment()) == 1, what="assignment")
        gone = await abroker.reset()
        assert gone["groups"] == 1
        await abroker.app.topics.ensure(topic)  # the consumer's metadata may auto-create it first
        await await_for(lambda: group in abroker.app.coordinator.shard_for(group).groups,
                        what="the consumer rejoining the empty broker")
        await await_for(lambda: len(consumer.assignment()) == 1, what="assignment after reset")
    finally:
        await consumer.stop()


def test_reset_unfreezes_the_clock_and_keeps_its_time(broker):
    frozen = broker.freeze_clock()
    broker.advance(seconds=60)
    broker.reset()
    assert broker.call(lambda: broker.app.clock.frozen) is False
    assert broker.call(broker.app.clock.now_ms) >= frozen + 60_000



async def test_resets_under_load_break_no_client_and_log_no_error():
    """A producer and a consumer group keep going through several resets; the broker logs no
    error and both clients still work afterwards (each reset empties what they made so far)."""
    from odradek.testing import Broker

    async with Broker(overrides={"num.partitions": 2}) as abroker:  # auto-created again alike
        await _resets_under_load(abroker)


async def _resets_under_load(abroker) -> None:
    import asyncio

    import structlog
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from .group_helpers import await_for

    topic, group = _name("reset-load"), _name("reset-load-g")
    await abroker.app.topics.create(topic, 2)
    producer = AIOKafkaProducer(bootstrap_servers=abroker.bootstrap_servers)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=abroker.bootstrap_servers, group_id=group,
                                heartbeat_interval_ms=100, metadata_max_age_ms=200,
                                enable_auto_commit=False)
    await producer.start()
    await consumer.start()
    stop = asyncio.Event()

    async def produce() -> int:
        sent = 0
        while not stop.is_set():
            try:
                await producer.send_and_wait(topic, b"x")  # auto-creates the topic after a reset
                sent += 1
            except Exception:  # a send racing a reset may fail; the next goes on
                await asyncio.sleep(0.01)
        return sent

    async def consume() -> None:
        while not stop.is_set():
            await consumer.getmany(timeout_ms=50)

    with structlog.testing.capture_logs() as logs:
        tasks = [asyncio.ensure_future(produce()), asyncio.ensure_future(consume())]
        try:
            for _ in range(5):
                await asyncio.sleep(0.1)  # let traffic flow between resets
                await abroker.reset()
            # the producer re-creates the topic; the consumer's group rejoins
            await await_for(lambda: len(consumer.assignment()) == 2, what="the group back after resets")
        finally:
            stop.set()
            sent, _ = await asyncio.gather(*tasks)
            await consumer.stop()
            await producer.stop()
    assert sent > 0
    assert any(e["event"] == "broker.reset" for e in logs)  # the capture sees the broker's log
    errors = [e for e in logs if e.get("log_level") in ("error", "critical")]
    assert errors == []


def test_reset_removes_fault_rules_and_captured_requests(broker):
    from odradek.protocol.errors import ErrorCode

    heartbeat = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    broker.fault("Heartbeat", error="NOT_COORDINATOR")  # not removed by the test: reset must
    with _wire(broker) as c:
        assert c.request(12, 3, heartbeat).error_code == ErrorCode.NOT_COORDINATOR
        assert broker.captured("Heartbeat")
        assert broker.reset()["faults"] == 1
        assert broker.faults() == [] and broker.captured() == []
        assert c.request(12, 3, heartbeat).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_clock_and_reset_from_outside(capsys):
    import json

    from odradek.broker import cli
    from odradek.testing import ThreadedBroker

    with ThreadedBroker(overrides={"odradek.control.listener": "0"}) as b:
        host, port = b.app.control_address

        def run(*argv: str):
            assert cli.main(["control", "--endpoint", f"{host}:{port}", *argv]) == 0
            return json.loads(capsys.readouterr().out)

        frozen = run("freeze_clock")
        assert run("advance_clock", "ms=60000") == frozen + 60_000
        assert run("clock")["frozen"] is True
        run("unfreeze_clock")
        with _wire(b) as c:
            _create_many(c, ["outside"])
        gone = run("reset")
        assert gone["topics"] == 1
        with _wire(b) as c:
            assert _topics(c) == []


def test_reset_returns_runtime_broker_settings_to_the_static_ones(broker):
    """A test that changed a broker-level default with IncrementalAlterConfigs does not pass it on."""
    node = str(broker.app.node_id)
    body = {"resources": [{"resource_type": 4, "resource_name": node, "configs": [
        {"name": "log.retention.ms", "config_operation": 0, "value": "1234"}]}], "validate_only": False}
    with _wire(broker) as c:
        assert c.request(44, 1, body).responses[0].error_code == 0
    assert broker.call(lambda: broker.app.log_config.retention_ms) == 1234
    broker.reset()
    assert broker.call(lambda: broker.app.log_config.retention_ms) == 7 * 24 * 3600 * 1000
    assert broker.call(lambda: (broker.app.dynamic_config.node, broker.app.dynamic_config.default)) == ({}, {})


def test_a_reset_cut_short_by_a_crash_forgets_every_store_a_reset_empties(tmp_path):
    """A start that finds the marker finishes the reset: client quotas, client-metrics
    resources and runtime broker settings go as in a reset that ran to the end."""
    from odradek.broker.control.reset import RESET_MARKER  # noqa: PLC0415

    with ThreadedBroker(data_dir=tmp_path) as b, _wire(b) as c:
        quota = {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "slow"}],
                              "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}],
                 "validate_only": False}
        assert c.request(49, 1, quota).entries[0].error_code == 0
        for rtype, name, key, value in ((16, "sub", "metrics", "org.apache.kafka."),
                                        (4, str(b.app.node_id), "log.retention.ms", "1234")):
            body = {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [
                {"name": key, "config_operation": 0, "value": value}]}], "validate_only": False}
            assert c.request(44, 1, body).responses[0].error_code == 0
    (tmp_path / RESET_MARKER).write_text("")  # as a reset killed half-way leaves it
    with ThreadedBroker(data_dir=tmp_path) as b:
        assert b.call(lambda: b.app.client_quotas.quotas) == {}
        assert b.call(lambda: b.app.client_metrics.subscriptions.resources) == {}
        assert b.call(lambda: (b.app.dynamic_config.node, b.app.dynamic_config.default)) == ({}, {})
