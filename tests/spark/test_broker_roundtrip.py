"""A data dir written by a real broker: the report equals OffsetFetch, compaction keeps what it serves."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

from odradek.broker.wire_client import SyncClient  # noqa: E402
from odradek.pipeline import reports  # noqa: E402
from odradek.pipeline.compact import compact_data_dir  # noqa: E402
from odradek.testing.handle import BrokerHandle  # noqa: E402

pytestmark = pytest.mark.spark

API_VERSIONS, OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE, CREATE_TOPICS = 18, 8, 9, 47, 19
COORDINATOR_LOAD_IN_PROGRESS = 14
COMMIT_V, FETCH_V = 7, 7  # v7: leader epochs, non-flexible; OffsetFetch v7: topics null = everything
GROUPS = ("billing", "search", "audit")
TOPICS = {"events": 4, "clicks": 2}


def _served(client: SyncClient) -> dict[int, tuple[int, int]]:
    r = client.request(API_VERSIONS, 3, {"client_software_name": "odradek-tests", "client_software_version": "1"})
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def _fetch_all(client: SyncClient) -> set[tuple[str, str, int, int, int, str]]:
    out = set()
    for group in GROUPS:
        deadline = time.monotonic() + 10
        while True:
            r = client.request(OFFSET_FETCH, FETCH_V, {"group_id": group, "topics": None, "require_stable": False})
            if r.error_code != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # a restarted broker serves while its offsets partitions load
        assert r.error_code == 0
        for t in r.topics:
            for p in t.partitions:
                assert p.error_code == 0
                out.add((group, t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                         p.metadata or ""))
    return out


def _commit(client: SyncClient, group: str, offsets: dict[tuple[str, int], int], epoch: int) -> None:
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), off in offsets.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "committed_offset": off,
                                               "committed_leader_epoch": epoch, "committed_metadata": f"m{off}"})
    r = client.request(OFFSET_COMMIT, COMMIT_V, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    assert {p.error_code for t in r.topics for p in t.partitions} == {0}


def test_report_equals_offset_fetch_and_compaction_serves_the_same(spark, tmp_path):
    data = tmp_path / "broker"
    with BrokerHandle(data_dir=data) as broker, SyncClient(broker.host, broker.port) as client:
        served = _served(client)
        needed = {OFFSET_COMMIT: COMMIT_V, OFFSET_FETCH: FETCH_V, CREATE_TOPICS: 5}
        missing = [k for k, v in needed.items() if not (served.get(k, (99, -1))[0] <= v <= served.get(k, (99, -1))[1])]
        if missing:
            pytest.skip(f"the broker does not serve API keys {missing} at the versions this test uses yet")
        for topic, n in TOPICS.items():
            broker.create_topic(topic, n)
        for rnd in range(40):  # simple (manual-assignment) groups, every partition rewritten 40 times
            for gi, group in enumerate(GROUPS):
                _commit(client, group, {(t, p): 100 * rnd + 10 * gi + p for t, n in TOPICS.items() for p in range(n)},
                        epoch=rnd // 10)
        if OFFSET_DELETE in served:
            r = client.request(OFFSET_DELETE, 0, {"group_id": "audit", "topics": [
                {"name": "clicks", "partitions": [{"partition_index": 1}]}]})
            assert r.error_code == 0
        fetched = _fetch_all(client)

    df = spark.read.format("odradek-log").option("topics", "__consumer_offsets").load(str(data)).cache()
    try:
        got = {(r.group_id, r.topic, r.partition, r.committed_offset, r.leader_epoch, r.metadata)
               for r in reports.latest_offsets(df).collect()}
    finally:
        df.unpersist()
    assert got == fetched
    assert len(fetched) == len(GROUPS) * sum(TOPICS.values()) - (1 if OFFSET_DELETE in served else 0)

    offsets_dirs = sorted(data.glob("__consumer_offsets-*"))
    size_before = sum(p.stat().st_size for d in offsets_dirs for p in d.glob("*.log"))
    results = compact_data_dir(data, verify=True)
    assert {r.status for r in results} <= {"compacted", "unchanged"} and any(r.status == "compacted" for r in results)
    size_after = sum(p.stat().st_size for d in offsets_dirs for p in d.glob("*.log"))
    assert size_after < size_before / 5, (size_before, size_after)

    with BrokerHandle(data_dir=data) as broker, SyncClient(broker.host, broker.port) as client:
        assert _fetch_all(client) == fetched

