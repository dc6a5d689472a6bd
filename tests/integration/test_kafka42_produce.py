"""Produce v10-v13 over raw frames, as a single-node Kafka 4.2 broker answers them: v10-12 keep
v9's layout (the leader hints of KIP-951 stay unset on an always-leading node), v13 names
topics by id (KIP-516): an id no topic has, the zero uuid included, is UNKNOWN_TOPIC_ID for its
partitions and is never auto-created; the answer is keyed by the request's ids."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.dataplane.batches import HEAVY_RECORDS
from odradek.broker.wire_client import SyncClient, encode
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import encode_batch

from .wire_helpers import create_topic

pytestmark = pytest.mark.integration

PRODUCE, FETCH, METADATA = 0, 1, 3


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def _topic(b, partitions: int = 1) -> tuple[str, uuid.UUID]:
    name = f"p42-{uuid.uuid4().hex[:8]}"
    create_topic(b, name, partitions)
    with _client(b) as c:
        r = c.request(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    return name, r.topics[0].topic_id


def _produce(c: SyncClient, version: int, topics: list[dict], acks: int = -1):
    return c.request(PRODUCE, version, {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
                                        "topic_data": topics})


def _records(value: bytes = b"v") -> bytes:
    return encode_batch([(None, value)])


@pytest.mark.parametrize("version", [10, 11, 12])
def test_produce_v10_to_v12_append_by_name(broker, version):
    name, _tid = _topic(broker)
    with _client(broker) as c:
        r = _produce(c, version, [{"name": name, "partition_data": [{"index": 0, "records": _records()}]}])
        again = _produce(c, version, [{"name": name, "partition_data": [{"index": 0, "records": _records()}]}])
    p = r.responses[0].partition_responses[0]
    assert (r.responses[0].name, p.error_code, p.base_offset) == (name, E.NONE, 0)
    assert again.responses[0].partition_responses[0].base_offset == 1
    # an always-leading node never sets KIP-951's hints: the tagged defaults
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)
    assert list(r.node_endpoints) == []


def test_produce_v13_appends_by_topic_id_and_answers_by_id(broker):
    name, tid = _topic(broker, partitions=2)
    with _client(broker) as c:
        r = _produce(c, 13, [{"topic_id": tid, "partition_data": [{"index": 1, "records": _records(b"a")},
                                                                  {"index": 0, "records": _records(b"b")}]}])
        fetched = c.request(FETCH, 12, {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                        "topics": [{"topic": name, "partitions": [
                                            {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
                                        "forgotten_topics_data": [], "rack_id": ""})
    assert [t.topic_id for t in r.responses] == [tid]
    assert [(p.index, p.error_code, p.base_offset) for p in r.responses[0].partition_responses] == [
        (1, E.NONE, 0), (0, E.NONE, 0)]
    assert fetched.responses[0].partitions[0].high_watermark == 1


@pytest.mark.parametrize("topic_id", [uuid.uuid4(), uuid.UUID(int=0)], ids=["unknown", "zero"])
def test_produce_v13_unknown_topic_id(broker, topic_id):
    name, tid = _topic(broker)
    with _client(broker) as c:
        r = _produce(c, 13, [{"topic_id": topic_id, "partition_data": [{"index": 0, "records": _records()},
                                                                       {"index": 3, "records": _records()}]},
                             {"topic_id": tid, "partition_data": [{"index": 0, "records": _records()},
                                                                  {"index": 5, "records": _records()}]}])
    assert [(t.topic_id, [(p.index, p.error_code, p.error_message) for p in t.partition_responses])
            for t in r.responses] == [
        (topic_id, [(0, E.UNKNOWN_TOPIC_ID, None), (3, E.UNKNOWN_TOPIC_ID, None)]),
        (tid, [(0, E.NONE, None), (5, E.UNKNOWN_TOPIC_OR_PARTITION, f"{name} has no partition 5")])]
    assert broker.app.topics.by_id(topic_id) is None  # never auto-created


def test_produce_v13_unknown_topic_id_with_acks_0_is_unanswered_and_the_connection_lives(broker):
    _name, tid = _topic(broker)
    with _client(broker) as c:
        c.send_raw(encode(PRODUCE, 13, 99, {"transactional_id": None, "acks": 0, "timeout_ms": 5000, "topic_data": [
            {"topic_id": uuid.uuid4(), "partition_data": [{"index": 0, "records": _records()}]}]}))
        r = _produce(c, 13, [{"topic_id": tid, "partition_data": [{"index": 0, "records": _records()}]}])
    assert r.responses[0].partition_responses[0].error_code == E.NONE


def test_produce_v13_big_batch_by_topic_id(broker):
    """A batch checked off the event loop (``is_heavy``) is appended by id like a small one."""
    _name, tid = _topic(broker)
    big = encode_batch([(None, b"x")] * (HEAVY_RECORDS + 1))
    with _client(broker) as c:
        r = _produce(c, 13, [{"topic_id": uuid.uuid4(), "partition_data": [{"index": 0, "records": big}]},
                             {"topic_id": tid, "partition_data": [{"index": 0, "records": big}]}])
    assert [t.partition_responses[0].error_code for t in r.responses] == [E.UNKNOWN_TOPIC_ID, E.NONE]
