"""The Prometheus endpoint, scraped over HTTP while real clients work."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import kafka_python_subscriber

pytestmark = pytest.mark.integration


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("odradek_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _value(samples: dict[str, float], pattern: str) -> float:
    found = [v for k, v in samples.items() if re.fullmatch(pattern, k)]
    assert found, f"no sample matches {pattern}"
    return sum(found)


@pytest.fixture
def metered():
    with ThreadedBroker(overrides={"metrics.port": 0}) as b:
        yield b


def test_main_series_move(metered):
    from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.structs import OffsetAndMetadata

    port = metered.app.metrics_port
    before = _scrape(port)
    bs = metered.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("metered", 1, 1)])
    producer = KafkaProducer(bootstrap_servers=bs)
    for i in range(10):
        producer.send("metered", b"x%d" % i)
    producer.flush()
    producer.close()

    consumer = kafka_python_subscriber("metered", bootstrap_servers=bs, group_id="metered-group",
                                       auto_offset_reset="earliest", enable_auto_commit=False)
    deadline = time.monotonic() + 30
    seen = 0
    while seen < 4 and time.monotonic() < deadline:
        seen += sum(len(batch) for batch in consumer.poll(timeout_ms=1000, max_records=4).values())
    # commit 4 of 10: a known backlog of 6
    consumer.commit({TopicPartition("metered", 0): OffsetAndMetadata(4, "", -1)})
    after = _scrape(port)
    consumer.close()
    admin.close()

    assert _value(after, r'odradek_requests_total\{api="ApiVersions",version="\d+"\}') > \
        before.get('odradek_requests_total{api="ApiVersions",version="3"}', 0)
    assert _value(after, r'odradek_request_latency_seconds_count\{api="OffsetCommit",version="\d+"\}') >= 1
    assert after["odradek_offset_commits_total"] >= before["odradek_offset_commits_total"] + 1
    assert after["odradek_rebalances_total"] >= before["odradek_rebalances_total"] + 1
    assert after['odradek_groups{state="Stable"}'] == 1
    assert after['odradek_group_members{group="metered-group"}'] == 1
    assert after['odradek_consumer_lag{group="metered-group",partition="0",topic="metered"}'] == 6
    assert after['odradek_log_end_offset{partition="0",topic="metered"}'] == 10
    assert after["odradek_connections"] >= 1
    # kafka-python fetches in an incremental fetch session (KIP-227)
    assert after["odradek_incremental_fetch_sessions"] >= 1
    assert after["odradek_incremental_fetch_partitions_cached"] >= 1
    assert after["odradek_incremental_fetch_session_evictions_total"] == 0
    assert 'odradek_offsets_load_seconds{partition="0"}' in after
