"""Deleting records with real admin clients: DeleteRecords (kafka-python, aiokafka, confluent-kafka).

What a user relies on: the low watermark moves (and -1 means the high
watermark), ListOffsets EARLIEST and a consumer starting from the beginning
follow it, a consumer positioned below it is reset as its
``auto.offset.reset`` says, whole segments below it leave the disk, the
boundary survives a restart, records above it are all still there, and bad
offsets get Kafka's OFFSET_OUT_OF_RANGE without moving anything.
"""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch

from .wire_helpers import create_topic, produce

pytestmark = pytest.mark.integration

N = 100


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def delete_raw(b, version: int, topic: str, offsets: dict[int, int]) -> list:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(21, version, {"topics": [{"name": topic, "partitions": [
            {"partition_index": p, "offset": o} for p, o in offsets.items()]}], "timeout_ms": 5000})
    return [(p.partition_index, p.low_watermark, p.error_code) for p in r.topics[0].partitions]


def earliest_latest(b, topic: str, partition: int = 0) -> tuple[int, int]:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        out = []
        for ts in (-2, -1):
            r = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                "timestamp": ts}]}]})
            assert r.topics[0].partitions[0].error_code == 0
            out.append(r.topics[0].partitions[0].offset)
    return out[0], out[1]


def fetch_raw(b, topic: str, offset: int):
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(1, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                              "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                  {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                                   "fetch_offset": offset, "log_start_offset": -1,
                                                                   "partition_max_bytes": 1 << 20}]}],
                              "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0]


def segment_bases(b, topic: str, partition: int = 0) -> list[int]:
    d = b.app.topics.log(topic, partition).directory
    return sorted(int(p.name[:-4]) for p in d.glob("*.log"))


def kp_consume(bs: str, topic: str, position: int | None, reset: str, want: int, timeout: float = 15.0) -> list[int]:
    """Offsets a kafka-python consumer reads from ``position`` (None: the beginning)."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset=reset, enable_auto_commit=False)
    try:
        c.assign([tp])
        if position is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, position)
        got: list[int] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got.extend(r.offset for r in records)
        return got
    finally:
        c.close()


# --- kafka-python ---------------------------------------------------------------------------

def test_kafka_python_delete_records_moves_start_durably(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.errors import OffsetOutOfRangeError

    topic = unique("dr-kp")
    create_topic(broker, topic, 1, {"segment.bytes": "1000"})
    produce(broker, topic, N)
    assert len(segment_bases(broker, topic)) > 3
    tp = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        result = admin.delete_records({tp: 50})
        assert result[tp]["low_watermark"] == 50 and result[tp]["error_code"] == 0
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tp: N + 1})  # past the high watermark
        assert admin.delete_records({tp: 20})[tp]["low_watermark"] == 50  # below the start: no change
    finally:
        admin.close()
    bases = segment_bases(broker, topic)
    assert bases[0] <= 50 and all(b > 50 for b in bases[1:])  # whole segments below it are gone
    assert earliest_latest(broker, topic) == (50, N)
    broker.restart()
    assert earliest_latest(broker, topic) == (50, N)
    assert kp_consume(broker.bootstrap_servers, topic, None, "earliest", N - 50) == list(range(50, N))
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert c.beginning_offsets([tp]) == {tp: 50}
    finally:
        c.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert admin.delete_records({tp: -1})[tp]["low_watermark"] == N  # -1: the high watermark
    finally:
        admin.close()
    broker.restart()
    assert earliest_latest(broker, topic) == (N, N)
    produce(broker, topic, 1)
    assert kp_consume(broker.bootstrap_servers, topic, None, "earliest", 1) == [N]


def test_consumers_below_the_start_reset_as_configured(broker):
    """Seeking below deleted records: OFFSET_OUT_OF_RANGE, then auto.offset.reset decides."""
    from confluent_kafka import Consumer, TopicPartition

    topic = unique("dr-reset")
    create_topic(broker, topic)
    produce(broker, topic, N)
    assert delete_raw(broker, 1, topic, {0: 60}) == [(0, 60, 0)]
    part = fetch_raw(broker, topic, 10)
    assert part.error_code == 1  # OFFSET_OUT_OF_RANGE
    assert fetch_raw(broker, topic, 60).log_start_offset == 60
    assert kp_consume(broker.bootstrap_servers, topic, 10, "earliest", N - 60) == list(range(60, N))
    assert kp_consume(broker.bootstrap_servers, topic, 10, "latest", 1, timeout=2) == []  # now at the end
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("g"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 10)])
        first = None
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                first = msg.offset()
        assert first == 60
    finally:
        c.close()


def test_delete_records_bad_input_gets_kafka_codes(broker):
    """Every version: negative or too-large offsets -> 1, unknown partition -> 3, internal topic -> 17,
    a compacted topic -> 44; nothing moves and nothing is lost."""
    topic = unique("dr-bad")
    compacted = unique("dr-compact")
    create_topic(broker, topic, 2)
    create_topic(broker, compacted, 1, {"cleanup.policy": "compact"})
    produce(broker, topic, 10)
    for v in range(3):
        assert delete_raw(broker, v, topic, {0: -2, 1: 11}) == [(0, -1, 1), (1, -1, 1)]
        assert delete_raw(broker, v, topic, {0: 11}) == [(0, -1, 1)]
        assert delete_raw(broker, v, topic, {5: 1}) == [(5, -1, 3)]
        assert delete_raw(broker, v, "__consumer_offsets", {0: 0}) == [(0, -1, 17)]
        assert delete_raw(broker, v, compacted, {0: 0}) == [(0, -1, 44)]
    assert earliest_latest(broker, topic) == (0, 10)
    assert delete_raw(broker, 2, topic, {0: 10, 1: -1}) == [(0, 10, 0), (1, 0, 0)]  # an empty partition: 0


# --- aiokafka -------------------------------------------------------------------------------

async def test_aiokafka_delete_records(abroker):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
    from aiokafka.errors import OffsetOutOfRangeError
    from aiokafka.structs import TopicPartition

    topic = unique("dr-aio")
    admin = AIOKafkaAdminClient(bootstrap_servers=abroker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
        lg = abroker.app.topics.log(topic, 0)
        for i in range(10):
            lg.append(encode_batch([(None, f"v{i}".encode())]))
        tp = TopicPartition(topic, 0)
        assert await admin.delete_records({tp: RecordsToDelete(4)}) == {tp: 4}
        with pytest.raises(OffsetOutOfRangeError):
            await admin.delete_records({tp: RecordsToDelete(99)})
        assert lg.log_start_offset == 4
    finally:
        await admin.close()


# --- confluent-kafka ----------------------------------------------------------------------------

def test_confluent_delete_records(broker):
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = unique("dr-ck")
    create_topic(broker, topic, 2)
    produce(broker, topic, 20)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(topic, 0, 7)])
    assert futures[TopicPartition(topic, 0)].result(10).low_watermark == 7
    futures = admin.delete_records([TopicPartition(topic, 0, -1)])  # OFFSET_END: everything
    assert futures[TopicPartition(topic, 0)].result(10).low_watermark == 20
    with pytest.raises(KafkaException) as err:
        admin.delete_records([TopicPartition(topic, 1, 5)])[TopicPartition(topic, 1)].result(10)
    assert err.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert earliest_latest(broker, topic) == (20, 20)
    assert earliest_latest(broker, topic, 1) == (0, 0)
