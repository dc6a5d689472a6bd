"""The data plane over raw protocol: every served version, every refusal, the broker keeps serving.

These tests send exactly the bytes a scenario needs (odradek's wire client),
including ones real clients never send, and check Kafka's error codes.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid

import pytest

from odradek.broker.dataplane.topics import PARTITION_METADATA, REGISTRY_FILE, kafka_uuid
from odradek.broker.wire_client import AsyncClient, SyncClient, encode
from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import Record, encode_batch, iter_batch_headers, iter_records
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
CREATE, DELETE, INIT_PID, DESCRIBE_CONFIGS = 19, 20, 22, 32
ZERO = uuid.UUID(int=0)


# --- helpers ---------------------------------------------------------------------------

def client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def batch(n: int = 1, *, key: bytes | None = b"k", value: bytes = b"v", **kw) -> bytes:
    return encode_batch([(key, value + str(i).encode()) for i in range(n)], **kw)


def create(c, name, partitions=1, configs=None, version=5, rf=-1, validate_only=False):
    r = c.request(CREATE, version, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 5000, "validate_only": validate_only})
    return r.topics[0]


def produce_request(topic, records, partition=0, acks=-1, txn=None) -> dict:
    return {"transactional_id": txn, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def produce(c, topic, records, partition=0, version=9, acks=-1, txn=None):
    r = c.request(PRODUCE, version, produce_request(topic, records, partition, acks, txn))
    return r.responses[0].partition_responses[0]


def fetch_request(topic, offset, partition=0, max_wait=0, min_bytes=1, max_bytes=50 << 20,
                  pmax=1 << 20, isolation=0, extra_partitions=()) -> dict:
    parts = [{"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
              "log_start_offset": -1, "partition_max_bytes": pmax}]
    parts += [{"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
               "partition_max_bytes": pmax} for p, o in extra_partitions]
    return {"replica_id": -1, "max_wait_ms": max_wait, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": parts}], "forgotten_topics_data": [], "rack_id": ""}


def fetch(c, topic, offset, version=12, **kw):
    return c.request(FETCH, version, fetch_request(topic, offset, **kw))


def fetch_one(c, topic, offset, version=12, **kw):
    return fetch(c, topic, offset, version, **kw).responses[0].partitions[0]


def list_offset(c, topic, ts, partition=0, version=7):
    r = c.request(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": ts}]}]})
    return r.topics[0].partitions[0]


def metadata(c, topics, version=12, auto=False):
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto, "include_topic_authorized_operations": False}
    return c.request(METADATA, version, body)


def values(records: bytes) -> list[bytes]:
    return [r.value for r in iter_records(records)]


@pytest.fixture
def strict():
    """A broker that does not auto-create topics."""
    with ThreadedBroker(overrides={"auto.create.topics.enable": "false"}) as b:
        yield b


# --- CreateTopics ----------------------------------------------------------------------

def test_create_topics_every_version(broker):
    with client(broker) as c:
        for v in range(2, 8):
            t = create(c, f"made-v{v}", 3, {"retention.ms": "60000"}, version=v)
            assert (t.name, t.error_code) == (f"made-v{v}", E.NONE)
            if v >= 5:
                assert (t.num_partitions, t.replication_factor) == (3, 1)
                cfg = {x.name: (x.value, x.config_source) for x in t.configs}
                assert cfg["retention.ms"] == ("60000", 1)  # DYNAMIC_TOPIC_CONFIG
                assert cfg["cleanup.policy"] == ("delete", 5)  # DEFAULT_CONFIG
            md = metadata(c, [f"made-v{v}"]).topics[0]
            assert md.error_code == E.NONE and len(md.partitions) == 3
            if v >= 7:
                assert t.topic_id == md.topic_id != ZERO


@pytest.mark.parametrize("name, partitions, rf, configs, code", [
    ("", 1, -1, {}, E.INVALID_TOPIC_EXCEPTION),
    (".", 1, -1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("..", 1, -1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("x" * 250, 1, -1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("has space", 1, -1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("slash/y", 1, -1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("__consumer_offsets", 1, -1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("zero-parts", 0, -1, {}, E.INVALID_PARTITIONS),
    ("neg-parts", -5, -1, {}, E.INVALID_PARTITIONS),
    ("rf3", 1, 3, {}, E.INVALID_REPLICATION_FACTOR),
    ("rf0", 1, 0, {}, E.INVALID_REPLICATION_FACTOR),
    ("bad-config-name", 1, -1, {"no.such.config": "1"}, E.INVALID_CONFIG),
    ("bad-config-value", 1, -1, {"retention.ms": "soon"}, E.INVALID_CONFIG),
    ("bad-policy", 1, -1, {"cleanup.policy": "shred"}, E.INVALID_CONFIG),
    ("bad-codec", 1, -1, {"compression.type": "brotli"}, E.INVALID_CONFIG),
    ("tiny-segment", 1, -1, {"segment.bytes": "3"}, E.INVALID_CONFIG),
])
def test_create_topics_refusals(broker, name, partitions, rf, configs, code):
    with client(broker) as c:
        t = create(c, name, partitions, configs, version=7, rf=rf)
        assert t.error_code == code, t.error_message
        assert t.error_message
        assert (t.topic_id, t.num_partitions) == (ZERO, -1)
        assert create(c, "after-refusal", 1).error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS)


def test_create_topics_exists_collides_duplicates_and_validate_only(broker):
    with client(broker) as c:
        assert create(c, "a.b").error_code == E.NONE
        assert create(c, "a.b").error_code == E.TOPIC_ALREADY_EXISTS
        assert create(c, "a_b").error_code == E.INVALID_TOPIC_EXCEPTION  # clashes with a.b
        r = c.request(CREATE, 5, {"topics": [
            {"name": "dup", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}] * 2,
            "timeout_ms": 1000, "validate_only": False})
        assert [t.error_code for t in r.topics] == [E.INVALID_REQUEST, E.INVALID_REQUEST]
        t = create(c, "dry-run", 4, {"cleanup.policy": "compact"}, version=7, validate_only=True)
        assert (t.error_code, t.num_partitions, t.topic_id) == (E.NONE, 4, ZERO)
        assert metadata(c, ["dry-run"]).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_create_topics_defaults_and_assignments():
    with ThreadedBroker(overrides={"num.partitions": "3"}) as b, client(b) as c:
        t = create(c, "defaults", -1, rf=-1, version=4)
        assert t.error_code == E.NONE
        assert len(metadata(c, ["defaults"]).topics[0].partitions) == 3

        def with_assignments(name, assignments, partitions=-1):
            r = c.request(CREATE, 7, {"topics": [{
                "name": name, "num_partitions": partitions, "replication_factor": -1, "configs": [],
                "assignments": [{"partition_index": p, "broker_ids": ids} for p, ids in assignments]}],
                "timeout_ms": 1000, "validate_only": False})
            return r.topics[0]

        assert with_assignments("assigned", [(0, [1]), (1, [1])]).num_partitions == 2
        assert with_assignments("other-broker", [(0, [2])]).error_code == E.INVALID_REPLICA_ASSIGNMENT
        assert with_assignments("two-replicas", [(0, [1, 1])]).error_code == E.INVALID_REPLICA_ASSIGNMENT
        assert with_assignments("gap", [(0, [1]), (2, [1])]).error_code == E.INVALID_REPLICA_ASSIGNMENT
        assert with_assignments("both", [(0, [1])], partitions=1).error_code == E.INVALID_REQUEST


# --- DeleteTopics ----------------------------------------------------------------------

def test_delete_topics_every_version(broker):
    with client(broker) as c:
        for v in range(1, 7):
            name = f"doomed-v{v}"
            t = create(c, name, 2, version=7)
            assert produce(c, name, batch(3)).error_code == E.NONE
            if v >= 6:
                body = {"topics": [{"name": None, "topic_id": t.topic_id}], "timeout_ms": 5000}
            else:
                body = {"topic_names": [name], "timeout_ms": 5000}
            r = c.request(DELETE, v, body).responses[0]
            assert r.error_code == E.NONE and r.name == name
            assert metadata(c, [name]).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
            assert not (broker.data_dir / f"{name}-0").exists()
        assert create(c, "doomed-v1").error_code == E.NONE  # the name is free again, and empty
        assert produce(c, "doomed-v1", batch(1)).base_offset == 0


def test_delete_topics_refusals(broker):
    with client(broker) as c:
        r = c.request(DELETE, 5, {"topic_names": ["never", "__consumer_offsets"], "timeout_ms": 1000})
        assert [x.error_code for x in r.responses] == [E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_TOPIC_EXCEPTION]
        r = c.request(DELETE, 6, {"topics": [{"name": None, "topic_id": uuid.uuid4()}], "timeout_ms": 1000})
        assert r.responses[0].error_code == E.UNKNOWN_TOPIC_ID
    with ThreadedBroker(overrides={"delete.topic.enable": "false"}) as b, client(b) as c:
        create(c, "kept")
        r = c.request(DELETE, 4, {"topic_names": ["kept"], "timeout_ms": 1000})
        assert r.responses[0].error_code == E.TOPIC_DELETION_DISABLED
        assert metadata(c, ["kept"]).topics[0].error_code == E.NONE


# --- Metadata --------------------------------------------------------------------------

def test_metadata_topics_null_is_all_and_empty_is_none(broker):
    with client(broker) as c:
        create(c, "m2", 2)
        create(c, "m1", 1)
        for v in range(1, 13):
            every = metadata(c, None, version=v)
            assert [(t.name, t.is_internal) for t in every.topics] == [
                ("__consumer_offsets", True), ("__share_group_state", True), ("__transaction_state", True), ("m1", False), ("m2", False)]
            assert metadata(c, [], version=v).topics == []
            t = every.topics[3]
            assert (t.error_code, t.is_internal) == (E.NONE, False)
            for i, p in enumerate(t.partitions):
                assert (p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) == (i, 1, [1], [1])
                if v >= 7:
                    assert p.leader_epoch == 0
            if v >= 10:
                assert t.topic_id != ZERO


def test_metadata_by_topic_id_and_internal_topic(broker):
    with client(broker) as c:
        tid = create(c, "by-id", version=7).topic_id
        r = c.request(METADATA, 12, {"topics": [{"topic_id": tid, "name": None},
                                                {"topic_id": uuid.uuid4(), "name": None}],
                                     "allow_auto_topic_creation": False})
        assert [(t.name, t.error_code) for t in r.topics] == [("by-id", E.NONE), (None, E.UNKNOWN_TOPIC_ID)]
        offsets = metadata(c, ["__consumer_offsets"]).topics[0]
        assert (offsets.error_code, offsets.is_internal) == (E.NONE, True)
        assert len(offsets.partitions) == broker.app.coordinator_config.num_partitions


def test_metadata_auto_creates_only_when_allowed(broker, strict):
    with client(broker) as c:
        assert metadata(c, ["auto-no"], auto=False).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        t = metadata(c, ["auto-yes"], auto=True).topics[0]
        assert (t.error_code, len(t.partitions)) == (E.NONE, 1)
        assert metadata(c, ["bad name"], auto=True).topics[0].error_code == E.INVALID_TOPIC_EXCEPTION
    with client(strict) as c:
        assert metadata(c, ["auto-off"], auto=True).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert [t.name for t in metadata(c, None).topics] == ["__consumer_offsets", "__share_group_state", "__transaction_state"]


# --- Produce ---------------------------------------------------------------------------

def test_produce_every_version_appends_in_order(broker):
    with client(broker) as c:
        create(c, "p")
        expected = 0
        for v in range(3, 10):
            r = produce(c, "p", batch(3), version=v)
            assert (r.error_code, r.base_offset) == (E.NONE, expected)
            assert r.log_append_time_ms == -1
            if v >= 5:
                assert r.log_start_offset == 0
            expected += 3
        assert len(values(fetch_one(c, "p", 0).records)) == expected


def _corrupt_crc(data: bytes) -> bytes:
    raw = bytearray(data)
    raw[-1] ^= 0xFF
    return bytes(raw)


def _magic1(data: bytes) -> bytes:
    raw = bytearray(data)
    raw[16] = 1
    return bytes(raw)


@pytest.mark.parametrize("case, topic, records, version, code", [
    ("corrupt CRC", "ok", _corrupt_crc(batch(2)), 9, E.CORRUPT_MESSAGE),
    ("truncated batch", "ok", batch(2)[:-3], 9, E.CORRUPT_MESSAGE),
    ("garbage", "ok", b"\x00" * 40, 9, E.INVALID_RECORD),
    ("no records", "ok", None, 9, E.INVALID_RECORD),
    ("oversized batch", "ok", batch(1, value=b"x" * 3000), 9, E.MESSAGE_TOO_LARGE),
    ("topic max.message.bytes", "small", batch(1, value=b"x" * 600), 9, E.MESSAGE_TOO_LARGE),
    ("two batches", "ok", batch(1) + batch(1), 9, E.INVALID_RECORD),
    ("magic 1", "ok", _magic1(batch(1)), 9, E.INVALID_RECORD),
    ("zstd on v6", "ok", batch(2, compression=4), 6, E.UNSUPPORTED_COMPRESSION_TYPE),
    ("keyless on compacted", "compacted", batch(2, key=None), 9, E.INVALID_RECORD),
    ("control batch", "ok", batch(1, control=True), 9, E.INVALID_RECORD),
    # transactional batches (markers too) need a transactional id first, as Kafka's authorisation
    ("transactional control batch", "ok", batch(1, control=True, transactional=True), 9,
     E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("transactional batch", "ok", batch(1, transactional=True, producer_id=1, producer_epoch=0,
                                         base_sequence=0), 9, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("idempotent without sequence", "ok", batch(1, producer_id=7, producer_epoch=0), 9, E.INVALID_RECORD),
    ("internal topic", "__consumer_offsets", batch(1), 9, E.INVALID_TOPIC_EXCEPTION),
    ("unknown topic, auto-create off", "missing", batch(1), 9, E.UNKNOWN_TOPIC_OR_PARTITION),
    ("invalid topic name", "bad name!", batch(1), 9, E.INVALID_TOPIC_EXCEPTION),
])
def test_produce_refusals_keep_the_broker_serving(case, topic, records, version, code):
    with ThreadedBroker(overrides={"auto.create.topics.enable": "false", "message.max.bytes": "2000"}) as b, \
            client(b) as c:
        create(c, "ok")
        create(c, "small", configs={"max.message.bytes": "500"})
        create(c, "compacted", configs={"cleanup.policy": "compact"})
        r = produce(c, topic, records, version=version)
        assert r.error_code == code, (case, r.error_message)
        assert r.base_offset == -1
        if case == "keyless on compacted":
            assert [e.batch_index for e in r.record_errors] == [0, 1]
        # same connection, still served, and nothing was appended
        assert produce(c, "ok", batch(1)).base_offset == 0
        assert list_offset(c, "compacted", -1).offset == 0
        assert list_offset(c, "small", -1).offset == 0


def test_produce_zstd_from_v7_and_keyed_records_on_compacted(broker):
    with client(broker) as c:
        create(c, "z")
        create(c, "kc", configs={"cleanup.policy": "compact"})
        assert produce(c, "z", batch(3, compression=4), version=7).error_code == E.NONE
        assert values(fetch_one(c, "z", 0).records) == [b"v0", b"v1", b"v2"]
        assert produce(c, "kc", batch(2, compression=1)).error_code == E.NONE


def test_a_decompression_bomb_is_refused_and_the_broker_keeps_serving(broker, monkeypatch):
    """Compacted topics decompress batches to check keys: a few bytes must not claim the memory."""
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 1 << 20)  # the broker runs in this process
    bomb = encode_batch([(b"k", bytes(2 << 20))], compression=4)  # 2 MiB of zeros in a few hundred bytes
    assert len(bomb) < 1000
    with client(broker) as c:
        create(c, "bombed", configs={"cleanup.policy": "compact"})
        r = produce(c, "bombed", bomb)
        assert r.error_code == E.CORRUPT_MESSAGE and "more than 1048576 bytes" in r.error_message
        assert produce(c, "bombed", batch(1)).base_offset == 0


def test_produce_request_wide_refusals(broker):
    with client(broker) as c:
        create(c, "w")
        assert produce(c, "w", batch(1), acks=2).error_code == E.INVALID_REQUIRED_ACKS
        # a transactional id alone asks for nothing (Kafka checks it only for transactional batches)
        assert produce(c, "w", batch(1), txn="tx-1").error_code == E.NONE
        assert produce(c, "w", batch(1), partition=5).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert list_offset(c, "w", -1).offset == 1


def test_produce_acks0_gets_no_response(broker):
    with client(broker) as c:
        create(c, "quiet")
        c.send_raw(encode(PRODUCE, 9, 1000, produce_request("quiet", batch(2), acks=0)))
        c.send_raw(encode(PRODUCE, 9, 1001, produce_request("quiet", _corrupt_crc(batch(1)), acks=0)))
        # the next response on this connection answers the next request, not the acks=0 ones
        r = list_offset(c, "quiet", -1)
        assert r.offset == 2


def test_produce_auto_creates_topic(broker):
    with client(broker) as c:
        r = produce(c, "made-by-produce", batch(2))
        assert (r.error_code, r.base_offset) == (E.NONE, 0)
        assert metadata(c, ["made-by-produce"]).topics[0].error_code == E.NONE


def test_log_append_time_topic_stamps_batches(broker):
    with client(broker) as c:
        create(c, "lat", configs={"message.timestamp.type": "LogAppendTime"})
        r = produce(c, "lat", batch(2, base_timestamp=1000))
        assert r.error_code == E.NONE and r.log_append_time_ms > 1000
        records = fetch_one(c, "lat", 0).records
        [(_pos, h)] = list(iter_batch_headers(records, validate=True))  # CRC recomputed
        assert h.log_append_time and h.max_timestamp == r.log_append_time_ms
        assert {rec.timestamp for rec in iter_records(records)} == {r.log_append_time_ms}


def test_min_insync_replicas_above_one_refuses_acks_all(broker):
    with client(broker) as c:
        create(c, "isr2", configs={"min.insync.replicas": "2"})
        assert produce(c, "isr2", batch(1), acks=-1).error_code == E.NOT_ENOUGH_REPLICAS
        assert produce(c, "isr2", batch(1), acks=1).error_code == E.NONE


# --- idempotent producers --------------------------------------------------------------

def init_pid(c, version=4, txn=None):
    return c.request(INIT_PID, version, {"transactional_id": txn, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})


def test_init_producer_id_every_version(broker):
    with client(broker) as c:
        ids = []
        for v in range(0, 5):
            r = init_pid(c, v)
            assert (r.error_code, r.producer_epoch) == (E.NONE, 0)
            ids.append(r.producer_id)
        assert len(set(ids)) == 5 and min(ids) >= 0
        r = init_pid(c, 4, txn="my-txn")  # a transactional id: the transaction coordinator's
        assert (r.error_code, r.producer_epoch) == (E.NONE, 0) and r.producer_id not in ids


def idem(pid, seq, n=1, epoch=0, value=b"v"):
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, value=value)


def test_sequence_checks_and_dedupe(broker):
    with client(broker) as c:
        create(c, "idem")
        pid = init_pid(c).producer_id
        offsets = [produce(c, "idem", idem(pid, seq, 2)).base_offset for seq in range(0, 12, 2)]
        assert offsets == [0, 2, 4, 6, 8, 10]
        # a retry of any of the last five batches gets its original offset, without a second append
        for seq, off in zip(range(2, 12, 2), offsets[1:], strict=True):
            r = produce(c, "idem", idem(pid, seq, 2))
            assert (r.error_code, r.base_offset) == (E.NONE, off)
        assert list_offset(c, "idem", -1).offset == 12
        assert produce(c, "idem", idem(pid, 0, 2)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER  # too old
        assert produce(c, "idem", idem(pid, 20)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER  # gap
        assert produce(c, "idem", idem(pid, 1, epoch=1)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "idem", idem(pid, 0, epoch=1)).error_code == E.NONE  # new epoch from 0
        assert produce(c, "idem", idem(pid, 1, epoch=0)).error_code == E.INVALID_PRODUCER_EPOCH
        other = init_pid(c).producer_id
        assert produce(c, "idem", idem(other, 42)).error_code == E.NONE  # unknown producer: any start
        assert list_offset(c, "idem", -1).offset == 14


def test_dedupe_and_producer_ids_survive_restart(broker):
    with client(broker) as c:
        create(c, "durable-idem")
        pid = init_pid(c).producer_id
        for seq in range(5):
            produce(c, "durable-idem", idem(pid, seq))
    broker.restart()
    with client(broker) as c:
        r = produce(c, "durable-idem", idem(pid, 4))
        assert (r.error_code, r.base_offset) == (E.NONE, 4)  # deduped from the rebuilt state
        assert produce(c, "durable-idem", idem(pid, 9)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "durable-idem", idem(pid, 5)).base_offset == 5
        assert init_pid(c).producer_id > pid  # ids never repeat across restarts


async def test_pipelined_idempotent_batches_keep_their_order_while_state_loads(broker):
    """After a restart the first appends wait for the producer state; later pipelined ones queue
    behind them instead of overtaking (an overtaken batch would be OUT_OF_ORDER_SEQUENCE)."""
    with client(broker) as c:
        create(c, "order", 2)
        pid = init_pid(c).producer_id
        for p in (0, 1):
            produce(c, "order", idem(pid, 0), partition=p)
    broker.restart()
    ac = await AsyncClient.connect("127.0.0.1", broker.app.endpoint.port)
    try:
        plan = [{0: 1, 1: 1}, {1: 2}, {1: 3}, {0: 2, 1: 4}, {1: 5}]
        for parts in plan:
            ac.send(PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": "order", "partition_data": [{"index": p, "records": idem(pid, seq)}
                                                     for p, seq in parts.items()]}]})
        answers = [(await ac.recv(PRODUCE, 9))[1] for _ in plan]
    finally:
        await ac.close()
    got = [{p.index: (p.error_code, p.base_offset) for p in a.responses[0].partition_responses}
           for a in answers]
    assert got == [{0: (E.NONE, 1), 1: (E.NONE, 1)}, {1: (E.NONE, 2)}, {1: (E.NONE, 3)},
                   {0: (E.NONE, 2), 1: (E.NONE, 4)}, {1: (E.NONE, 5)}]


# --- Fetch -----------------------------------------------------------------------------

def test_fetch_every_version(broker):
    with client(broker) as c:
        create(c, "f")
        produce(c, "f", batch(3))
        for v in range(4, 13):
            for isolation in (0, 1):
                r = fetch(c, "f", 1, version=v, isolation=isolation)
                if v >= 7:
                    assert (r.error_code, r.session_id) == (E.NONE, 0)
                p = r.responses[0].partitions[0]
                assert p.error_code == E.NONE
                assert (p.high_watermark, p.last_stable_offset) == (3, 3)
                if v >= 5:
                    assert p.log_start_offset == 0
                assert p.aborted_transactions == ([] if isolation else None)
                if v >= 11:
                    assert p.preferred_read_replica == -1
                # whole batches: the one holding offset 1 starts at 0; clients skip what they did not ask for
                assert values(p.records) == [b"v0", b"v1", b"v2"]


def test_fetch_errors_are_per_partition(broker):
    with client(broker) as c:
        create(c, "fe", 2)
        produce(c, "fe", batch(2))
        r = fetch(c, "fe", 3, extra_partitions=[(1, 0)]).responses[0].partitions
        assert [(p.error_code, p.high_watermark) for p in r] == [(E.OFFSET_OUT_OF_RANGE, -1), (E.NONE, 0)]
        assert fetch_one(c, "fe", -1).error_code == E.OFFSET_OUT_OF_RANGE
        assert fetch_one(c, "fe", 2).error_code == E.NONE  # the log end is a valid position
        assert fetch_one(c, "no-such-topic", 0).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch_one(c, "fe", 0, partition=9).error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_sizes_first_batch_whole_then_limits(broker):
    with client(broker) as c:
        create(c, "sz", 2)
        for _ in range(3):
            produce(c, "sz", batch(1, value=b"x" * 1000))
            produce(c, "sz", batch(1, value=b"y" * 1000), partition=1)
        p = fetch_one(c, "sz", 0, pmax=10)  # smaller than one batch: still the first batch, whole
        assert len(values(p.records)) == 1
        p = fetch_one(c, "sz", 0, pmax=2500)
        assert len(values(p.records)) == 2
        both = fetch(c, "sz", 0, max_bytes=100, extra_partitions=[(1, 0)]).responses[0].partitions
        assert [len(values(p.records)) for p in both] == [1, 0]  # response budget spent by the first


def test_fetch_long_poll_wakes_on_append(broker):
    with client(broker) as c:
        create(c, "lp")
    result = {}

    def consumer():
        with client(broker) as fc:
            t0 = time.monotonic()
            result["p"] = fetch_one(fc, "lp", 0, max_wait=5000, min_bytes=1)
            result["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=consumer)
    t.start()
    time.sleep(0.3)  # let the fetch park
    with client(broker) as c:
        produce(c, "lp", batch(1))
    t.join(10)
    assert values(result["p"].records) == [b"v0"]
    assert result["elapsed"] < 5.0, "arrived at the fetch deadline, not before it"


def test_fetch_without_data_waits_then_answers_empty(broker):
    with client(broker) as c:
        create(c, "idle")
        p = fetch_one(c, "idle", 0, max_wait=200, min_bytes=1)
        assert (p.error_code, p.high_watermark, values(p.records)) == (E.NONE, 0, [])


# --- ListOffsets -----------------------------------------------------------------------

def test_list_offsets_every_version(broker):
    with client(broker) as c:
        create(c, "lo")
        for ts in (1000, 3000, 2000):
            produce(c, "lo", encode_batch([Record(0, ts, b"k", b"%d" % ts), Record(1, ts + 1, b"k", b"x")]))
        for v in range(1, 8):
            assert list_offset(c, "lo", -2, version=v).offset == 0
            latest = list_offset(c, "lo", -1, version=v)
            assert (latest.error_code, latest.offset, latest.timestamp) == (E.NONE, 6, -1)
            by_time = list_offset(c, "lo", 1500, version=v)
            assert (by_time.offset, by_time.timestamp) == (2, 3000)
            exact = list_offset(c, "lo", 1001, version=v)
            assert (exact.offset, exact.timestamp) == (1, 1001)
            # the first offset (in log order) whose timestamp is at least the target, as Kafka
            assert list_offset(c, "lo", 2001, version=v).offset == 2
            beyond = list_offset(c, "lo", 10_000, version=v)
            assert (beyond.error_code, beyond.offset, beyond.timestamp) == (E.NONE, -1, -1)
            if v >= 4:
                assert latest.leader_epoch == 0
        newest = list_offset(c, "lo", -3, version=7)
        assert (newest.offset, newest.timestamp) == (3, 3001)
        assert list_offset(c, "lo", -3, version=6).error_code == E.UNSUPPORTED_VERSION
        assert list_offset(c, "nope", -1).error_code == E.UNKNOWN_TOPIC_OR_PARTITION


# --- DescribeConfigs -------------------------------------------------------------------

def describe(c, resource_type, name, version=4, keys=None, synonyms=True):
    r = c.request(DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": synonyms, "include_documentation": True})
    return r.results[0]


def test_describe_configs_topic_every_version():
    with ThreadedBroker(overrides={"log.retention.hours": "100"}) as b, client(b) as c:
        create(c, "dc", configs={"cleanup.policy": "compact"})
        for v in range(0, 5):
            res = describe(c, 2, "dc", version=v)
            assert res.error_code == E.NONE
            cfg = {x.name: x for x in res.configs}
            assert cfg["cleanup.policy"].value == "compact"
            assert cfg["retention.ms"].value == str(100 * 3600_000)
            assert cfg["segment.bytes"].value == str(1 << 30)
            if v == 0:
                assert (cfg["cleanup.policy"].is_default, cfg["segment.bytes"].is_default) == (False, True)
                continue
            assert cfg["cleanup.policy"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
            # Kafka's ConfigHelper lists a topic config's broker synonyms from its primary name on:
            # with only log.retention.hours set, retention.ms has none left and reports DEFAULT_CONFIG
            assert cfg["retention.ms"].config_source == 5
            assert cfg["retention.ms"].synonyms == []
            assert cfg["segment.bytes"].config_source == 5  # DEFAULT_CONFIG
            assert [(s.name, s.source) for s in cfg["segment.bytes"].synonyms] == [("log.segment.bytes", 5)]
            assert cfg["cleanup.policy"].synonyms[0].name == "cleanup.policy"
            if v >= 3:
                assert cfg["retention.ms"].config_type == 5  # LONG
                assert cfg["retention.ms"].documentation
        only = describe(c, 2, "dc", keys=["retention.bytes"], synonyms=False)
        assert [(x.name, x.synonyms) for x in only.configs] == [("retention.bytes", [])]


def test_describe_configs_broker_and_errors(broker):
    with client(broker) as c:
        res = describe(c, 4, "1")
        cfg = {x.name: x for x in res.configs}
        assert cfg["num.partitions"].value == "1"
        assert cfg["num.partitions"].config_source == 5 and cfg["num.partitions"].read_only
        assert cfg["listeners"].config_source == 4  # set by the test broker
        assert describe(c, 4, "7").error_code == E.INVALID_REQUEST
        assert describe(c, 2, "ghost").error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert describe(c, 2, "bad name").error_code == E.INVALID_TOPIC_EXCEPTION
        internal = {x.name: x.value for x in describe(c, 2, "__consumer_offsets").configs}
        assert internal["cleanup.policy"] == "compact"


# --- persistence -----------------------------------------------------------------------

def test_topics_survive_restart_with_ids_configs_and_data(broker):
    with client(broker) as c:
        tid = create(c, "keep", 2, {"cleanup.policy": "compact", "retention.ms": "123456"}, version=7).topic_id
        produce(c, "keep", batch(3), partition=1)
    broker.restart()
    with client(broker) as c:
        t = metadata(c, ["keep"]).topics[0]
        assert (t.topic_id, len(t.partitions)) == (tid, 2)
        cfg = {x.name: x.value for x in describe(c, 2, "keep").configs}
        assert (cfg["cleanup.policy"], cfg["retention.ms"]) == ("compact", "123456")
        assert values(fetch_one(c, "keep", 0, partition=1).records) == [b"v0", b"v1", b"v2"]
        assert produce(c, "keep", batch(1, key=None)).error_code == E.INVALID_RECORD  # still compacted
    text = (broker.data_dir / "keep-1" / PARTITION_METADATA).read_text()
    assert text == f"version: 0\ntopic_id: {kafka_uuid(tid)}\n"


def test_partition_dirs_without_registry_are_adopted(broker):
    with client(broker) as c:
        tid = create(c, "orphan", 2, version=7).topic_id
        produce(c, "orphan", batch(2), partition=1)
    broker.stop()
    (broker.data_dir / REGISTRY_FILE).unlink()
    broker.start()
    with client(broker) as c:
        t = metadata(c, ["orphan"]).topics[0]
        assert (t.error_code, t.topic_id, len(t.partitions)) == (E.NONE, tid, 2)
        assert list_offset(c, "orphan", -1, partition=1).offset == 2


def test_broker_survives_a_garbage_produce_frame(broker):
    with client(broker) as c:
        create(c, "g")
        raw = encode(PRODUCE, 9, 5, produce_request("g", batch(1)))
        c.send_raw(raw[:20] + struct.pack(">i", 0x7FFFFFF0) + raw[24:])
    with client(broker) as c:
        assert produce(c, "g", batch(1)).error_code == E.NONE


# --- with the coordinator: committed offsets and the offsets topic ---------------------------

def commit(c, group, topic, offset):
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": 0,
                 "commit_timestamp": -1, "committed_metadata": ""}]}]}
    return c.request(8, 8, body).topics[0].partitions[0].error_code


def committed(c, group, topic):
    body = {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": False}
    return c.request(9, 8, body).groups[0].topics[0].partitions[0].committed_offset


def _wait_coordinator(c, group, topic, deadline_s=10.0):
    end = time.monotonic() + deadline_s
    while (code := commit(c, group, topic, 1)) == E.COORDINATOR_LOAD_IN_PROGRESS:
        assert time.monotonic() < end
        time.sleep(0.05)
    return code


def test_deleting_a_topic_deletes_its_committed_offsets(broker):
    served = {k for k, _lo, _hi in broker.app.handlers.served()}
    if not {8, 9} <= served:
        pytest.skip("OffsetCommit/OffsetFetch are not served yet")
    with client(broker) as c:
        create(c, "offs")
        produce(c, "offs", batch(3))
        assert _wait_coordinator(c, "g1", "offs") == E.NONE
        assert commit(c, "g1", "missing-topic", 1) == E.UNKNOWN_TOPIC_OR_PARTITION  # app.topics hook
        assert commit(c, "g1", "offs", 3) == E.NONE
        assert committed(c, "g1", "offs") == 3
        listed = {t.name: t.is_internal for t in metadata(c, None).topics}
        assert listed == {"offs": False, "__consumer_offsets": True, "__share_group_state": True,
                          "__transaction_state": True}
        c.request(DELETE, 6, {"topics": [{"name": "offs", "topic_id": ZERO}], "timeout_ms": 5000})
        create(c, "offs")
        assert committed(c, "g1", "offs") == -1


def test_fsync_always_acknowledges_durable_appends():
    with ThreadedBroker(overrides={"log.fsync.mode": "always"}) as b, client(b) as c:
        create(c, "durable")
        for acks in (1, -1):
            r = produce(c, "durable", batch(2), acks=acks)
            assert r.error_code == E.NONE
            log = b.call(lambda: b.app.topics.log("durable", 0))
            assert log.recovery_point >= r.base_offset + 2  # fsynced before the answer


async def test_create_topics_out_of_file_descriptors_is_an_error_code(abroker):
    """A storage failure while creating logs answers KAFKA_STORAGE_ERROR and rolls back."""
    import errno

    from odradek.broker.wire_client import AsyncClient
    from odradek.protocol.errors import ErrorCode

    logs = abroker.app.logs
    real_create = logs.open_new

    def failing_create(topic, partition, *args, **kwargs):
        if partition >= 2:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_create(topic, partition, *args, **kwargs)

    logs.open_new = failing_create
    client = await AsyncClient.connect("127.0.0.1", abroker.port)
    try:
        body = {"topics": [{"name": "fd-hungry", "num_partitions": 5, "replication_factor": -1,
                            "assignments": [], "configs": []}], "timeout_ms": 5000}
        r = await client.request(19, 5, body)
        assert r.topics[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        logs.open_new = real_create
        meta = await client.request(3, 12, {"topics": [{"name": "fd-hungry"}],
                                            "allow_auto_topic_creation": False})
        assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await client.request(19, 5, body)).topics[0].error_code == ErrorCode.NONE
    finally:
        logs.open_new = real_create
        await client.close()


# --- records that cannot be read (issue 19 item 4) ------------------------------------

def _forged(area: bytes, codec: int, count: int = 2, ts: int = 1000) -> bytes:
    """A batch with a right CRC around a records area that may be garbage."""
    import crc32c

    tail = struct.pack(">hiqqqhii", codec, count - 1, ts, ts, -1, -1, -1, count) + area
    return struct.pack(">qiibI", 0, len(tail) + 9, -1, 2, crc32c.crc32c(tail)) + tail


@pytest.mark.parametrize("policy", ["delete", "compact"])
def test_undecodable_batches_are_refused_and_lookups_by_time_keep_working(broker, policy):
    garbage = [_forged(bytes(range(48)), codec) for codec in (1, 2, 3, 4)]
    garbage += [_forged(b"\x00" * 30, 0), _forged(b"\xff" * 30, 0)]  # uncompressed noise
    with client(broker) as c:
        create(c, "g", configs={"cleanup.policy": policy})
        assert produce(c, "g", batch(2, base_timestamp=500)).error_code == E.NONE
        for data in garbage:
            assert produce(c, "g", data).error_code in (E.CORRUPT_MESSAGE, E.INVALID_RECORD)
        assert produce(c, "g", batch(2, base_timestamp=2000)).base_offset == 2
        assert (list_offset(c, "g", 1000).offset, list_offset(c, "g", 2000).offset) == (2, 2)
        assert list_offset(c, "g", -3).offset == 2
        assert values(fetch_one(c, "g", 0).records) == [b"v0", b"v1", b"v0", b"v1"]


def test_a_stored_undecodable_batch_does_not_break_lookups_by_time(broker):
    """Batches written before Produce checked records (or imported) may not decode: lookups still answer."""
    with client(broker) as c:
        create(c, "old")
        assert produce(c, "old", batch(2, base_timestamp=500)).error_code == E.NONE
        log = broker.app.topics.log("old", 0)
        broker.call(lambda: log.append(_forged(bytes(range(48)), 4, ts=3000), validate=False))
        assert produce(c, "old", batch(1, base_timestamp=9000)).base_offset == 4
        for version in (1, 4, 7):
            assert list_offset(c, "old", 2000, version=version).offset == 2  # the bad batch's first offset
            assert list_offset(c, "old", 5000, version=version).offset == 4
        assert list_offset(c, "old", -3).offset == 4
        assert c.request(18, 0, {}).error_code == 0


# --- answers bounded whatever the request names (issue 19 item 5) --------------------------

def _fetch_many(c, parts, max_bytes=2**31 - 1, version=12):
    """A Fetch naming ``parts`` = [(topic, partition, offset, partition_max_bytes)] in this order."""
    body = fetch_request("unused", 0, max_bytes=max_bytes)
    body["topics"] = [{"topic": t, "partitions": [{"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
                                                   "log_start_offset": -1, "partition_max_bytes": m}]}
                      for t, p, o, m in parts]
    return c.request(FETCH, version, body)


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_a_partition_named_300_times_is_answered_once(broker, version):
    big = batch(1, value=b"x" * 1_000_000)
    with client(broker) as c:
        create(c, "amp")
        assert produce(c, "amp", big).error_code == E.NONE
        r = _fetch_many(c, [("amp", 0, 0, 2 << 20)] * 300, version=version)
        assert [(t.topic, [p.partition_index for p in t.partitions]) for t in r.responses] == [("amp", [0])]
        assert len(r.responses[0].partitions[0].records) == len(big)


def test_duplicates_keep_the_first_place_and_the_last_limits_as_kafka(broker):
    with client(broker) as c:
        create(c, "da")
        create(c, "db")
        for _ in range(3):
            produce(c, "da", batch(1))
        produce(c, "db", batch(1))
        r = _fetch_many(c, [("da", 0, 0, 1 << 20), ("db", 0, 0, 1 << 20), ("da", 0, 2, 1 << 20)])
        got = [(t.topic, [(p.partition_index, [h.base_offset for _pos, h in iter_batch_headers(p.records)])
                          for p in t.partitions]) for t in r.responses]
        assert got == [("da", [(0, [2])]), ("db", [(0, [0])])]


def test_fetch_max_bytes_caps_the_answer_but_one_batch_always_goes_out():
    with ThreadedBroker(overrides={"fetch.max.bytes": 100_000}) as b, client(b) as c:
        create(c, "capped", partitions=8)
        for p in range(8):
            for _ in range(4):
                assert produce(c, "capped", batch(1, value=b"y" * 30_000), partition=p).error_code == E.NONE
        r = _fetch_many(c, [("capped", p, 0, 1 << 20) for p in range(8)])
        total = sum(len(p.records or b"") for t in r.responses for p in t.partitions)
        assert 30_000 < total <= 100_000
        assert [p.error_code for p in r.responses[0].partitions] == [E.NONE] * 8
        # a batch bigger than every limit still goes out whole, first (KIP-74)
        assert produce(c, "capped", batch(1, value=b"z" * 150_000), partition=0).error_code == E.NONE
        r = _fetch_many(c, [("capped", 0, 4, 1000), ("capped", 1, 0, 1000)], max_bytes=1000)
        sizes = [len(p.records or b"") for p in r.responses[0].partitions]
        assert sizes[0] > 150_000 and sizes[1] == 0


def test_list_offsets_refuses_a_partition_named_twice(broker):
    with client(broker) as c:
        create(c, "lo", partitions=2)
        produce(c, "lo", batch(1))
        part = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
        other = {"partition_index": 1, "current_leader_epoch": -1, "timestamp": -1}
        for version in (1, 4, 7):
            r = c.request(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "lo", "partitions": [part, other, part]}]})
            assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [
                (0, E.INVALID_REQUEST), (1, E.NONE), (0, E.INVALID_REQUEST)]
