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
    # one partition in each dir (which goes where depends on the internal topics placed first)
    assert set(held) == {str(a.resolve()), str(b.resolve())} and sorted(held.values()) == [[0], [1]]


# --- AlterReplicaLogDirs ---------------------------------------------------------------------

LOG_DIR_NOT_FOUND, REPLICA_NOT_AVAILABLE, STORAGE_ERROR = 57, 9, 56


def alter_dirs(b, version: int, moves: dict[str, dict[str, list[int]]]):
    body = {"dirs": [{"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                     for path, topics in moves.items()]}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(34, version, body)
    return {(t.topic_name, p.partition_index): p.error_code for t in r.results for p in t.partitions}


def where(b, topic: str, partition: int):
    return b.call(lambda: b.app.logs.get(topic, partition).directory.parent)


def wait_moved(b, topic: str, partition: int, dest, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if where(b, topic, partition) == dest and not b.call(lambda: b.app.logs.moves()):
            return
        time.sleep(0.05)
    raise AssertionError(f"{topic}-{partition} still in {where(b, topic, partition)}")


def fetch_all(b, topic: str, partition: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, partition)])
    got = [m.value for m in consumer]
    consumer.close()
    return got


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_partition_moves_to_another_dir_with_its_data(jbod, version):
    broker, a, b = jbod
    create_topic(broker, "mv", 2)
    produce(broker, "mv", 20, partition=0)
    source = where(broker, "mv", 0)
    dest = b if source == a else a
    assert alter_dirs(broker, version, {str(dest.resolve()): {"mv": [0]}}) == {("mv", 0): 0}
    wait_moved(broker, "mv", 0, dest)
    assert not (source / "mv-0").exists() and (dest / "mv-0").is_dir()
    assert len(fetch_all(broker, "mv", 0)) == 20
    produce(broker, "mv", 3, partition=0)  # appends go on in the new dir
    assert len(fetch_all(broker, "mv", 0)) == 23
    held = dirs_of(broker)
    assert ("mv", 0) in held[str(dest.resolve())] and ("mv", 0) not in held[str(source.resolve())]


def test_bad_moves_get_kafkas_errors(jbod, tmp_path):
    broker, a, b = jbod
    create_topic(broker, "bad", 1)
    here = where(broker, "bad", 0)
    got = alter_dirs(broker, 2, {str(tmp_path / "elsewhere"): {"bad": [0]},
                                 str(here.resolve()): {"bad": [5], "nope": [0]}})
    assert got == {("bad", 0): LOG_DIR_NOT_FOUND, ("bad", 5): REPLICA_NOT_AVAILABLE,
                   ("nope", 0): REPLICA_NOT_AVAILABLE}
    assert alter_dirs(broker, 2, {str(here.resolve()): {"bad": [0]}}) == {("bad", 0): 0}  # where it is
    other = b if here == a else a
    offsets_dir = where(broker, "__consumer_offsets", 0)
    target = b if offsets_dir == a else a
    assert alter_dirs(broker, 2, {str(target.resolve()): {"__consumer_offsets": [0]}}) == {
        ("__consumer_offsets", 0): STORAGE_ERROR}
    assert where(broker, "bad", 0) == here and other != here


def test_the_last_dir_named_wins_and_produce_goes_on_during_a_move(jbod):
    from kafka import KafkaProducer

    broker, a, b = jbod
    create_topic(broker, "busy", 1)
    source = where(broker, "busy", 0)
    dest = b if source == a else a
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=20, acks="all",
                             max_in_flight_requests_per_connection=1, linger_ms=0)
    futures = [producer.send("busy", value=b"%d" % i) for i in range(200)]
    got = alter_dirs(broker, 2, {str(source.resolve()): {"busy": [0]}, str(dest.resolve()): {"busy": [0]}})
    assert got == {("busy", 0): 0}
    futures += [producer.send("busy", value=b"%d" % i) for i in range(200, 400)]
    for f in futures:
        f.get(30)
    producer.close()
    wait_moved(broker, "busy", 0, dest)
    assert fetch_all(broker, "busy", 0) == [b"%d" % i for i in range(400)]


def test_kafka_python_alter_replica_log_dirs(jbod):
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartitionReplica

    broker, a, b = jbod
    create_topic(broker, "kp", 1)
    produce(broker, "kp", 5)
    dest = b if where(broker, "kp", 0) == a else a
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        out = admin.alter_replica_log_dirs({TopicPartitionReplica("kp", 0, broker.app.node_id): str(dest.resolve())})
    finally:
        admin.close()
    assert "kp" in repr(out) or out is not None
    wait_moved(broker, "kp", 0, dest)
    assert len(fetch_all(broker, "kp", 0)) == 5


def test_a_second_broker_sharing_any_log_dir_refuses_to_start(jbod, tmp_path):
    broker, a, b = jbod
    with pytest.raises(Exception, match="in use by another broker"):
        ThreadedBroker(tmp_path / "other", overrides={"log.dirs": f"{tmp_path / 'other'},{b}"}).start()


def test_describe_log_dirs_lists_a_moving_partition_as_a_future_entry(jbod):
    broker, a, b = jbod
    create_topic(broker, "fut", 1)
    produce(broker, "fut", 4)
    source = where(broker, "fut", 0)
    dest = b if source == a else a
    lg = broker.call(lambda: broker.app.logs.get("fut", 0))
    lg._maint.acquire()  # as a retention pass would: the move waits for it before copying
    try:
        assert alter_dirs(broker, 2, {str(dest.resolve()): {"fut": [0]}}) == {("fut", 0): 0}
        with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
            r = c.request(35, 4, {"topics": [{"topic": "fut", "partitions": [0]}]})
        entries = {(res.log_dir, p.is_future_key): p for res in r.results for t in res.topics for p in t.partitions}
        assert set(entries) == {(str(source.resolve()), False), (str(dest.resolve()), True)}
        assert entries[(str(dest.resolve()), True)].offset_lag == 4
        assert any(p.name.endswith("-future") for p in dest.iterdir())
    finally:
        lg._maint.release()
    wait_moved(broker, "fut", 0, dest)
    assert list(dirs_of(broker)[str(dest.resolve())]).count(("fut", 0)) == 1


def test_naming_the_current_dir_calls_a_move_off(jbod):
    broker, a, b = jbod
    create_topic(broker, "off", 1)
    produce(broker, "off", 2)
    source = where(broker, "off", 0)
    dest = b if source == a else a
    lg = broker.call(lambda: broker.app.logs.get("off", 0))
    lg._maint.acquire()
    try:
        assert alter_dirs(broker, 2, {str(dest.resolve()): {"off": [0]}}) == {("off", 0): 0}
        assert alter_dirs(broker, 2, {str(source.resolve()): {"off": [0]}}) == {("off", 0): 0}
    finally:
        lg._maint.release()
    import time

    deadline = time.monotonic() + 10
    while broker.call(lambda: broker.app.logs.moves()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert where(broker, "off", 0) == source
    assert not any(p.name.endswith("-future") for p in dest.iterdir())
    assert len(fetch_all(broker, "off", 0)) == 2
