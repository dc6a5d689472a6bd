"""A topic's ``compression.type``, as Kafka serves it: every value accepted on CreateTopics,
AlterConfigs, IncrementalAlterConfigs and as the broker default; batches in another codec
recompressed on append (Kafka's ``LogValidator``), read back by every client."""

from __future__ import annotations

import asyncio

import crc32c
import pytest

from odradek.broker.dataplane.recompress import recompress
from odradek.broker.wire_client import SyncClient
from odradek.protocol.compression import decompress
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import Record, decode_batch, encode_batch
from odradek.testing import ThreadedBroker

from .test_dataplane_clients import (
    aio_consume,
    aio_produce,
    assert_exactly,
    ck_consume,
    ck_produce,
    kp_consume,
    kp_produce,
    payloads,
    unique,
)

pytestmark = pytest.mark.integration

CREATE, PRODUCE, FETCH, DESCRIBE, ALTER, INCREMENTAL = 19, 0, 1, 32, 33, 44
TOPIC, BROKER = 2, 4
TYPES = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4, "producer": None}


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30)


def _create(b, name: str, configs: dict[str, str], partitions: int = 1):
    with _client(b) as c:
        return c.request(CREATE, 7, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout_ms": 5000, "validate_only": False}).topics[0]


def _produce(b, topic: str, batch: bytes) -> int:
    with _client(b) as c:
        r = c.request(PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def _fetch(b, topic: str, version: int = 12):
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 22, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 22}]}]}
    with _client(b) as c:
        return c.request(FETCH, version, body).responses[0].partitions[0]


def _stored(b, topic: str) -> list[tuple]:
    """Every stored batch of partition 0: (header, records)."""
    data = _fetch(b, topic).records
    out, pos = [], 0
    while pos < len(data):
        h, records = decode_batch(data, pos)
        out.append((h, records))
        pos += h.size
    return out


def _batch(codec: int) -> bytes:
    return encode_batch([Record(0, 1_700_000_000_000, b"k0", b"v0" * 50, (("h", b"x"),)),
                         Record(1, 1_700_000_000_007, None, b"v1" * 50),
                         Record(2, 1_700_000_000_003, b"k2", None)], compression=codec)


@pytest.mark.parametrize("compression_type", list(TYPES))
def test_every_compression_type_recompresses_each_codec_as_kafka_does(broker, compression_type):
    """Each producer codec into a topic of each compression.type: stored in the topic's codec
    (as sent under ``producer``), same records, keys, headers and timestamps, offsets in order."""
    topic = unique(f"ct-{compression_type}")
    assert _create(broker, topic, {"compression.type": compression_type}).error_code == E.NONE
    sent = _batch(0)
    _h, expected = decode_batch(sent)
    for i, codec in enumerate(range(5)):
        answer = _produce(broker, topic, _batch(codec))
        assert (answer.error_code, answer.base_offset) == (E.NONE, 3 * i)
    stored = _stored(broker, topic)
    assert len(stored) == 5
    for i, (h, records) in enumerate(stored):
        target = TYPES[compression_type]
        assert h.compression == (i if target is None else target)
        assert (h.base_offset, h.last_offset_delta, h.max_timestamp) == (3 * i, 2, 1_700_000_000_007)
        assert [(r.offset - 3 * i, r.timestamp, r.key, r.value, r.headers) for r in records] == [
            (r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]


def test_recompression_keeps_the_producer_fields():
    """Kafka's rebuild keeps producer id, epoch, base sequence and the transactional flag: an
    idempotent producer's retry of a recompressed batch is still recognised as a duplicate."""
    batch = encode_batch([(b"k", b"v"), (b"k2", b"v2")], compression=1, producer_id=7, producer_epoch=3,
                         base_sequence=11, transactional=True, partition_leader_epoch=0)
    for codec in range(5):
        rebuilt, h = recompress(batch, codec)
        assert (h.compression, h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional,
                h.records_count) == (codec, 7, 3, 11, True, 2)
        assert [(r.key, r.value) for r in decode_batch(rebuilt)[1]] == [(b"k", b"v"), (b"k2", b"v2")]


def test_records_numbered_out_of_order_are_renumbered():
    """Kafka rebuilds a batch whose inner offsets do not run 0, 1, 2 at consecutive offsets."""
    gapped = encode_batch([Record(0, 5, b"a", b"1"), Record(2, 6, b"b", b"2")], compression=2)
    rebuilt, h = recompress(gapped, 3)
    assert (h.compression, h.last_offset_delta) == (3, 1)
    assert [(r.offset, r.timestamp, r.key) for r in decode_batch(rebuilt)[1]] == [(0, 5, b"a"), (1, 6, b"b")]


def test_header_keys_are_carried_over_byte_for_byte():
    """The records area is re-framed, not re-encoded: even a header key that is not UTF-8
    reaches the reader as the producer sent it."""
    plain = encode_batch([(b"k", b"v", (("h", b"x"),))])
    odd = plain.replace(b"\x02h", b"\x02\xff")  # the header key's one byte made non-UTF-8
    odd = odd[:17] + crc32c.crc32c(odd[21:]).to_bytes(4, "big") + odd[21:]
    rebuilt, h = recompress(odd, 1)
    assert h.compression == 1 and decompress(1, rebuilt[61:]) == odd[61:]


def test_an_idempotent_retry_of_a_recompressed_batch_is_a_duplicate(broker):
    with _client(broker) as c:
        init = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                 "producer_id": -1, "producer_epoch": -1})
    topic = unique("ct-idem")
    _create(broker, topic, {"compression.type": "lz4"})
    batch = encode_batch([(b"k", b"v")], compression=1, producer_id=init.producer_id,
                         producer_epoch=init.producer_epoch, base_sequence=0)
    first, again = _produce(broker, topic, batch), _produce(broker, topic, batch)
    assert (first.error_code, again.error_code, again.base_offset) == (E.NONE, E.NONE, first.base_offset)
    assert [h.compression for h, _r in _stored(broker, topic)] == [3]


def test_log_append_time_is_stamped_on_the_recompressed_batch(broker):
    topic = unique("ct-lat")
    _create(broker, topic, {"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
    answer = _produce(broker, topic, _batch(3))
    ((h, records),) = _stored(broker, topic)
    assert answer.log_append_time_ms > 0 and h.compression == 1
    assert h.max_timestamp == answer.log_append_time_ms and h.attributes & 8


def test_a_zstd_topic_refuses_fetchers_older_than_v10(broker):
    """Kafka's ``maybeConvertFetchedData``: those fetchers predate zstd."""
    topic = unique("ct-zstd-old")
    _create(broker, topic, {"compression.type": "zstd"})
    _produce(broker, topic, _batch(0))
    assert [_fetch(broker, topic, v).error_code for v in (4, 9, 10)] == [
        E.UNSUPPORTED_COMPRESSION_TYPE, E.UNSUPPORTED_COMPRESSION_TYPE, E.NONE]


def test_bad_values_are_invalid_config(broker):
    for value in ("brotli", "GZIP", ""):
        assert _create(broker, unique("ct-bad"), {"compression.type": value}).error_code == E.INVALID_CONFIG


def _describe(b, rtype: int, name: str) -> dict:
    with _client(b) as c:
        r = c.request(DESCRIBE, 4, {"resources": [{"resource_type": rtype, "resource_name": name,
                                                   "configuration_keys": ["compression.type"]}],
                                    "include_synonyms": True, "include_documentation": False})
    (entry,) = r.results[0].configs
    return {"value": entry.value, "source": entry.config_source}


def test_alter_configs_incremental_and_the_broker_default():
    with ThreadedBroker(overrides={"compression.type": "gzip"}) as b:
        topic = unique("ct-alter")
        _create(b, topic, {})
        assert _describe(b, TOPIC, topic) == {"value": "gzip", "source": 4}  # STATIC_BROKER_CONFIG
        _produce(b, topic, _batch(0))
        with _client(b) as c:
            r = c.request(INCREMENTAL, 1, {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [
                {"name": "compression.type", "config_operation": 0, "value": "zstd"}]}], "validate_only": False})
            assert r.responses[0].error_code == E.NONE
            _produce(b, topic, _batch(0))
            r = c.request(ALTER, 2, {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [
                {"name": "compression.type", "value": "snappy"}]}], "validate_only": False})
            assert r.responses[0].error_code == E.NONE
            _produce(b, topic, _batch(4))
            r = c.request(INCREMENTAL, 1, {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
                {"name": "compression.type", "config_operation": 0, "value": "lz4"}]}], "validate_only": False})
            assert r.responses[0].error_code == E.NONE
            r = c.request(INCREMENTAL, 1, {"resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [
                {"name": "compression.type", "config_operation": 1, "value": None}]}], "validate_only": False})
            assert r.responses[0].error_code == E.NONE
            _produce(b, topic, _batch(1))
        assert [h.compression for h, _r in _stored(b, topic)] == [1, 4, 2, 3]
        assert _describe(b, TOPIC, topic) == {"value": "lz4", "source": 3}  # DYNAMIC_DEFAULT_BROKER_CONFIG
        b.restart()  # the topic's override and the broker default survive
        _produce(b, topic, _batch(0))
        assert [h.compression for h, _r in _stored(b, topic)] == [1, 4, 2, 3, 3]


# --- every value with every client ------------------------------------------------------------

async def _round_trip(bs: str, topic: str) -> None:
    """Each client produces its own records (kafka-python gzip, aiokafka lz4, librdkafka none);
    each reads back all of them."""
    per = 40
    kp, aio, ck = payloads("kp", per), payloads("aio", per), payloads("ck", per)
    await asyncio.to_thread(kp_produce, bs, topic, kp, compression_type="gzip")
    await aio_produce(bs, topic, aio, compression_type="lz4")
    await asyncio.to_thread(ck_produce, bs, topic, ck)
    every = kp + aio + ck
    assert_exactly(await asyncio.to_thread(kp_consume, bs, topic, 1, len(every)), every)
    assert_exactly(await aio_consume(bs, topic, 1, len(every)), every)
    assert_exactly(await asyncio.to_thread(ck_consume, bs, topic, 1, len(every)), every)


@pytest.mark.parametrize("compression_type", list(TYPES))
async def test_every_compression_type_with_every_client(abroker, compression_type):
    """The topic created by a different client's admin API per value, then written and read by all."""
    bs = abroker.bootstrap_servers
    topic = unique(f"ctc-{compression_type}")
    maker = list(TYPES).index(compression_type) % 3
    if maker == 0:
        from kafka.admin import KafkaAdminClient, NewTopic

        def make() -> None:
            admin = KafkaAdminClient(bootstrap_servers=bs)
            try:
                admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"compression.type": compression_type})])
            finally:
                admin.close()

        await asyncio.to_thread(make)
    elif maker == 1:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"compression.type": compression_type})])
        finally:
            await admin.close()
    else:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bs})
        futures = admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": compression_type})])
        await asyncio.to_thread(futures[topic].result, 10)
    await _round_trip(bs, topic)
    target = TYPES[compression_type]
    log = abroker.app.topics.log(topic, 0)
    codecs = {h.compression for h, _r in _batches(log)}
    assert codecs == ({1, 3, 0} if target is None else {target})


def _batches(log):
    with log.reading() as segments:
        return [(h, None) for seg in segments for _pos, _buf, _off, h in seg.iter_batches()]


async def test_each_clients_alter_configs_changes_the_codec(abroker):
    """kafka-python (incremental), aiokafka (AlterConfigs) and confluent-kafka (incremental, as
    librdkafka's admin tests do with gzip and lz4) each set compression.type; the next batch is
    stored in it and DescribeConfigs reports it."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AioResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType as KpType
    from kafka.admin import KafkaAdminClient

    bs = abroker.bootstrap_servers
    topic = unique("ct-clients")
    app = abroker.app
    await app.topics.create(topic, 1)

    def kp_set() -> None:
        a = KafkaAdminClient(bootstrap_servers=bs)
        try:
            a.alter_configs([KpResource(KpType.TOPIC, topic, configs={"compression.type": "zstd"})])
        finally:
            a.close()

    def ck_set(value: str) -> None:
        a = AdminClient({"bootstrap.servers": bs})
        res = a.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("compression.type", value, incremental_operation=AlterConfigOpType.SET)])])
        for f in res.values():
            f.result(10)
        described = next(iter(a.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values())).result(10)
        assert described["compression.type"].value == value

    async def aio_set() -> None:
        a = AIOKafkaAdminClient(bootstrap_servers=bs)
        await a.start()
        try:
            res = await a.alter_configs([AioResource(AioType.TOPIC, topic, configs={"compression.type": "snappy"})])
            assert [r[0] for resp in res for r in resp.resources] == [0]
        finally:
            await a.close()

    steps = [(lambda: asyncio.to_thread(kp_set), 4), (aio_set, 2), (lambda: asyncio.to_thread(ck_set, "gzip"), 1),
             (lambda: asyncio.to_thread(ck_set, "lz4"), 3)]
    for i, (change, codec) in enumerate(steps):
        await change()
        assert TYPES[app.logs.get(topic, 0).config.compression_type] == codec
        await aio_produce(bs, topic, [f"v{i}".encode()])
        assert [h.compression for h, _r in _batches(app.topics.log(topic, 0))][-1] == codec
    assert_exactly(await aio_consume(bs, topic, 1, 4), [b"v0", b"v1", b"v2", b"v3"])


# --- compression levels (KIP-390, Kafka 3.8) -------------------------------------------------

LEVELS = ("compression.gzip.level", "compression.lz4.level", "compression.zstd.level")


def _describe_levels(b, rtype: int, name: str) -> dict:
    with _client(b) as c:
        r = c.request(DESCRIBE, 4, {"resources": [{"resource_type": rtype, "resource_name": name,
                                                   "configuration_keys": list(LEVELS)}],
                                    "include_synonyms": False, "include_documentation": False})
    assert r.results[0].error_code == E.NONE
    return {e.name: (e.value, e.config_source) for e in r.results[0].configs}


def _area(batch: bytes) -> bytes:
    """The records area of one v2 batch (after its 61-byte header)."""
    return batch[61:]


def test_compression_levels_are_accepted_checked_and_described_as_kafka_does(broker):
    """Kafka's ranges: gzip 1..9 or -1, lz4 1..17, zstd -131072..22; defaults -1, 9, 3."""
    topic = unique("ct-levels")
    assert _create(broker, topic, {}).error_code == E.NONE
    assert _describe_levels(broker, TOPIC, topic) == {
        "compression.gzip.level": ("-1", 5), "compression.lz4.level": ("9", 5),
        "compression.zstd.level": ("3", 5)}  # DEFAULT_CONFIG
    assert _describe_levels(broker, BROKER, str(broker.app.node_id))["compression.zstd.level"] == ("3", 5)
    good = {"compression.gzip.level": "1", "compression.lz4.level": "17", "compression.zstd.level": "-131072"}
    topic = unique("ct-levels")
    assert _create(broker, topic, good).error_code == E.NONE
    assert {k: v for k, (v, _s) in _describe_levels(broker, TOPIC, topic).items()} == good
    for name, value in (("compression.gzip.level", "0"), ("compression.gzip.level", "10"),
                        ("compression.lz4.level", "0"), ("compression.lz4.level", "18"),
                        ("compression.zstd.level", "23"), ("compression.zstd.level", "-131073"),
                        ("compression.zstd.level", "x")):
        assert _create(broker, unique("ct-bad-level"), {name: value}).error_code == E.INVALID_CONFIG, (name, value)


def test_the_topics_level_is_used_when_the_broker_recompresses(broker):
    """A batch recompressed into gzip, lz4 or zstd is compressed at the topic's level."""
    import cramjam  # noqa: PLC0415

    from odradek.protocol.compression import lz4_compress  # noqa: PLC0415

    sent = encode_batch([(b"key-%d" % i, b"a fairly compressible value %d " % (i % 7) * 20) for i in range(200)])
    area = _area(sent)
    cases = [("gzip", "compression.gzip.level", "1", bytes(cramjam.gzip.compress(area, level=1))),
             ("gzip", "compression.gzip.level", "9", bytes(cramjam.gzip.compress(area, level=9))),
             ("zstd", "compression.zstd.level", "19", bytes(cramjam.zstd.compress(area, level=19))),
             ("zstd", "compression.zstd.level", "-5", bytes(cramjam.zstd.compress(area, level=-5))),
             ("lz4", "compression.lz4.level", "9", lz4_compress(area))]
    for ctype, name, level, expected in cases:
        topic = unique(f"ct-{ctype}-{level}")
        assert _create(broker, topic, {"compression.type": ctype, name: level}).error_code == E.NONE
        assert _produce(broker, topic, sent).error_code == E.NONE
        with _client(broker) as c:
            stored = c.request(FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 22, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 22}]}]}).responses[0].partitions[0].records
        assert _area(stored) == expected, (ctype, level)
    topic = unique("ct-lz4-17")
    assert _create(broker, topic, {"compression.type": "lz4", "compression.lz4.level": "17"}).error_code == E.NONE
    _produce(broker, topic, sent)
    ((h, records),) = _stored(broker, topic)
    assert h.compression == 3 and len(records) == 200
    assert _area(_fetch(broker, topic).records) == lz4_compress(area)  # accepted; cramjam has no lz4 levels


def test_the_broker_level_is_dynamic_like_compression_type():
    with ThreadedBroker(overrides={"compression.type": "zstd", "compression.zstd.level": "1"}) as b:
        topic = unique("ct-broker-level")
        _create(b, topic, {})
        assert _describe_levels(b, TOPIC, topic)["compression.zstd.level"] == ("1", 4)  # STATIC_BROKER_CONFIG
        with _client(b) as c:
            r = c.request(INCREMENTAL, 1, {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
                {"name": "compression.zstd.level", "config_operation": 0, "value": "7"}]}], "validate_only": False})
            assert r.responses[0].error_code == E.NONE
            r = c.request(INCREMENTAL, 1, {"resources": [{"resource_type": BROKER, "resource_name": "", "configs": [
                {"name": "compression.zstd.level", "config_operation": 0, "value": "99"}]}], "validate_only": False})
            assert r.responses[0].error_code == E.INVALID_REQUEST  # as every broker config's bad value
        assert _describe_levels(b, TOPIC, topic)["compression.zstd.level"] == ("7", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
