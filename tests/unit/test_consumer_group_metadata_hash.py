"""Kafka 4.1's metadata hash (KIP-1101) in the consumer group's epoch record: Kafka's byte layout
(hash4j's little-endian numbers and UTF-16 strings with their length) hashed with XXH3-64, written
with each epoch bump, moving when a subscribed topic grows, left out by an emulated 4.0."""

from __future__ import annotations

import struct
import uuid

import xxhash

from odradek.broker.coordinator.metadata_hash import group_hash, metadata_hash, topic_hash
from odradek.offsets.consumer_records import CGMetadataKey, TopicMetadata
from tests.unit.consumer_harness import ConsumerHarness

TID = uuid.UUID("12345678-9abc-def0-1122-334455667788")


def signed(v: int) -> int:
    return v - 2**64 if v >= 2**63 else v


def test_the_topic_hash_is_xxh3_over_kafkas_bytes():
    assert xxhash.xxh3_64_intdigest(b"") == 0x2D06800538D394C2  # the XXH3-64 of nothing (seed 0)
    expected = (b"\x00" + bytes.fromhex("f0debc9a78563412") + bytes.fromhex("8877665544332211")
                + "foo".encode("utf-16-le") + struct.pack("<i", 3) + struct.pack("<i", 2)
                + struct.pack("<i", 0) + struct.pack("<i", 1))
    assert topic_hash(TID, "foo", 2) == signed(xxhash.xxh3_64_intdigest(expected))


def test_the_group_hash_orders_topics_by_name_and_is_0_without_topics():
    assert group_hash({}) == 0 and metadata_hash({}) == 0
    a, b = topic_hash(TID, "a", 1), topic_hash(uuid.UUID(int=7), "b", 3)
    assert group_hash({"b": b, "a": a}) == signed(xxhash.xxh3_64_intdigest(struct.pack("<qq", a, b)))
    md = {"a": TopicMetadata(TID, "a", 1), "b": TopicMetadata(uuid.UUID(int=7), "b", 3)}
    assert metadata_hash(md) == group_hash({"a": a, "b": b})


def epoch_records(h: ConsumerHarness) -> list:
    batches: list = []
    write = h.shard.write

    def spy(records, *args, **kw):
        batches.extend(v for k, v in records if type(k) is CGMetadataKey and v is not None)
        return write(records, *args, **kw)
    h.shard.write = spy
    return batches


def test_each_epoch_record_carries_the_hash_of_the_subscribed_topics(tmp_path):
    h = ConsumerHarness(tmp_path)
    tid = h.topic("t", 2)
    written = epoch_records(h)
    h.subscribe("m1", ["t"])
    assert written[-1].metadata_hash == metadata_hash({"t": TopicMetadata(tid, "t", 2)}) != 0
    h.topic("t", 3)  # CreatePartitions: the next heartbeat bumps the epoch with a new hash
    h.hb("m1", h.cg().members["m1"].member_epoch)
    assert written[-1].metadata_hash == metadata_hash({"t": TopicMetadata(tid, "t", 3)})
    h.restart()
    assert h.cg().metadata_hash == written[-1].metadata_hash


def test_an_emulated_4_0_writes_no_hash(tmp_path):
    h = ConsumerHarness(tmp_path, consumer_metadata_hash=False)
    h.topic("t", 2)
    written = epoch_records(h)
    h.subscribe("m1", ["t"])
    assert [v.metadata_hash for v in written] == [0]


def test_the_setting_follows_the_emulated_release():
    from odradek.broker.config import Config
    from odradek.broker.coordinator.config import CoordinatorConfig

    def writes(release: str) -> bool:
        return CoordinatorConfig.from_config(Config.load(overrides={"odradek.emulate.kafka.version": release}
                                                         if release else {})).consumer_metadata_hash
    assert writes("") and writes("4.1") and writes("4.2")
    assert not writes("4.0") and not writes("3.9")
