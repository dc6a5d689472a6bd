"""Every advertised OffsetCommit / OffsetFetch / OffsetDelete version, end to end over TCP."""

from __future__ import annotations

import pytest

from odradek.broker.wire_client import SyncClient
from tests.integration.test_offsets_clients import new_topic, unique

pytestmark = pytest.mark.integration


def served(client: SyncClient) -> dict[int, tuple[int, int]]:
    r = client.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def commit(client, version: int, group: str, topic: str, offset: int):
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": 5,
                 "commit_timestamp": -1, "committed_metadata": f"v{version}"}]}]}
    r = client.request(8, version, body)
    return r.topics[0].partitions[0].error_code


def fetch(client, version: int, group: str, topic: str):
    topics = [{"name": topic, "partition_indexes": [0]}]
    if version >= 8:
        r = client.request(9, version, {"groups": [{"group_id": group, "member_id": None,
                                                    "member_epoch": -1, "topics": topics}],
                                        "require_stable": True})
        return r.groups[0].topics[0].partitions[0]
    r = client.request(9, version, {"group_id": group, "topics": topics, "require_stable": True})
    return r.topics[0].partitions[0]


def test_every_version_over_tcp(broker):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    topic = new_topic(broker.bootstrap_servers)
    with SyncClient(host, int(port)) as client:
        versions = served(client)
        assert versions[8] == (0, 10) and versions[9] == (0, 10)  # v10 (by topic id): test_kafka42_versions and versions[47] == (0, 0)
        for v in range(10):
            group = unique(f"wire-v{v}")
            assert commit(client, v, group, topic, 100 + v) == 0
            for fv in range(10):
                p = fetch(client, fv, group, topic)
                assert (p.committed_offset, p.metadata, p.error_code) == (100 + v, f"v{v}", 0)
                expected_epoch = 5 if v >= 6 and fv >= 5 else -1
                assert p.committed_leader_epoch == expected_epoch
            r = client.request(47, 0, {"group_id": group, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0}]}]})
            assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 0
            assert fetch(client, 8, group, topic).committed_offset == -1
