"""Raw-protocol helpers for the share-group data path tests (ShareFetch 78, ShareAcknowledge 79,
the share offset admin APIs 90-92) over TCP."""

from __future__ import annotations

import time
import uuid

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch

SHARE_FETCH, SHARE_ACK, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 78, 79, 90, 91, 92
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4


def client(b) -> SyncClient:
    host, port = b.bootstrap_servers.rsplit(":", 1) if hasattr(b, "bootstrap_servers") else b
    return SyncClient(host, int(port))


def create_topic(c: SyncClient, name: str, partitions: int = 1) -> None:
    r = c.request(19, 5, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                      "assignments": [], "configs": []}],
                          "timeout_ms": 5000, "validate_only": False})
    assert r.topics[0].error_code == 0, r


def produce(c: SyncClient, topic: str, batches: int, per_batch: int, partition: int = 0) -> None:
    """``batches`` log batches of ``per_batch`` records each (values v<batch>-<i>)."""
    for n in range(batches):
        batch = encode_batch([(None, f"v{n}-{i}".encode()) for i in range(per_batch)], base_offset=0,
                             base_timestamp=int(time.time() * 1000))
        r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        assert r.responses[0].partition_responses[0].error_code == 0, r


def topic_id(c: SyncClient, topic: str) -> uuid.UUID:
    r = c.request(3, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                          "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    return r.topics[0].topic_id


def init_share(c: SyncClient, group: str, topic: str, partitions: int = 1, start: int = 0) -> None:
    """Give the share-partitions durable state (what the group coordinator's initialization does)."""
    r = c.request(ALTER_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
        {"partition_index": p, "start_offset": start} for p in range(partitions)]}]})
    assert r.error_code == 0 and all(p.error_code == 0 for t in r.responses for p in t.partitions), r


def acks(tid: uuid.UUID, partition: int, *batches: tuple[int, int, list[int]]) -> list[dict]:
    return [{"topic_id": tid, "partitions": [{"partition_index": partition, "acknowledgement_batches": [
        {"first_offset": f, "last_offset": la, "acknowledge_types": types} for f, la, types in batches]}]}]


def share_fetch(c: SyncClient, group: str, member: str, epoch: int, topics: list[dict], *, version: int = 1,
                max_records: int = 500, batch_size: int = 500, max_wait_ms: int = 0, forgotten=(), **extra):
    body = {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": batch_size,
            "topics": topics, "forgotten_topics_data": list(forgotten)}
    body.update(extra)
    return c.request(SHARE_FETCH, version, body)


def fetch_topics(tid: uuid.UUID, *partitions: int) -> list[dict]:
    return [{"topic_id": tid, "partitions": [{"partition_index": p, "acknowledgement_batches": []}
                                             for p in partitions]}]


def share_ack(c: SyncClient, group: str, member: str, epoch: int, topics: list[dict], *, version: int = 1, **extra):
    body = {"group_id": group, "member_id": member, "share_session_epoch": epoch, "topics": topics}
    body.update(extra)
    return c.request(SHARE_ACK, version, body)


def acquired(r) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) of every AcquiredRecords entry of a ShareFetch answer."""
    assert r.error_code == 0, r
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in r.responses for p in t.partitions for a in p.acquired_records]


def offsets_of(r) -> list[int]:
    return [o for first, last, _n in acquired(r) for o in range(first, last + 1)]


def partition_rows(r) -> list:
    return [p for t in r.responses for p in t.partitions]


def describe_offsets(c: SyncClient, group: str, topic: str | None = None, partitions=(0,), version: int = 1):
    topics = None if topic is None else [{"topic_name": topic, "partitions": list(partitions)}]
    return c.request(DESCRIBE_OFFSETS, version, {"groups": [{"group_id": group, "topics": topics}]})
