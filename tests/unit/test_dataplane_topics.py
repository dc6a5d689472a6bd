"""The topic registry: names, configs, persistence, adoption, crash recovery; config reporting; waiters."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid

import pytest

from odradek.broker.dataplane import topic_configs
from odradek.broker.dataplane.topic_configs import ConfigSource
from odradek.broker.dataplane.topics import (
    REGISTRY_FILE,
    TopicError,
    TopicRegistry,
    kafka_uuid,
    name_error,
    parse_kafka_uuid,
    read_partition_metadata,
)
from odradek.broker.dataplane.waiters import AppendWaiters
from odradek.protocol.errors import ErrorCode as E
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager


@pytest.mark.parametrize("name, ok", [
    ("orders", True), ("a.b_c-D9", True), ("x" * 249, True),
    ("", False), (".", False), ("..", False), ("x" * 250, False), ("a b", False), ("a/b", False),
    ("ünï", False), ("a:b", False),
])
def test_topic_names_follow_kafka(name, ok):
    assert (name_error(name) is None) == ok


def test_kafka_uuid_round_trip():
    u = uuid.uuid4()
    text = kafka_uuid(u)
    assert len(text) == 22 and "=" not in text
    assert parse_kafka_uuid(text) == u


class Env:
    """A registry over a LogManager in ``tmp``, opened the way BrokerApp opens them."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.registry = TopicRegistry(tmp, LogConfig())
        self.logs = LogManager([tmp], LogConfig(), topic_config=self.registry.log_config)

    async def __aenter__(self) -> TopicRegistry:
        self.registry.load()
        await self.logs.start()
        await self.registry.reconcile(self.logs)
        return self.registry

    async def __aexit__(self, *exc) -> None:
        await self.logs.close()


async def test_create_persists_and_reloads(tmp_path):
    async with Env(tmp_path) as reg:
        t = await reg.create("orders", 3, {"cleanup.policy": "compact", "retention.ms": "1000"})
        assert reg.partition_count("orders") == 3
        assert reg.log("orders", 2).config.compact
        assert read_partition_metadata(tmp_path / "orders-1") == t.topic_id
    async with Env(tmp_path) as reg:
        again = reg.get("orders")
        assert (again.topic_id, again.partitions, again.configs) == (
            t.topic_id, 3, {"cleanup.policy": "compact", "retention.ms": "1000"})
        assert reg.by_id(t.topic_id) is again
        assert reg.log("orders", 0).config.compact  # recovered with the topic's own config


@pytest.mark.parametrize("name, partitions, configs, code", [
    ("bad name", 1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("__consumer_offsets", 1, {}, E.INVALID_TOPIC_EXCEPTION),
    ("ok", 0, {}, E.INVALID_PARTITIONS),
    ("ok", 1, {"nope": "1"}, E.INVALID_CONFIG),
    ("ok", 1, {"retention.ms": None}, E.INVALID_CONFIG),
    ("ok", 1, {"min.insync.replicas": "0"}, E.INVALID_CONFIG),
    ("ok", 1, {"preallocate": "maybe"}, E.INVALID_CONFIG),
    ("ok", 1, {"message.timestamp.type": "Whenever"}, E.INVALID_CONFIG),
])
async def test_create_refusals(tmp_path, name, partitions, configs, code):
    async with Env(tmp_path) as reg:
        with pytest.raises(TopicError) as info:
            await reg.create(name, partitions, configs)
        assert info.value.code == code
        assert reg.names() == []


async def test_exists_collision_and_concurrent_auto_create(tmp_path):
    async with Env(tmp_path) as reg:
        await reg.create("a.b", 1)
        for name, code in (("a.b", E.TOPIC_ALREADY_EXISTS), ("a_b", E.INVALID_TOPIC_EXCEPTION)):
            with pytest.raises(TopicError) as info:
                await reg.create(name, 1)
            assert info.value.code == code
        first, second = await asyncio.gather(reg.ensure("auto"), reg.ensure("auto"))
        assert first is second and reg.partition_count("auto") == 1


async def test_delete_removes_logs_and_entry(tmp_path):
    async with Env(tmp_path) as reg:
        await reg.create("gone", 2)
        await reg.delete("gone")
        assert reg.get("gone") is None and reg.log("gone", 0) is None
        assert not (tmp_path / "gone-0").exists()
        with pytest.raises(TopicError) as info:
            await reg.delete("gone")
        assert info.value.code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert json.loads((tmp_path / REGISTRY_FILE).read_text())["topics"] == []


async def test_interrupted_delete_finishes_on_start(tmp_path):
    async with Env(tmp_path) as reg:
        await reg.create("half-deleted", 2)
    data = json.loads((tmp_path / REGISTRY_FILE).read_text())
    data["topics"], data["deleting"] = [], ["half-deleted"]  # crashed after the marker was written
    (tmp_path / REGISTRY_FILE).write_text(json.dumps(data))
    async with Env(tmp_path) as reg:
        assert reg.get("half-deleted") is None
        assert not (tmp_path / "half-deleted-0").exists()


async def test_interrupted_create_gets_its_missing_partitions(tmp_path):
    async with Env(tmp_path) as reg:
        t = await reg.create("half-made", 3, {"cleanup.policy": "compact"})
    await asyncio.to_thread(shutil.rmtree, tmp_path / "half-made-2")
    async with Env(tmp_path) as reg:
        assert reg.get("half-made").topic_id == t.topic_id
        assert reg.log("half-made", 2) is not None and reg.log("half-made", 2).config.compact


async def test_unregistered_partition_dirs_are_adopted_with_their_ids(tmp_path):
    async with Env(tmp_path) as reg:
        t = await reg.create("legacy", 2)
    (tmp_path / REGISTRY_FILE).unlink()
    async with Env(tmp_path) as reg:
        adopted = reg.get("legacy")
        assert (adopted.topic_id, adopted.partitions) == (t.topic_id, 2)
        assert reg.partition_count("__consumer_offsets") is None  # internal topics are not adopted


def test_topic_config_validation_uses_storage_rules():
    cfg = topic_configs.validate({"segment.bytes": "1000", "compression.type": "producer"}, LogConfig())
    assert cfg.segment_bytes == 1000
    with pytest.raises(topic_configs.TopicConfigError, match="segment.bytes"):
        topic_configs.validate({"segment.bytes": "1"}, LogConfig())


def test_describe_reports_sources_and_synonyms():
    from odradek.broker.config import Config
    from odradek.broker.dynamic_config import DynamicBrokerConfig

    broker = DynamicBrokerConfig(Config.load(None, overrides={"log.retention.hours": "5",
                                                              "log.roll.ms": "60000"}, environ={}))
    base = broker.log_defaults()
    entries = {e.name: e for e in topic_configs.describe({"cleanup.policy": "compact"}, base, broker)}
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == (
        "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert entries["cleanup.policy"].synonyms == (
        ("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG))
    # Kafka's ConfigHelper keeps a topic config's broker synonyms from its primary name on:
    # log.retention.ms is unset, so retention.ms lists none and reports DEFAULT_CONFIG
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        str(5 * 3600_000), ConfigSource.DEFAULT_CONFIG)
    assert entries["retention.ms"].synonyms == ()
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == ("60000", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["segment.ms"].synonyms == (("log.roll.ms", "60000", ConfigSource.STATIC_BROKER_CONFIG),
                                              ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG))
    assert entries["segment.bytes"].synonyms == (
        ("log.segment.bytes", str(1 << 30), ConfigSource.DEFAULT_CONFIG),)
    assert entries["compression.type"].value == "producer"


async def test_waiters_wake_on_notify_and_time_out():
    w = AppendWaiters()
    parked = asyncio.ensure_future(w.wait([("t", 0), ("t", 1)], 30))
    await asyncio.sleep(0)
    assert w.waiting() == 2
    w.notify("t", 1)
    await asyncio.wait_for(parked, 1)
    assert w.waiting() == 0
    await w.wait([("t", 0)], 0.01)  # nobody appends: the timeout ends it
    assert w.waiting() == 0


async def test_changes_whose_callers_are_cancelled_run_to_their_end(tmp_path):
    """A client that hangs up must not cut a create or delete half-way, nor tear topics.json."""
    async with Env(tmp_path) as reg:
        for i in range(10):
            await reg.create(f"old-{i}", 2)
        callers = [asyncio.ensure_future(reg.create(f"new-{i}", 3)) for i in range(10)]
        callers += [asyncio.ensure_future(reg.delete(f"old-{i}")) for i in range(10)]
        for delay in range(len(callers)):  # cancel each caller at a different step
            await asyncio.sleep(0.001 * (delay % 4))
            callers[delay].cancel()
        await asyncio.gather(*callers, return_exceptions=True)
        await reg.drain()
        wanted = [f"new-{i}" for i in range(10)]
        assert reg.names() == wanted
        on_file = json.loads((tmp_path / REGISTRY_FILE).read_text())
        assert ([t["name"] for t in on_file["topics"]], on_file["deleting"]) == (wanted, [])
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("old-")) == []
    async with Env(tmp_path) as reg:
        assert reg.names() == wanted and all(reg.partition_count(n) == 3 for n in wanted)


async def test_a_partition_without_its_metadata_file_gets_it_on_start(tmp_path):
    """A crash between a new partition's directory and its partition.metadata."""
    async with Env(tmp_path) as reg:
        t = await reg.create("half", 2)
    (tmp_path / "half-1" / "partition.metadata").unlink()
    async with Env(tmp_path) as reg:
        assert read_partition_metadata(tmp_path / "half-1") == t.topic_id


# --- growing (CreatePartitions) -------------------------------------------------------------

async def test_grow_persists_and_is_completed_by_the_next_start(tmp_path):
    async with Env(tmp_path) as reg:
        await reg.create("t", 2)
        await reg.grow("t", 5)
        assert reg.get("t").partitions == 5 and reg.log("t", 4) is not None
        assert await reg.grow("t", 9, validate_only=True) and reg.get("t").partitions == 5
        with pytest.raises(TopicError) as err:
            await reg.grow("t", 5)
        assert err.value.code == E.INVALID_PARTITIONS
    # a crash after the registry write, before the new partitions' logs: the next start makes them
    data = json.loads((tmp_path / REGISTRY_FILE).read_text())
    data["topics"][0]["partitions"] = 7
    (tmp_path / REGISTRY_FILE).write_text(json.dumps(data))
    async with Env(tmp_path) as reg:
        assert reg.get("t").partitions == 7 and reg.log("t", 6) is not None


async def test_a_delete_during_a_grow_leaves_no_partition_behind(tmp_path):
    async with Env(tmp_path) as reg:
        await reg.create("t", 1)
        grow = asyncio.ensure_future(reg.grow("t", 200))
        while reg.log("t", 1) is None:  # until the growth is creating its logs
            await asyncio.sleep(0)
        await reg.delete("t")
        assert (await grow).partitions == 200  # the growth finished before the delete began
        assert reg.get("t") is None
        assert not any(t == "t" for t, _p in reg.logs.logs())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("t-")]


async def test_a_delete_whose_offsets_cleanup_fails_keeps_its_marker_until_a_start_finishes_it(tmp_path):
    async def broken(names):
        raise TimeoutError("coordinator still loading")

    forgotten: list[list[str]] = []

    async def working(names):
        forgotten.append(names)

    async with Env(tmp_path) as reg:
        reg.forget_offsets = broken
        await reg.create("t", 1)
        await reg.delete("t")
        assert reg.get("t") is None and not (tmp_path / "t-0").exists()
        with pytest.raises(TopicError) as info:  # not re-creatable while its offsets may remain
            await reg.create("t", 1)
        assert info.value.code == E.TOPIC_ALREADY_EXISTS
    assert json.loads((tmp_path / REGISTRY_FILE).read_text())["deleting"] == ["t"]
    env = Env(tmp_path)
    env.registry.forget_offsets = working
    async with env as reg:
        await reg.finish_deletes()
        assert forgotten == [["t"]]
        await reg.create("t", 1)
    assert json.loads((tmp_path / REGISTRY_FILE).read_text())["deleting"] == []
