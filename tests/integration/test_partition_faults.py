"""Per-partition faults: the error goes on the partitions a rule matches, the rest succeeds."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient

pytestmark = pytest.mark.integration


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wire(broker) -> SyncClient:
    return SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=10)


def _create(broker, name: str, partitions: int) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False}
    with _wire(broker) as c:
        assert c.request(19, 5, body).topics[0].error_code == 0


def _commit(c: SyncClient, group: str, topic: str, offsets: dict[int, int]):
    return c.request(8, 2, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                            "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                                {"partition_index": p, "committed_offset": o, "committed_metadata": ""}
                                for p, o in offsets.items()]}]})


def _committed(c: SyncClient, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    answer = c.request(9, 3, {"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}]})
    return {p.partition_index: p.committed_offset for p in answer.topics[0].partitions}


def test_a_partial_offset_commit_fails_one_partition_and_commits_the_others(broker):
    topic, group = _name("pp"), _name("pp-g")
    _create(broker, topic, 3)
    with broker.fault("OffsetCommit", error="OFFSET_METADATA_TOO_LARGE", topic=topic, partition=1,
                      per_partition=True, times=1), _wire(broker) as c:
        answer = _commit(c, group, topic, {0: 10, 1: 11, 2: 12})
        errors = {p.partition_index: p.error_code for t in answer.topics for p in t.partitions}
        assert errors == {0: 0, 1: 12, 2: 0}
        assert _committed(c, group, topic, [0, 1, 2]) == {0: 10, 1: -1, 2: 12}
    (capture,) = broker.captured("OffsetCommit", group_id=group)
    assert capture.errors == {f"topics[{topic}].partitions[1]": "OFFSET_METADATA_TOO_LARGE"}


def test_when_every_partition_matches_the_handler_answers_the_empty_rest(broker):
    topic, group = _name("pp-all"), _name("pp-all-g")
    _create(broker, topic, 2)
    with broker.fault("OffsetCommit", error="UNKNOWN_TOPIC_OR_PARTITION", topic=topic, per_partition=True), \
            _wire(broker) as c:
        answer = _commit(c, group, topic, {0: 1, 1: 2})
        assert sorted((p.partition_index, p.error_code) for t in answer.topics for p in t.partitions) == \
            [(0, 3), (1, 3)]
        assert _committed(c, group, topic, [0, 1]) == {0: -1, 1: -1}


def test_kafka_python_retries_only_the_partition_that_failed_its_produce(broker):
    from kafka import KafkaProducer

    topic = _name("pp-produce")
    _create(broker, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=50, retries=5,
                             retry_backoff_ms=20)
    try:
        with broker.fault("Produce", error="NOT_LEADER_OR_FOLLOWER", topic=topic, partition=1,
                          per_partition=True, times=1):
            futures = [producer.send(topic, b"a", partition=0), producer.send(topic, b"b", partition=1)]
            producer.flush(10)
            assert [f.get(10).offset for f in futures] == [0, 0]  # both landed once
    finally:
        producer.close()
    produces = [c for c in broker.captured("Produce", topic=topic) if c.answered]
    assert produces[0].errors == {f"responses[{topic}].partition_responses[1]": "NOT_LEADER_OR_FOLLOWER"}
    assert all(c.ok for c in produces[1:])


def test_an_api_without_per_partition_errors_is_refused_at_once(broker):
    with pytest.raises(ValueError, match="no error per partition"):
        broker.fault("Heartbeat", error="UNKNOWN_MEMBER_ID", per_partition=True)
    with pytest.raises(ValueError, match="give error"):
        broker.fault("OffsetCommit", delay_ms=10, per_partition=True)


def test_a_partial_offset_fetch_fails_one_partition_and_answers_the_others(broker):
    """OffsetFetch's handler writes its partitions ahead (an ``EncodedArray``): the chosen
    partition is added to the same topic's encoded rows, each with its error."""
    topic, group = _name("pp-fetch"), _name("pp-fetch-g")
    _create(broker, topic, 3)
    with _wire(broker) as c:
        assert all(p.error_code == 0 for t in _commit(c, group, topic, {0: 10, 1: 11, 2: 12}).topics
                   for p in t.partitions)
        with broker.fault("OffsetFetch", error="UNSTABLE_OFFSET_COMMIT", topic=topic, partition=1,
                          per_partition=True, times=1, versions="1-7"):
            answer = c.request(9, 3, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1, 2]}]})
        assert [(t.name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == \
            [(topic, 0, 0), (topic, 2, 0), (topic, 1, 88)]
        assert [p.committed_offset for p in answer.topics[0].partitions][:2] == [10, 12]


def test_an_error_partition_carries_the_values_kafka_puts_in_one(broker):
    """Kafka's error partitions: OffsetFetch offset -1, leader epoch -1, metadata ""
    (``OffsetFetchResponse.PartitionData`` with INVALID_OFFSET); Produce base offset -1
    (``PartitionResponse(error)``); Fetch high watermark -1 (``INVALID_HIGH_WATERMARK``);
    DeleteRecords low watermark -1 (``INVALID_LOW_WATERMARK``) -- not the declaration's 0."""
    from odradek.protocol.records import encode_batch  # noqa: PLC0415

    topic, group = _name("pp-values"), _name("pp-values-g")
    _create(broker, topic, 2)
    with _wire(broker) as c:
        _commit(c, group, topic, {0: 10, 1: 11})
        for version in (3, 5, 7):
            with broker.fault("OffsetFetch", error="UNSTABLE_OFFSET_COMMIT", topic=topic, partition=1,
                              per_partition=True, times=1, versions="1-7"):
                body = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}],
                        "require_stable": False}
                answer = c.request(9, version, body)
            failed = answer.topics[0].partitions[-1]
            assert (failed.partition_index, failed.error_code, failed.committed_offset, failed.metadata) == \
                (1, 88, -1, ""), version
            if version >= 5:
                assert failed.committed_leader_epoch == -1
        with broker.fault("Produce", error="NOT_LEADER_OR_FOLLOWER", topic=topic, partition=1,
                          per_partition=True, times=1):
            answer = c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": p, "records": encode_batch([(b"k", b"v")])}
                                                   for p in (0, 1)]}]})
        failed = answer.responses[0].partition_responses[-1]
        assert (failed.index, failed.error_code, failed.base_offset, failed.log_start_offset) == (1, 6, -1, -1)
        with broker.fault("Fetch", error="NOT_LEADER_OR_FOLLOWER", topic=topic, partition=1,
                          per_partition=True, times=1):
            answer = c.request(1, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20} for p in (0, 1)]}]})
        failed = answer.responses[0].partitions[-1]
        assert (failed.partition_index, failed.error_code, failed.high_watermark) == (1, 6, -1)
        with broker.fault("DeleteRecords", error="NOT_LEADER_OR_FOLLOWER", topic=topic, partition=1,
                          per_partition=True, times=1):
            answer = c.request(21, 1, {"topics": [{"name": topic, "partitions": [
                {"partition_index": p, "offset": 0} for p in (0, 1)]}], "timeout_ms": 5000})
        failed = answer.topics[0].partitions[-1]
        assert (failed.partition_index, failed.error_code, failed.low_watermark) == (1, 6, -1)
