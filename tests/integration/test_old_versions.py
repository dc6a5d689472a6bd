"""The request versions Kafka 3.9 still served, as old clients and tools send them.

Produce v0-2 carry magic 0/1 message sets, up-converted to magic 2 on append;
Fetch v0-3 get stored batches down-converted (magic 0 for v0-1, magic 1 for
v2-3), as Kafka's LogValidator and RecordsUtil.downConvert do.  Legacy
bytes are read and written here with kafka-python's own record codec, so the
broker's converter is checked against an independent one.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.record import MemoryRecords, MemoryRecordsBuilder

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.record_conversion import encode_entries
from odradek.protocol.records import Record, encode_batch, iter_batches, iter_records
from odradek.testing import ThreadedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PRODUCE, FETCH, LIST_OFFSETS, METADATA, CREATE, DELETE = 0, 1, 2, 3, 19, 20
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create(c, name: str, partitions: int = 1, configs: dict | None = None, version: int = 5):
    r = c.request(CREATE, version, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": [{"name": k, "value": v}
                                                   for k, v in (configs or {}).items()]}],
        "timeout_ms": 5000, "validate_only": False})
    return r.topics[0]


KP_CODECS = (0, GZIP)  # kafka-python without python-snappy/lz4 writes and reads only these


def legacy_set(magic: int, codec: int, records: list[tuple[int, bytes | None, bytes]]) -> bytes:
    """A magic 0/1 message set written by kafka-python's builder (by ours for snappy/lz4)."""
    if codec not in KP_CODECS:
        return encode_entries([Record(i, ts if magic else -1, k, v) for i, (ts, k, v) in enumerate(records)],
                               magic, codec, False)
    b = MemoryRecordsBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for ts, key, value in records:
        b.append(timestamp=ts if magic else None, key=key, value=value, headers=[])
    b.close()
    return bytes(b.buffer())


def kp_decode(data: bytes) -> list[tuple[int, int, int | None, bytes | None, bytes]]:
    """(magic, offset, timestamp, key, value) per record, by kafka-python's reader
    (by ours where kafka-python lacks the codec)."""
    out = []
    if any(h.attributes & 7 not in KP_CODECS for h, _ in iter_batches(bytes(data))):
        return [(h.magic, r.offset, None if h.magic == 0 else r.timestamp, r.key, r.value)
                for h, rs in iter_batches(bytes(data)) for r in rs]
    m = MemoryRecords(bytes(data))
    while m.has_next():
        batch = m.next_batch()
        if batch is None:
            break
        out.extend((batch.magic, r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


def produce(c, topic: str, records: bytes, version: int):
    r = c.request(PRODUCE, version, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                     "topic_data": [{"name": topic, "partition_data": [
                                         {"index": 0, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def fetch(c, topic: str, offset: int, version: int):
    r = c.request(FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0]


# --- real clients pinned to old releases ------------------------------------------------

@pytest.mark.parametrize("api_version, compression", [
    ((0, 8, 2), None), ((0, 9), "gzip"), ((0, 10, 0), None), ((0, 10, 1), "gzip"),
])
def test_kafka_python_pinned_to_old_releases_round_trips(broker, api_version, compression):
    """Old Produce (v0-2), Fetch (v0-3), ListOffsets v0 and Metadata v0 from a real client."""
    topic = unique("old")
    bootstrap = f"127.0.0.1:{broker.app.endpoint.port}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version,
                             compression_type=compression)
    sent = [(b"k%d" % i, b"v%d" % i) for i in range(6)]
    for key, value in sent:
        producer.send(topic, key=key, value=value).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000,
                             enable_auto_commit=False)
    consumer.assign([_tp(topic)])
    got = [(m.offset, m.key, m.value, m.timestamp) for m in consumer]
    consumer.close()
    assert [(o, k, v) for o, k, v, _ in got] == [(i, k, v) for i, (k, v) in enumerate(sent)]
    if api_version >= (0, 10, 0):
        assert all(ts > 0 for *_, ts in got)  # magic 1 carries the producer's timestamps
    else:
        assert all(ts is None for *_, ts in got)


def test_old_kafka_python_and_confluent_kafka_read_each_other(broker):
    """Produce old (magic 1) / consume new, and produce new with headers / consume old."""
    from confluent_kafka import Consumer, Producer

    bootstrap = f"127.0.0.1:{broker.app.endpoint.port}"
    old_topic, new_topic = unique("from-old"), unique("from-new")
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(0, 10, 1))
    for i in range(3):
        producer.send(old_topic, key=b"k%d" % i, value=b"v%d" % i,
                      timestamp_ms=1_700_000_000_000 + i).get(timeout=10)
    producer.close()
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "gzip"})
    for i in range(3):
        p.produce(new_topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")],
                  timestamp=1_700_000_000_100 + i)
    assert p.flush(15) == 0

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "auto.offset.reset": "earliest"})
    c.subscribe([old_topic])
    got = []
    for _ in range(60):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers()))
        if len(got) == 3:
            break
    c.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i, 1_700_000_000_000 + i, None) for i in range(3)]

    old = KafkaConsumer(bootstrap_servers=bootstrap, api_version=(0, 10, 1),
                        auto_offset_reset="earliest", consumer_timeout_ms=3000)
    old.assign([_tp(new_topic)])
    seen = [(m.offset, m.key, m.value, m.timestamp, list(m.headers or [])) for m in old]
    old.close()
    assert seen == [(i, b"k%d" % i, b"v%d" % i, 1_700_000_000_100 + i, []) for i in range(3)]


def _tp(topic: str):
    from kafka import TopicPartition
    return TopicPartition(topic, 0)


# --- produce old, consume new; produce new, consume old ---------------------------------

@pytest.mark.parametrize("version, magic", [(0, 0), (1, 0), (2, 1)])
@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4])
def test_produce_old_consume_new(broker, version, magic, codec):
    topic = unique("up")
    rows = [(1_700_000_000_000 + i, b"k%d" % i if i % 2 else None, b"v%d" % i) for i in range(5)]
    with client(broker) as c:
        create(c, topic)
        first = produce(c, topic, legacy_set(magic, codec, rows), version)
        assert (first.error_code, first.base_offset) == (E.NONE, 0)
        again = produce(c, topic, legacy_set(magic, codec, rows[:2]), version)
        assert (again.error_code, again.base_offset) == (E.NONE, 5)
        part = fetch(c, topic, 0, 12)
    records = list(iter_records(part.records))
    assert [(r.offset, r.key, r.value) for r in records] == \
        [(i, k, v) for i, (_, k, v) in enumerate(rows + rows[:2])]
    want_ts = [ts if magic else -1 for ts, _, _ in rows + rows[:2]]
    assert [r.timestamp for r in records] == want_ts


@pytest.mark.parametrize("version, magic", [(0, 0), (1, 0), (2, 1), (3, 1)])
@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4])
def test_produce_new_consume_old(broker, version, magic, codec):
    """Magic-2 batches with headers read by Fetch v0-3: headers dropped, as Kafka does."""
    topic = unique("down")
    batch = encode_batch([Record(i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i,
                                 (("h", b"x"),)) for i in range(4)], compression=codec)
    with client(broker) as c:
        create(c, topic)
        assert produce(c, topic, batch, 9).error_code == E.NONE
        assert produce(c, topic, encode_batch([(None, b"tail")]), 9).error_code == E.NONE
        whole = fetch(c, topic, 0, version)
        later = fetch(c, topic, 2, version)
    assert whole.error_code == E.NONE and whole.high_watermark == 5
    got = kp_decode(whole.records)
    assert {m for m, *_ in got} == {magic}
    assert [(o, k, v) for _, o, _, k, v in got] == \
        [(i, b"k%d" % i, b"v%d" % i) for i in range(4)] + [(4, None, b"tail")]
    if magic == 1:
        assert [ts for _, _, ts, _, _ in got[:4]] == [1_700_000_000_000 + i for i in range(4)]
    # uncompressed: records below the fetch offset are dropped; compressed: the wrapper is whole
    offsets = [o for _, o, *_ in kp_decode(later.records)]
    assert offsets == ([2, 3, 4] if codec == 0 else [0, 1, 2, 3, 4])


def test_zstd_cannot_be_down_converted(broker):
    topic = unique("zstd")
    with client(broker) as c:
        create(c, topic)
        assert produce(c, topic, encode_batch([(b"k", b"v")], compression=ZSTD), 9).error_code == E.NONE
        for version in range(4):
            assert fetch(c, topic, 0, version).error_code == E.UNSUPPORTED_COMPRESSION_TYPE
        assert fetch(c, topic, 0, 10).error_code == E.NONE


def test_a_corrupt_legacy_message_set_is_refused(broker):
    topic = unique("bad")
    data = bytearray(legacy_set(1, 0, [(1, b"k", b"v")]))
    data[-1] ^= 0xFF  # the CRC no longer matches
    with client(broker) as c:
        create(c, topic)
        assert produce(c, topic, bytes(data), 2).error_code == E.CORRUPT_MESSAGE
        assert produce(c, topic, legacy_set(1, 0, [(1, b"k", b"v")]), 2).base_offset == 0


def test_legacy_sets_to_a_compacted_topic_need_keys(broker):
    topic = unique("compacted")
    with client(broker) as c:
        create(c, topic, configs={"cleanup.policy": "compact"})
        assert produce(c, topic, legacy_set(1, 0, [(1, None, b"v")]), 2).error_code == E.INVALID_RECORD
        assert produce(c, topic, legacy_set(1, 0, [(1, b"k", b"v")]), 2).error_code == E.NONE


# --- ListOffsets v0, as sarama (Burrow) sends it ---------------------------------------

def _burrow_list_offsets(port: int, topic: str, timestamp: int, max_offsets: int) -> tuple:
    """sarama's OffsetRequest v0, hand-built: (error code, offsets) of partition 0."""
    import socket
    client_id = b"burrow"
    name = topic.encode()
    body = struct.pack(">i", -1) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name \
        + struct.pack(">i", 1) + struct.pack(">iqi", 0, timestamp, max_offsets)
    header = struct.pack(">hhih", LIST_OFFSETS, 0, 77, len(client_id)) + client_id
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        data = _recv(s, size)
    corr, topics = struct.unpack_from(">ii", data, 0)
    assert (corr, topics) == (77, 1)
    n = struct.unpack_from(">h", data, 8)[0]
    p = 10 + n
    parts, index, error, count = struct.unpack_from(">iihi", data, p)
    assert (parts, index) == (1, 0)
    offsets = list(struct.unpack_from(f">{count}q", data, p + 14))
    return error, offsets


def _recv(s, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def test_list_offsets_v0_as_burrow_sends_it():
    with ThreadedBroker(overrides={"log.segment.bytes": "1024"}) as b, client(b) as c:
        topic = unique("lag")
        create(c, topic)
        for _i in range(4):  # 4 segments of one batch each, then the active one
            assert produce(c, topic, encode_batch([(b"k", b"x" * 900)]), 9).error_code == E.NONE
        port = b.app.endpoint.port
        assert _burrow_list_offsets(port, topic, -1, 1) == (E.NONE, [4])
        assert _burrow_list_offsets(port, topic, -2, 1) == (E.NONE, [0])
        error, offsets = _burrow_list_offsets(port, topic, -1, 10)
        assert error == E.NONE and offsets[0] == 4 and offsets == sorted(offsets, reverse=True)
        assert offsets[-1] == 0
        assert _burrow_list_offsets(port, topic, -3, 1) == (E.UNSUPPORTED_VERSION, [])
        assert _burrow_list_offsets(port, "nope", -1, 1)[0] == E.UNKNOWN_TOPIC_OR_PARTITION
        empty = unique("empty")
        create(c, empty)
        assert _burrow_list_offsets(port, empty, -1, 1) == (E.NONE, [0])


class _DeleteOnWalk(tuple):
    """A log's segment view that deletes what it is told to when a reader starts walking it."""

    def __iter__(self):
        action, self.action = self.action, None
        if action is not None:
            action()
        return super().__iter__()


@pytest.mark.parametrize("deletion", ["delete-records", "delete-topic"])
def test_list_offsets_v0_while_segments_are_deleted_under_it(deletion):
    """DeleteRecords or DeleteTopics removing the segments ListOffsets v0 is reading (the hook
    runs the deletion right after the read took its segment list): an answer, never
    UNKNOWN_SERVER_ERROR."""
    with ThreadedBroker(overrides={"log.segment.bytes": "1024"}) as b, client(b) as c:
        topic = unique("race")
        create(c, topic)
        for _i in range(4):
            assert produce(c, topic, encode_batch([(b"k", b"x" * 900)]), 9).error_code == E.NONE
        log = b.call(lambda: b.app.topics.log(topic, 0))

        def delete() -> None:  # a real request on another connection, answered meanwhile
            with client(b) as other:
                if deletion == "delete-records":
                    r = other.request(21, 2, {"timeout_ms": 5000, "topics": [
                        {"name": topic, "partitions": [{"partition_index": 0, "offset": 3}]}]})
                    assert r.topics[0].partitions[0].error_code == E.NONE
                else:
                    r = other.request(20, 4, {"topic_names": [topic], "timeout_ms": 5000})
                    assert r.responses[0].error_code == E.NONE
            assert not (log.directory / "00000000000000000000.log").exists()

        def hook() -> None:
            view = _DeleteOnWalk(log._view[0])
            view.action = delete
            log._view = (view, log._view[1])

        b.call(hook)
        error, offsets = _burrow_list_offsets(b.app.endpoint.port, topic, -1, 10)
        assert error == E.NONE and offsets[0] == 4 and offsets == sorted(offsets, reverse=True)


# --- Metadata v0, CreateTopics v0-1, DeleteTopics v0 ------------------------------------

def test_metadata_v0_empty_list_is_every_topic(broker):
    with client(broker) as c:
        names = sorted(unique(f"m{i}") for i in range(2))
        for n in names:
            create(c, n)
        r = c.request(METADATA, 0, {"topics": []})
        assert set(names) <= {t.name for t in r.topics}
        one = c.request(METADATA, 0, {"topics": [{"name": names[0]}]})
        assert [(t.name, t.error_code, len(t.partitions)) for t in one.topics] == [(names[0], 0, 1)]
        assert [(x.node_id, x.port) for x in r.brokers] == [(1, broker.app.endpoint.port)]


@pytest.mark.parametrize("version", [0, 1])
def test_create_topics_v0_v1_and_delete_topics_v0(broker, version):
    with client(broker) as c:
        name = unique(f"ct{version}")
        t = create(c, name, 2, {"retention.ms": "60000"}, version=version)
        assert (t.name, t.error_code) == (name, E.NONE)
        assert create(c, name, version=version).error_code == E.TOPIC_ALREADY_EXISTS
        r = c.request(DELETE, 0, {"topic_names": [name], "timeout_ms": 5000})
        assert [(x.name, x.error_code) for x in r.responses] == [(name, E.NONE)]
        r = c.request(METADATA, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        assert r.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
