"""Several ``log.dirs`` (Kafka's JBOD) over TCP: new partitions spread over the dirs as Kafka's
``LogManager.nextLogDirs`` places them, DescribeLogDirs reports every dir with the partitions it
holds and their sizes, data is produced and read back from both, and a restart keeps all of it."""

from __future__ import annotations

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

from .wire_helpers import create_topic, produce

pytestmark = pytest.mark.integration


def dirs_of(b) -> dict[str, dict[tuple[str, int], int]]:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(35, 4, {"topics": None})
    assert r.error_code == 0
    return {res.log_dir: {(t.name, p.partition_index): p.partition_size for t in res.topics for p in t.partitions}
            for res in r.results if res.error_code == 0}


@pytest.fixture
def jbod(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    broker = ThreadedBroker(tmp_path / "a", overrides={"log.dirs": f"{a},{b}"}).start()
    yield broker, a, b
    broker.close()


def test_partitions_spread_over_the_dirs_and_describe_log_dirs_shows_each(jbod):
    broker, a, b = jbod
    create_topic(broker, "spread", 4)
    produce(broker, "spread", 5, partition=3)
    found = dirs_of(broker)
    assert set(found) == {str(a.resolve()), str(b.resolve())}
    mine = {d: sorted(p for t, p in parts if t == "spread") for d, parts in found.items()}
    assert sorted(map(len, mine.values())) == [2, 2], mine
    sizes = {tp: size for parts in found.values() for tp, size in parts.items()}
    assert sizes[("spread", 3)] == broker.app.topics.log("spread", 3).size_bytes > 0
    for d, parts in mine.items():
        for p in parts:
            assert (broker.app.topics.log("spread", p).directory.parent.resolve()) == type(a)(d)


def test_placement_and_data_survive_a_restart(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    overrides = {"log.dirs": f"{a},{b}"}
    with ThreadedBroker(a, overrides=overrides) as broker:
        create_topic(broker, "kept", 2)
        produce(broker, "kept", 3, partition=0)
        produce(broker, "kept", 4, partition=1)
        before = dirs_of(broker)
    with ThreadedBroker(a, overrides=overrides) as broker:
        assert dirs_of(broker) == before
        assert {p: broker.app.topics.log("kept", p).log_end_offset for p in (0, 1)} == {0: 3, 1: 4}


def test_kafka_python_reads_and_writes_partitions_in_both_dirs(jbod):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

    broker, a, b = jbod
    create_topic(broker, "both", 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for p in (0, 1):
        producer.send("both", value=b"v%d" % p, partition=p).get(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("both", 0), TopicPartition("both", 1)])
    assert sorted(m.value for m in consumer) == [b"v0", b"v1"]
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        (answer,) = admin.describe_log_dirs()
    finally:
        admin.close()
    held = {d["log_dir"]: [p["partition_index"] for t in d["topics"] if t["name"] == "both" for p in t["partitions"]]
            for d in answer["log_dirs"]}
    assert held == {str(a.resolve()): [0], str(b.resolve()): [1]}
