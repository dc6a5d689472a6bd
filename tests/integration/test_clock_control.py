"""Fast-forwarding the broker's clock with real clients: what waits on time fires, nobody sleeps.

Each test moves the broker's time by minutes or days with ``advance`` and
then checks what a client sees: a member that stopped heartbeating is gone
and the others own its partitions, an empty group's offsets expired, old
segments were deleted, an idle connection was closed.  Clients keep their own
(real) time: only the broker's deadlines move.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.broker.clock import BrokerClock
from odradek.broker.wire_client import SyncClient
from odradek.offsets.consumer_protocol import Subscription, encode_subscription

from .group_helpers import await_for, group_state

pytestmark = pytest.mark.integration

MINUTE = 60
DAY = 24 * 3600
JOIN_GROUP, SYNC_GROUP, HEARTBEAT = 11, 14, 12
UNKNOWN_MEMBER_ID = 25


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wire(broker, timeout: float = 10.0) -> SyncClient:
    return SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=timeout)


def _create(broker, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (config or {}).items()]}],
            "timeout_ms": 5000, "validate_only": False}
    with _wire(broker) as c:
        assert c.request(19, 5, body).topics[0].error_code == 0


def test_the_broker_runs_on_a_clock_tests_can_move(broker):
    assert isinstance(broker.app.clock, BrokerClock)
    before = broker.freeze_clock()
    assert broker.advance(seconds=90) == before + 90_000
    assert broker.advance_clock(5) == before + 90_005  # frozen: nothing else moved it
    assert broker.unfreeze_clock() >= before + 90_005
    with pytest.raises(ValueError):
        broker.advance(seconds=-1)


def _raw_member_joins(broker, group: str, topic: str) -> tuple[str, int]:
    """A member that joins and syncs, then never heartbeats again (a hung process)."""
    meta = encode_subscription(Subscription(version=0, topics=[topic]))
    with _wire(broker, timeout=20) as c:
        joined = c.request(JOIN_GROUP, 3, {
            "group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": 10000,
            "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "roundrobin", "metadata": meta}]})
        assert joined.error_code == 0
        synced = c.request(SYNC_GROUP, 3, {"group_id": group, "generation_id": joined.generation_id,
                                           "member_id": joined.member_id, "group_instance_id": None,
                                           "assignments": []})
        assert synced.error_code == 0
    return joined.member_id, joined.generation_id


async def test_a_member_that_stops_heartbeating_is_removed_after_an_advance(broker):
    from aiokafka import AIOKafkaConsumer

    topic, group = _name("clock-session"), _name("clock-session-g")
    _create(broker, topic, 2)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                session_timeout_ms=45000, heartbeat_interval_ms=100)
    await consumer.start()
    try:
        await await_for(lambda: len(consumer.assignment()) == 2, what="the consumer owns both partitions")
        member, _gen = await asyncio.to_thread(_raw_member_joins, broker, group, topic)
        await await_for(lambda: len(consumer.assignment()) == 1, what="the partitions shared")
        assert member in group_state(broker, group)[2]

        broker.advance(seconds=7)  # past the silent member's 6 s session, not the consumer's 45 s

        assert member not in group_state(broker, group)[2]
        await await_for(lambda: len(consumer.assignment()) == 2, what="the survivor takes over")
        with _wire(broker) as c:
            hb = c.request(HEARTBEAT, 3, {"group_id": group, "generation_id": _gen,
                                          "member_id": member, "group_instance_id": None})
        assert hb.error_code == UNKNOWN_MEMBER_ID
    finally:
        await consumer.stop()


def _committed(bs: str, group: str, topic: str) -> int | None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()


def test_an_empty_groups_offsets_expire_after_an_advance_past_the_retention(broker):
    """offsets.retention.minutes (7 days) counts from when the group became empty (KIP-211);
    the expiry sweep every offsets.retention.check.interval.ms (10 minutes) removes them."""
    from kafka import KafkaConsumer, TopicPartition

    topic, group = _name("clock-expiry"), _name("clock-expiry-g")
    _create(broker, topic, 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    try:
        from kafka.structs import OffsetAndMetadata

        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(42, "", -1)})
    finally:
        consumer.close()  # the group is empty from now on
    broker.advance(seconds=7 * DAY - MINUTE)
    assert _committed(broker.bootstrap_servers, group, topic) == 42  # not yet
    broker.advance(seconds=12 * MINUTE)
    assert _committed(broker.bootstrap_servers, group, topic) is None


def test_time_based_segment_retention_deletes_after_an_advance(broker):
    """With LogAppendTime the broker stamps records with its own (advanced) time, so segment.ms
    rolls and retention.ms deletes on the broker's clock alone.  (With CreateTime a roll compares
    the records' own timestamps, as on Kafka: a client must stamp them with the broker's time.)"""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _name("clock-retention")
    _create(broker, topic, 1, {"retention.ms": "600000", "segment.ms": "30000",
                               "message.timestamp.type": "LogAppendTime"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        for i in range(3):
            producer.send(topic, value=b"old-%d" % i).get(10)
        broker.advance(seconds=31)  # the segment is older than segment.ms: the next append rolls
        producer.send(topic, value=b"new").get(10)
    finally:
        producer.close(10)
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert consumer.beginning_offsets([tp])[tp] == 0
        # the old segment past retention.ms (10 minutes), the new record not; the retention
        # round (every log.retention.check.interval.ms, 5 minutes) is due: it runs
        broker.advance(seconds=10 * MINUTE - 31 + 10)
        assert consumer.beginning_offsets([tp])[tp] == 3
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = consumer.poll(timeout_ms=5000, max_records=10).get(tp, [])
        assert [r.value for r in records] == [b"new"]
    finally:
        consumer.close()


def test_an_idle_connection_is_closed_after_an_advance(broker):
    """connections.max.idle.ms is ten minutes by default; nobody waits ten minutes."""
    with _wire(broker) as c:
        assert c.request(18, 0, {}).error_code == 0
        broker.advance(seconds=11 * MINUTE)
        c.sock.settimeout(10)
        try:
            closed = c.sock.recv(1) == b""
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            closed = False
        assert closed
    with _wire(broker) as c:  # a new connection is served
        assert c.request(18, 0, {}).error_code == 0


def test_a_quiet_topic_in_one_segment_is_emptied_by_time_retention_after_an_advance(broker):
    """As on Kafka, the active segment counts when all of it is past retention.ms: it is rolled
    and deleted, the log start offset moves to the end, and new records are kept."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = _name("clock-quiet")
    _create(broker, topic, 1, {"retention.ms": "60000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        for i in range(3):
            producer.send(topic, value=b"old-%d" % i).get(10)
        tp = TopicPartition(topic, 0)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        try:
            broker.advance(seconds=5 * MINUTE + 1)  # past retention.ms and the 5-minute check
            assert consumer.beginning_offsets([tp])[tp] == 3
            assert consumer.end_offsets([tp])[tp] == 3
            assert producer.send(topic, value=b"new").get(10).offset == 3
        finally:
            consumer.close()
    finally:
        producer.close(10)


def test_a_removed_fault_rules_expiry_timer_goes_with_it(broker):
    """A rule with ``seconds=`` removed, cleared or spent before it expires leaves no timer
    behind on the broker's clock (a long session adds and removes thousands)."""
    pending = broker.app.clock.pending
    before = broker.call(pending)
    ids = [broker.control("add_fault", api="OffsetCommit", error="NOT_COORDINATOR", seconds=600)
           for _ in range(3)]
    assert broker.call(pending) == before + 3
    assert broker.remove_fault(ids[0]) is True
    assert broker.call(pending) == before + 2
    assert broker.clear_faults() == 2
    assert broker.call(pending) == before
    broker.control("add_fault", api="ListGroups", error="COORDINATOR_NOT_AVAILABLE", seconds=600, times=1)
    with _wire(broker) as c:
        assert c.request(16, 4, {"states_filter": []}).error_code == 15
    assert broker.faults() == [] and broker.call(pending) == before  # spent
    broker.control("add_fault", api="OffsetCommit", error="NOT_COORDINATOR", seconds=1)
    broker.advance(seconds=2)
    assert broker.faults() == [] and broker.call(pending) == before  # expired: its timer ran
