"""Config changes at runtime with real admin clients over TCP: kafka-python, aiokafka, confluent-kafka.

AlterConfigs / IncrementalAlterConfigs change a topic's overrides and the
broker's dynamic log defaults; DescribeConfigs reports them with Kafka's
sources and synonyms; the changes survive a restart and take effect on the
live logs (retention, segment rolls, compaction on and off, batch size,
timestamp type).  Bad input gets Kafka's error codes and loses nothing.
"""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC, INVALID_TOPIC = 40, 42, 3, 17
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(b, name: str, configs: dict[str, str] | None = None, partitions: int = 1) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [], "configs": [{"name": k, "value": v}
                                                       for k, v in (configs or {}).items()]}],
            "timeout_ms": 5000, "validate_only": False}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        assert c.request(19, 5, body).topics[0].error_code == 0


def incremental(b, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], *,
                validate_only: bool = False, version: int = 1) -> list:
    body = {"resources": [{"resource_type": t, "resource_name": n,
                           "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in cfgs]}
                          for t, n, cfgs in resources], "validate_only": validate_only}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return list(c.request(44, version, body).responses)


def legacy(b, resources: list[tuple[int, str, dict[str, str | None]]], *, validate_only: bool = False,
           version: int = 2) -> list:
    body = {"resources": [{"resource_type": t, "resource_name": n,
                           "configs": [{"name": k, "value": v} for k, v in cfgs.items()]}
                          for t, n, cfgs in resources], "validate_only": validate_only}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return list(c.request(33, version, body).responses)


def describe(b, rtype: int, name: str, keys: list[str] | None = None) -> dict[str, object]:
    body = {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": True, "include_documentation": False}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        res = c.request(32, 4, body).results[0]
    assert res.error_code == 0, res
    return {c.name: c for c in res.configs}


def overrides(b, topic: str) -> dict[str, str]:
    return dict(b.call(lambda: b.app.topics.get(topic).configs))


def produce(bs: str, topic: str, pairs: list[tuple[bytes | None, bytes]], **cfg) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, linger_ms=0, **cfg)
    try:
        for k, v in pairs:  # one batch each: segment sizes apply between batches
            p.send(topic, key=k, value=v).get(10)
    finally:
        p.close(10)


def consume(bs: str, topic: str, count: int, timeout: float = 20) -> list:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got: list = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=300).values():
                got += msgs
        return got
    finally:
        c.close()


def earliest(bs: str, topic: str) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs)
    try:
        tp = TopicPartition(topic, 0)
        return c.beginning_offsets([tp])[tp]
    finally:
        c.close()


def wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# --- real clients ---------------------------------------------------------------------

def test_kafka_python_alter_and_describe_topic_and_broker(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    topic = unique("kp")
    create_topic(broker, topic)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        # incremental by default (the broker advertises key 44)
        res = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                              configs={"retention.ms": "3600000",
                                                       "cleanup.policy": ("APPEND", "compact")})])
        assert res == {"topic": {topic: "OK"}} or all(
            str(v).endswith("OK") or v in (None, "OK") for v in res["topic"].values()), res
        assert overrides(broker, topic) == {"retention.ms": "3600000", "cleanup.policy": "delete,compact"}
        # the legacy API replaces the whole set (kafka-python re-sends the other overrides it described)
        a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.bytes": "1048576"})],
                        incremental=False)
        assert overrides(broker, topic) == {"retention.ms": "3600000", "cleanup.policy": "delete,compact",
                                            "segment.bytes": "1048576"}
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True)
        entries = got["topic"][topic]
        assert entries["segment.bytes"]["value"] == "1048576"
        assert entries["segment.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        # a broker default changed at runtime (this node's id)
        a.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={"log.retention.bytes": "5000000"})])
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=["retention.bytes"])],
                                 include_synonyms=True)
        entry = got["topic"][topic]["retention.bytes"]
        assert entry["value"] == "5000000" and entry["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert [s["source"] for s in entry["synonyms"]] == ["DYNAMIC_BROKER_CONFIG", "DEFAULT_CONFIG"]
        got = a.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs=["log.retention.bytes",
                                                                                          "node.id"])])
        assert got["broker"]["1"]["log.retention.bytes"]["read_only"] is False
        assert got["broker"]["1"]["log.retention.bytes"]["value"] == "5000000"
    finally:
        a.close()
    assert broker.call(lambda: broker.app.logs.get(topic, 0).config.retention_bytes) == 5000000


async def test_aiokafka_alter_and_describe_configs(abroker):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    topic = unique("aio")
    a = AIOKafkaAdminClient(bootstrap_servers=abroker.bootstrap_servers)
    await a.start()
    try:
        from aiokafka.admin import NewTopic

        await a.create_topics([NewTopic(topic, 1, 1)])
        res = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                    configs={"retention.ms": "7200000",
                                                             "max.message.bytes": "200000"})])
        # aiokafka hands back its response structs: (error_code, error_message, type, name) rows
        assert [r[0] for resp in res for r in resp.resources] == [0]
        res = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True)
        rows = {c[0]: c for resp in res for r in resp.resources for c in r[4]}
        assert rows["retention.ms"][1] == "7200000"
        assert rows["max.message.bytes"][1] == "200000"
        assert rows["retention.bytes"][1] == "-1"
    finally:
        await a.close()
    assert abroker.app.logs.get(topic, 0).config.max_message_bytes == 200000


def test_confluent_incremental_and_legacy_alter_configs(broker):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    topic = unique("ck")
    create_topic(broker, topic, {"cleanup.policy": "delete"})
    a = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = a.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])])
    for f in res.values():
        f.result(10)
    assert overrides(broker, topic) == {"retention.ms": "60000", "cleanup.policy": "delete,compact"}
    res = a.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])])
    for f in res.values():
        f.result(10)
    assert overrides(broker, topic) == {"cleanup.policy": "compact"}
    assert broker.call(lambda: broker.app.logs.get(topic, 0).config.compact) is True
    # legacy: the whole set is replaced
    res = a.alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "600000"})])
    for f in res.values():
        f.result(10)
    assert overrides(broker, topic) == {"segment.ms": "600000"}
    # describe through librdkafka
    fs = a.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    entries = next(iter(fs.values())).result(10)
    assert entries["segment.ms"].value == "600000"
    assert entries["cleanup.policy"].value == "delete"
    # a non-existent topic: UNKNOWN_TOPIC_OR_PARTITION
    from confluent_kafka import KafkaException

    res = a.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, unique("none"), incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])])
    with pytest.raises(KafkaException) as exc:
        next(iter(res.values())).result(10)
    assert exc.value.args[0].code() == UNKNOWN_TOPIC


# --- changes take effect ----------------------------------------------------------------

def test_retention_lowered_at_runtime_removes_old_segments():
    with ThreadedBroker(overrides={"log.retention.check.interval.ms": 100}) as b:
        topic = unique("ret")
        create_topic(b, topic, {"segment.bytes": "1024"})
        values = [(None, b"x" * 200) for _ in range(30)]
        produce(b.bootstrap_servers, topic, values)
        segments = b.call(lambda: len(b.app.logs.get(topic, 0).segments))
        assert segments > 3
        time.sleep(0.3)  # a retention check passes: a week's retention keeps everything
        assert earliest(b.bootstrap_servers, topic) == 0
        assert incremental(b, [(TOPIC, topic, [("retention.ms", SET, "1")])])[0].error_code == 0
        assert wait_for(lambda: b.call(lambda: len(b.app.logs.get(topic, 0).segments)) == 1)
        assert earliest(b.bootstrap_servers, topic) > 0
        # the active segment stays: the log end is where it was
        assert b.call(lambda: b.app.logs.get(topic, 0).log_end_offset) == 30


def test_segment_size_max_message_and_timestamp_type_take_effect(broker):
    from kafka.errors import MessageSizeTooLargeError

    topic = unique("eff")
    create_topic(broker, topic)
    bs = broker.bootstrap_servers
    assert incremental(broker, [(TOPIC, topic, [("segment.bytes", SET, "2048"),
                                                ("max.message.bytes", SET, "4000"),
                                                ("message.timestamp.type", SET, "LogAppendTime")])])[0].error_code == 0
    produce(bs, topic, [(None, b"y" * 500) for _ in range(20)])
    assert broker.call(lambda: len(broker.app.logs.get(topic, 0).segments)) >= 4
    with pytest.raises(MessageSizeTooLargeError):
        produce(bs, topic, [(None, b"z" * 6000)], max_request_size=100000)
    got = consume(bs, topic, 20)
    assert len(got) == 20
    assert all(m.timestamp_type == 1 for m in got)  # LogAppendTime, stamped by the broker
    assert all(abs(m.timestamp - time.time() * 1000) < 600_000 for m in got)


def test_compaction_switched_on_then_off_survives_restart(broker):
    topic = unique("cmp")
    create_topic(broker, topic, {"segment.bytes": "1024"})
    bs = broker.bootstrap_servers
    pairs = [(f"k{i % 5}".encode(), f"v{i}".encode() * 20) for i in range(60)]
    produce(bs, topic, pairs)
    # compaction on, but nothing younger than an hour may be compacted: the cleaner leaves it all
    assert incremental(broker, [(TOPIC, topic, [("cleanup.policy", SET, "compact"),
                                                ("min.compaction.lag.ms", SET, "3600000"),
                                                ("min.cleanable.dirty.ratio", SET, "0.01")])])[0].error_code == 0
    assert broker._call(broker.app.logs.run_cleaner(force=True)) == 0
    assert len(consume(bs, topic, 60)) == 60
    assert incremental(broker, [(TOPIC, topic, [("min.compaction.lag.ms", DELETE, None)])])[0].error_code == 0
    assert broker._call(broker.app.logs.run_cleaner(force=True)) == 1
    kept = consume(bs, topic, 60, timeout=3)
    assert 5 <= len(kept) < 60  # the newest value of every key, and the active segment
    assert {m.key for m in kept} == {f"k{i}".encode() for i in range(5)}
    # compaction off again: the log keeps its gaps, and a restart must not cut it at the first one
    assert incremental(broker, [(TOPIC, topic, [("cleanup.policy", SET, "delete")])])[0].error_code == 0
    broker.restart()
    assert overrides(broker, topic)["cleanup.policy"] == "delete"
    after = consume(broker.bootstrap_servers, topic, len(kept))
    assert [(m.offset, m.value) for m in after] == [(m.offset, m.value) for m in kept]
    produce(broker.bootstrap_servers, topic, [(None, b"keyless is fine again")])


def test_dynamic_broker_defaults_apply_to_topics_without_overrides_and_survive_restart(broker):
    plain, own = unique("plain"), unique("own")
    create_topic(broker, plain)
    create_topic(broker, own, {"retention.ms": "1000"})
    res = incremental(broker, [(BROKER, "", [("log.retention.ms", SET, "120000")]),
                               (BROKER, "1", [("log.segment.bytes", SET, "2000000")])])
    assert [r.error_code for r in res] == [0, 0]
    cfg = broker.call(lambda: broker.app.logs.get(plain, 0).config)
    assert (cfg.retention_ms, cfg.segment_bytes) == (120000, 2000000)
    assert broker.call(lambda: broker.app.logs.get(own, 0).config.retention_ms) == 1000
    broker.restart()
    cfg = broker.call(lambda: broker.app.logs.get(plain, 0).config)
    assert (cfg.retention_ms, cfg.segment_bytes) == (120000, 2000000)
    entries = describe(broker, TOPIC, plain, ["retention.ms", "segment.bytes"])
    assert entries["retention.ms"].config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [(s.name, s.source) for s in entries["retention.ms"].synonyms] == [
        ("log.retention.ms", 3), ("log.retention.hours", 5)]
    assert entries["segment.bytes"].config_source == 2  # DYNAMIC_BROKER_CONFIG
    default = describe(broker, BROKER, "")
    assert {n: (c.value, c.config_source) for n, c in default.items()} == {"log.retention.ms": ("120000", 3)}
    # DELETE goes back to the static / default value
    assert incremental(broker, [(BROKER, "", [("log.retention.ms", DELETE, None)])])[0].error_code == 0
    assert broker.call(lambda: broker.app.logs.get(plain, 0).config.retention_ms) == 7 * 24 * 3600 * 1000


def test_topic_changes_survive_restart_and_validate_only_changes_nothing(broker):
    topic = unique("keep")
    create_topic(broker, topic)
    assert incremental(broker, [(TOPIC, topic, [("retention.ms", SET, "99000")])])[0].error_code == 0
    assert incremental(broker, [(TOPIC, topic, [("retention.ms", SET, "5")])],
                       validate_only=True)[0].error_code == 0
    assert legacy(broker, [(TOPIC, topic, {"segment.ms": "1000"})], validate_only=True)[0].error_code == 0
    assert overrides(broker, topic) == {"retention.ms": "99000"}
    broker.restart()
    assert overrides(broker, topic) == {"retention.ms": "99000"}
    assert broker.call(lambda: broker.app.logs.get(topic, 0).config.retention_ms) == 99000
    entry = describe(broker, TOPIC, topic, ["retention.ms"])["retention.ms"]
    assert (entry.value, entry.config_source) == ("99000", 1)


# --- bad input: Kafka's codes, nothing lost ----------------------------------------------

def test_bad_input_gets_kafka_error_codes_and_changes_nothing(broker):
    topic = unique("bad")
    create_topic(broker, topic, {"retention.ms": "50000"})
    produce(broker.bootstrap_servers, topic, [(b"k", b"v%d" % i) for i in range(10)])
    cases = [
        (incremental, [(TOPIC, topic, [("no.such.config", SET, "1")])], INVALID_CONFIG),
        (incremental, [(TOPIC, topic, [("retention.ms", SET, "soon")])], INVALID_CONFIG),
        (incremental, [(TOPIC, topic, [("retention.ms", SET, "-5")])], INVALID_CONFIG),
        (incremental, [(TOPIC, topic, [("cleanup.policy", SET, "shred")])], INVALID_CONFIG),
        (incremental, [(TOPIC, topic, [("retention.ms", APPEND, "5")])], INVALID_CONFIG),
        (incremental, [(TOPIC, topic, [("retention.ms", SET, None)])], INVALID_REQUEST),
        (incremental, [(TOPIC, topic, [("retention.ms", 7, "5")])], INVALID_REQUEST),
        (incremental, [(TOPIC, topic, [("retention.ms", SET, "1"), ("retention.ms", SET, "2")])],
         INVALID_REQUEST),
        (incremental, [(TOPIC, unique("missing"), [("retention.ms", SET, "1")])], UNKNOWN_TOPIC),
        (incremental, [(TOPIC, "", [("retention.ms", SET, "1")])], INVALID_REQUEST),
        (incremental, [(TOPIC, "bad/name", [("retention.ms", SET, "1")])], INVALID_TOPIC),
        (incremental, [(BROKER, "1", [("node.id", SET, "7")])], INVALID_REQUEST),
        (incremental, [(BROKER, "1", [("log.retention.ms", SET, "forever")])], INVALID_REQUEST),
        (incremental, [(BROKER, "1", [("log.retention.bytes", APPEND, "5")])], INVALID_REQUEST),
        (incremental, [(BROKER, "2", [("log.retention.ms", SET, "1")])], INVALID_REQUEST),
        (incremental, [(BROKER, "one", [("log.retention.ms", SET, "1")])], INVALID_REQUEST),
        (incremental, [(8, "1", [("root", DELETE, None)])], INVALID_REQUEST),  # root keeps a level
        (legacy, [(TOPIC, topic, {"retention.ms": None})], INVALID_REQUEST),
        (legacy, [(TOPIC, topic, {"bogus": "1"})], INVALID_CONFIG),
        (legacy, [(TOPIC, topic, {"retention.ms": "1"}), (TOPIC, topic, {"segment.ms": "1"})], INVALID_REQUEST),
    ]
    for send, resources, code in cases:
        codes = [r.error_code for r in send(broker, resources)]
        assert codes == [code] * len(resources), (resources, codes)
    assert overrides(broker, topic) == {"retention.ms": "50000"}
    assert broker.call(lambda: dict(broker.app.dynamic_config.node)) == {}
    # one bad resource does not stop a good one in the same request
    res = incremental(broker, [(TOPIC, topic, [("segment.ms", SET, "600000")]),
                               (TOPIC, topic + "-nope", [("segment.ms", SET, "600000")])])
    assert [r.error_code for r in res] == [0, UNKNOWN_TOPIC]
    assert overrides(broker, topic) == {"retention.ms": "50000", "segment.ms": "600000"}
    assert len(consume(broker.bootstrap_servers, topic, 10)) == 10


def test_confluent_broker_resource_describe_and_incremental_alter(broker):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    a = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = a.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("log.retention.bytes", "123456789", incremental_operation=AlterConfigOpType.SET),
    ])])
    for f in res.values():
        f.result(10)
    assert broker.call(lambda: dict(broker.app.dynamic_config.node)) == {
        "log.cleanup.policy": "delete,compact", "log.retention.bytes": "123456789"}
    assert broker.call(lambda: broker.app.log_config.compact and broker.app.log_config.delete)
    entries = next(iter(a.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values())).result(10)
    assert entries["log.retention.bytes"].value == "123456789"
    assert entries["log.retention.bytes"].source == 2  # DYNAMIC_BROKER_CONFIG
    assert not entries["log.retention.bytes"].is_read_only and entries["node.id"].is_read_only
    # a static setting cannot change at runtime: INVALID_REQUEST, as Kafka answers
    from confluent_kafka import KafkaException

    res = a.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])])
    with pytest.raises(KafkaException) as exc:
        next(iter(res.values())).result(10)
    assert exc.value.args[0].code() == INVALID_REQUEST
