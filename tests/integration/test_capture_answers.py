"""Capture pairs each request with the answer the client got, decoded, and its errors per level."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest

from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_two_refused_commits_then_one_that_lands_read_from_the_answers(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = _name("cap"), _name("cap-g")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send(topic, b"x").get(10)  # auto-creates the topic
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, retry_backoff_ms=20)
    try:
        tp = TopicPartition(topic, 0)
        with broker.fault("OffsetCommit", error="NOT_COORDINATOR", times=2):
            consumer.commit({tp: OffsetAndMetadata(7, "", -1)})
        commits = broker.captured("OffsetCommit", group_id=group)
        assert [c.error_names() for c in commits] == [{"NOT_COORDINATOR"}, {"NOT_COORDINATOR"}, set()]
        assert commits[0].errors == {f"topics[{topic}].partitions[0]": "NOT_COORDINATOR"}
        assert commits[2].ok and commits[2].answer.topics[0].partitions[0].error_code == 0
        assert broker.captured("OffsetCommit", group_id=group, error="NOT_COORDINATOR") == commits[:2]
        assert broker.captured("OffsetCommit", group_id=group, error="NONE") == commits[2:]
    finally:
        consumer.close()


def test_a_top_level_error_is_named_by_its_field(broker):
    from kafka import KafkaConsumer

    group = _name("cap-top")
    with broker.fault("FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", times=1):
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                 enable_auto_commit=False, retry_backoff_ms=20)
        try:
            from kafka import TopicPartition
            consumer.committed(TopicPartition("t", 0))
        finally:
            consumer.close()
    found = broker.captured("FindCoordinator", group_id=group)
    assert found[0].error_names() == {"COORDINATOR_NOT_AVAILABLE"}
    assert any(c.ok for c in found[1:])


def test_the_control_endpoint_returns_the_answers_as_json():
    with ThreadedBroker(overrides={"odradek.control.listener": "127.0.0.1:0"}) as broker:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        admin.close()
        host, port = broker.app.control_address
        req = urllib.request.Request(f"http://{host}:{port}/v1/captured", data=json.dumps(
            {"api": "ApiVersions"}).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            result = json.load(resp)["result"]
        assert result[0]["errors"] == {} and result[0]["answer"]["api_keys"]
