"""Raw-frame set-up shared by the admin and data-plane wire tests: create a topic and
produce into it over TCP, asserting each step succeeded."""

from __future__ import annotations

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch


def create_topic(b, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    """CreateTopics v5 on broker ``b`` (a testing Broker); fails the test unless it succeeds."""
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 5000, "validate_only": False}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        assert c.request(19, 5, body).topics[0].error_code == 0


def produce(b, topic: str, n: int, partition: int = 0) -> None:
    """n records, one batch each (so small segments roll between them)."""
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        for i in range(n):
            r = c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition,
                                                    "records": encode_batch([(None, f"v{i}".encode())])}]}]})
            assert r.responses[0].partition_responses[0].error_code == 0
