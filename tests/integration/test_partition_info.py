"""Partition information APIs as a one-node Kafka answers them: OffsetForLeaderEpoch,
DescribeLogDirs, DescribeTopicPartitions, ElectLeaders.

OffsetForLeaderEpoch is how consumers validate a position after a restart
(KIP-320): with our constant leader epoch 0 the answer for epoch 0 is the
log end offset, exactly, and Kafka's other cases follow its leader-epoch
cache.  Real clients: kafka-python's ``describe_log_dirs``,
``describe_topic_partitions`` and ``elect_leaders``, confluent's
``elect_leaders``, and a Java-like validation round over the raw protocol.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient

from .group_helpers import kafka_python_subscriber
from .wire_helpers import create_topic, produce

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def epochs(b, version: int, topic: str, asks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """(partition, current_leader_epoch, leader_epoch) -> (error, leader_epoch, end_offset)."""
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(23, version, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": cur, "leader_epoch": e} for p, cur, e in asks]}]})
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in r.topics[0].partitions]


# --- OffsetForLeaderEpoch ---------------------------------------------------------------------

def test_offset_for_leader_epoch_answers_as_kafka(broker):
    topic = unique("ofle")
    create_topic(broker, topic, 2)
    produce(broker, topic, 7)
    for v in range(5):
        got = epochs(broker, v, topic, [(0, -1, 0), (1, -1, 0), (0, -1, 3), (0, -1, -1), (9, -1, 0)])
        le = (lambda e: e) if v >= 1 else (lambda e: -1)  # v0 answers carry no epoch
        assert got == [(0, le(0), 7), (0, le(0), 0), (0, -1, -1), (0, -1, -1), (3, -1, -1)], v
    for v in range(2, 5):  # current_leader_epoch fences (v2+)
        assert epochs(broker, v, topic, [(0, 0, 0), (0, 1, 0), (0, -2, 0)]) == [(0, 0, 7), (75, -1, -1),
                                                                               (74, -1, -1)]
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:  # after DeleteRecords
        c.request(21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 5}]}],
                          "timeout_ms": 1000})
    assert epochs(broker, 4, topic, [(0, 0, 0), (0, -1, -5)]) == [(0, 0, 7), (0, -5, 5)]


def test_committed_leader_epoch_validates_after_restart(broker):
    """A consumer resuming from a commit that carries leader epoch 0 (what Metadata says) finds
    its position valid: end offset for epoch 0 >= the position, before and after a restart."""
    from kafka import KafkaProducer, TopicPartition

    topic = unique("ofle-commit")
    create_topic(broker, topic)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(5):
        p.send(topic, f"m{i}".encode(), partition=0)
    p.flush(10)
    p.close(10)
    group = unique("g")
    c = kafka_python_subscriber(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    got = []
    while len(got) < 5:
        for records in c.poll(timeout_ms=500).values():
            got.extend(records)
    c.commit()
    c.close()
    broker.restart()
    assert epochs(broker, 4, topic, [(0, 0, 0)]) == [(0, 0, 5)]
    c = kafka_python_subscriber(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.poll(timeout_ms=2000)
        assert c.position(TopicPartition(topic, 0)) == 5  # not reset to the beginning
    finally:
        c.close()


# --- DescribeLogDirs ----------------------------------------------------------------------------

def test_kafka_python_describe_log_dirs(broker):
    from kafka import KafkaAdminClient

    topic = unique("logdirs")
    create_topic(broker, topic, 2)
    produce(broker, topic, 3, partition=1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        answers = admin.describe_log_dirs()
        partial = admin.describe_log_dirs({topic: [1]})
    finally:
        admin.close()
    assert len(answers) == 1 and answers[0]["broker"] == broker.app.node_id
    (log_dir,) = answers[0]["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(broker.data_dir.resolve())
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"]
             for p in t["partitions"]}
    lg = broker.app.topics.log(topic, 1)
    assert sizes[(topic, 0)] == 0 and sizes[(topic, 1)] == lg.size_bytes > 0
    (only,) = partial[0]["log_dirs"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only["topics"]] == [(topic, [1])]
    assert only["total_bytes"] > 0 and 0 <= only["usable_bytes"] <= only["total_bytes"]


def test_describe_log_dirs_every_version(broker):
    topic = unique("logdirs-v")
    create_topic(broker, topic)
    for v in range(5):
        with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
            r = c.request(35, v, {"topics": [{"topic": topic, "partitions": [0, 7]},
                                             {"topic": "nope", "partitions": [0]}]})
        (res,) = r.results
        assert res.error_code == 0 and [t.name for t in res.topics] == [topic]
        assert [p.partition_index for p in res.topics[0].partitions] == [0]


# --- DescribeTopicPartitions ----------------------------------------------------------------------

def test_kafka_python_describe_topic_partitions_pages(broker):
    from kafka import KafkaAdminClient

    a, b = sorted([unique("dtp"), unique("dtp")])
    create_topic(broker, a, 3)
    create_topic(broker, b, 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        full = admin.describe_topic_partitions([b, a, "missing-topic"])
        first = admin.describe_topic_partitions([a, b], response_partition_limit=2)
        second = admin.describe_topic_partitions([a, b], response_partition_limit=2, cursor=first["next_cursor"])
        third = admin.describe_topic_partitions([a, b], response_partition_limit=2,
                                                cursor=second["next_cursor"])
    finally:
        admin.close()
    by_name = {t["name"]: t for t in full["topics"]}
    assert [t["name"] for t in full["topics"]] == [a, b, "missing-topic"]
    assert by_name["missing-topic"]["error_code"] == 3
    assert [p["partition_index"] for p in by_name[a]["partitions"]] == [0, 1, 2]
    part = by_name[b]["partitions"][0]
    node = broker.app.node_id
    assert (part["leader_id"], part["leader_epoch"], part["replica_nodes"], part["isr_nodes"]) == (node, 0, [node],
                                                                                                  [node])
    assert by_name[a]["topic_id"] == broker.app.topics.get(a).topic_id
    assert full["next_cursor"] is None
    pages = [[(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]]
             for page in (first, second, third)]
    assert pages == [[(a, [0, 1])], [(a, [2]), (b, [0])], [(b, [1])]]
    assert first["next_cursor"] == {"topic_name": a, "partition_index": 2}
    assert third["next_cursor"] is None


# --- ElectLeaders -------------------------------------------------------------------------------

def test_elect_leaders_single_node(broker):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    topic = unique("elect")
    create_topic(broker, topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        r = admin.elect_leaders(0, {topic: [0, 1]})  # ELECTION_NOT_NEEDED is not an error to it
        assert [(p.partition_id, p.error_code) for p in r.replica_election_results[0].partition_result] == [
            (0, 84), (1, 84)]
    finally:
        admin.close()
    for v in range(3):
        with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
            r = c.request(43, v, {"election_type": 1, "timeout_ms": 1000,
                                  "topic_partitions": [{"topic": topic, "partitions": [1, 5]}]})
            assert [(p.partition_id, p.error_code) for p in r.replica_election_results[0].partition_result] == [
                (1, 84), (5, 3)]
            everything = c.request(43, v, {"election_type": 0, "timeout_ms": 1000, "topic_partitions": None})
            assert (everything.error_code, everything.replica_election_results) == (0, [])
    ck = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    result = ck.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(10)
    err = result[TopicPartition(topic, 0)]
    assert err is not None and err.code() == 84  # librdkafka reports it per partition


def test_describe_topic_partitions_all_topics_and_bad_cursors(broker):
    a, b = sorted([unique("dtpall"), unique("dtpall")])
    create_topic(broker, a, 2)
    create_topic(broker, b, 1)
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        r = c.request(75, 0, {"topics": [], "response_partition_limit": 2000,
                              "cursor": {"topic_name": a, "partition_index": 1}})
        got = [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics]
        assert got[:2] == [(a, [1]), (b, [0])] and r.next_cursor is None
        for cursor in ({"topic_name": "elsewhere", "partition_index": 0}, {"topic_name": a, "partition_index": -1}):
            r = c.request(75, 0, {"topics": [{"name": a}], "response_partition_limit": 10, "cursor": cursor})
            assert [(t.name, t.error_code) for t in r.topics] == [(a, 42)]  # INVALID_REQUEST
