"""Commits pipelined in one read reach the log together, before any of their answers."""

from __future__ import annotations

import socket
import struct

import pytest

from odradek.broker.runtime.runtime import ShardStatus
from odradek.broker.wire_client import SyncClient, decode, encode
from odradek.protocol.records import iter_batches
from tests.integration.test_offsets_clients import new_topic, unique

pytestmark = pytest.mark.integration

NOT_COORDINATOR = 16


def commit_frame(cid: int, group: str, topic: str, partition: int, offset: int) -> bytes:
    return encode(8, 8, cid, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": 0,
             "commit_timestamp": -1, "committed_metadata": ""}]}]})


def fetch_frame(cid: int, group: str) -> bytes:
    return encode(9, 8, cid, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                          "topics": None}], "require_stable": True})


def connect(broker) -> SyncClient:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return SyncClient(host, int(port))


def batches_after(log, offset: int) -> list[list[int]]:
    """The offsets of each batch from ``offset`` on."""
    data = log.read(offset, 1 << 20)
    return [[r.offset for r in records] for _header, records in iter_batches(data)]


def test_pipelined_commits_are_one_batch_and_a_fetch_behind_them_sees_them(broker):
    topic = new_topic(broker.bootstrap_servers, partitions=3)
    group = unique("burst")
    log = broker.app.coordinator.shard_for(group).log
    start = log.log_end_offset
    with connect(broker) as client:
        client.send_raw(b"".join([commit_frame(i, group, topic, i, 10 + i) for i in range(3)]
                                 + [fetch_frame(3, group)]))
        answers = [decode(8, 8, client.recv_frame())[1] for _ in range(3)]
        fetched = decode(9, 8, client.recv_frame())[1]
    assert [a.topics[0].partitions[0].error_code for a in answers] == [0, 0, 0]
    parts = {p.partition_index: (p.committed_offset, p.error_code)
             for t in fetched.groups[0].topics for p in t.partitions}
    assert parts == {0: (10, 0), 1: (11, 0), 2: (12, 0)}
    assert batches_after(log, start) == [[start, start + 1, start + 2]]  # one batch, each request whole


def test_a_failed_append_closes_the_connection_instead_of_answering(broker, monkeypatch):
    topic = new_topic(broker.bootstrap_servers)
    group = unique("burst-fail")
    shard = broker.app.coordinator.shard_for(group)

    def disk_gone(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(shard.log, "append_records", disk_gone)
    with connect(broker) as client:
        client.send_raw(commit_frame(1, group, topic, 0, 7) + commit_frame(2, group, topic, 0, 8))
        with pytest.raises((ConnectionError, EOFError, socket.timeout, struct.error, OSError)):
            client.recv_frame()  # closed: no success was sent for a write that did not happen
    assert shard.status is ShardStatus.FAILED
    monkeypatch.undo()
    with connect(broker) as client:  # the failed shard no longer answers for its groups
        client.send_raw(commit_frame(3, group, topic, 0, 9))
        answer = decode(8, 8, client.recv_frame())[1]
    assert answer.topics[0].partitions[0].error_code == NOT_COORDINATOR
