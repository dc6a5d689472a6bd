"""Share-group records 10-15 of ``__consumer_offsets``: Kafka 4.2's bytes written out field by field
(``ShareGroup*Key.json`` / ``*Value.json``), round trips, tombstones, and dump-log's names."""

from __future__ import annotations

import json
import re
import struct
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from odradek.broker.dump_log import decode_offsets_record
from odradek.offsets.records import RecordDecodeError
from odradek.offsets.share_group_records import (
    SGAssignmentKey,
    SGAssignmentValue,
    SGMemberKey,
    SGMemberValue,
    SGMetadataKey,
    SGMetadataValue,
    SGStatePartitionKey,
    SGStatePartitionValue,
    SGTargetMemberKey,
    SGTargetMemberValue,
    SGTargetMetadataKey,
    SGTargetMetadataValue,
    TopicPartitionsInfo,
    decode_sg_record,
    decode_sg_value,
    encode_sg_key,
    encode_sg_value,
)
from odradek.protocol.schema import Message
from tests.unit.test_consumer_group_records import value_alone_decodes_alike

T1 = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
T2 = uuid.UUID("10000000-0000-0000-0000-000000000002")


def s16(text: str) -> bytes:  # a non-flexible key string
    return struct.pack(">h", len(text)) + text.encode()


def cs(text: str) -> bytes:  # a compact string
    return bytes([len(text) + 1]) + text.encode()


def i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


CASES = [
    (SGMemberKey("g", "m"), b"\x00\x0a" + s16("g") + s16("m"),
     SGMemberValue(rack_id=None, client_id="c", client_host="/h", subscribed_topic_names=("b", "a")),
     b"\x00\x00" + b"\x00" + cs("c") + cs("/h") + b"\x03" + cs("a") + cs("b") + b"\x00"),
    (SGMetadataKey("g"), b"\x00\x0b" + s16("g"), SGMetadataValue(5, 7),
     b"\x00\x00" + i32(5) + struct.pack(">q", 7) + b"\x00"),
    (SGTargetMetadataKey("g"), b"\x00\x0c" + s16("g"), SGTargetMetadataValue(4), b"\x00\x00" + i32(4) + b"\x00"),
    (SGTargetMemberKey("g", "m"), b"\x00\x0d" + s16("g") + s16("m"),
     SGTargetMemberValue({T1: frozenset({1, 0})}),
     b"\x00\x00" + b"\x02" + T1.bytes + b"\x03" + i32(0, 1) + b"\x00" + b"\x00"),
    (SGAssignmentKey("g", "m"), b"\x00\x0e" + s16("g") + s16("m"),
     SGAssignmentValue(member_epoch=3, previous_member_epoch=2, assigned={T1: frozenset({2})}),
     b"\x00\x00" + i32(3, 2) + b"\x00" + b"\x02" + T1.bytes + b"\x02" + i32(2) + b"\x00" + b"\x00"),
    (SGStatePartitionKey("g"), b"\x00\x0f" + s16("g"),
     SGStatePartitionValue({T1: TopicPartitionsInfo("t", frozenset({0}))}, {}, {T2: "x"}),
     b"\x00\x00" + b"\x02" + T1.bytes + cs("t") + b"\x02" + i32(0) + b"\x00" + b"\x01"
     + b"\x02" + T2.bytes + cs("x") + b"\x00" + b"\x00"),
]


@pytest.mark.parametrize(("key", "key_bytes", "value", "value_bytes"), CASES,
                         ids=[type(c[0]).__name__ for c in CASES])
def test_bytes_are_kafkas(key, key_bytes, value, value_bytes):
    assert encode_sg_key(key) == key_bytes
    assert encode_sg_value(key, value) == value_bytes
    decoded_key, decoded = decode_sg_record(key_bytes, value_bytes)
    assert decoded_key == key
    assert encode_sg_value(key, decoded) == value_bytes
    value_alone_decodes_alike(decode_sg_record, decode_sg_value, key, key_bytes, value_bytes)


def test_member_subscriptions_are_written_sorted():
    key, _kb, value, _vb = CASES[0]
    assert decode_sg_record(encode_sg_key(key), encode_sg_value(key, value))[1].subscribed_topic_names == ("a", "b")


def test_tombstones_and_other_types():
    assert decode_sg_record(encode_sg_key(SGMemberKey("g", "m")), None) == (SGMemberKey("g", "m"), None)
    assert encode_sg_value(SGMetadataKey("g"), None) is None
    assert decode_sg_record(b"\x00\x09" + s16("g"), b"\x00\x00\x00") is None  # 4.0's type 9: skipped
    assert decode_sg_record(b"\x00\x05" + s16("g") + s16("m"), None) is None  # a consumer-group type


def test_bad_bytes_refuse_the_load():
    with pytest.raises(RecordDecodeError):
        decode_sg_record(b"\x00\x0b\x00\x09g", None)
    with pytest.raises(RecordDecodeError):
        decode_sg_record(encode_sg_key(SGMetadataKey("g")), b"\x00\x01" + i32(1))  # unknown value version
    with pytest.raises(RecordDecodeError):
        decode_sg_record(encode_sg_key(SGMetadataKey("g")), b"\x00\x00\x00")


def test_dump_log_names_them_as_kafka():
    key, kb, _value, vb = CASES[4]
    out = decode_offsets_record(SimpleNamespace(key=kb, value=vb))
    assert out["key"] == {"type": "ShareGroupCurrentMemberAssignment", "group": "g", "member": "m"}
    assert out["value"]["member_epoch"] == 3
    assert out["value"]["assigned"] == {str(T1): [2]}


RECORD_SPECS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-spec" / "kafka-4.2" / "records"


def _spec_paths(fields: list, common: dict, prefix: str = "") -> dict[str, str]:
    """path -> Kafka's type name, through commonStructs."""
    out = {}
    for f in fields:
        path = prefix + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", f["name"]).lower()
        out[path] = f["type"]
        inner = f.get("fields") or common.get(f["type"].removeprefix("[]"), [])
        out |= _spec_paths(inner, common, path + ".")
    return out


def _our_paths(fields, prefix: str = "") -> set[str]:
    out = set()
    for f in fields:
        out.add(prefix + f.name)
        out |= _our_paths(f.fields or [], prefix + f.name + ".")
    return out


@pytest.mark.shared
@pytest.mark.skipif(not RECORD_SPECS.is_dir(), reason=f"Kafka 4.2's record specs not found at {RECORD_SPECS} "
                                                      "(optional; the byte tests above are the coverage)")
@pytest.mark.parametrize("name", ["ShareGroupMemberMetadata", "ShareGroupMetadata", "ShareGroupTargetAssignmentMetadata",
                                  "ShareGroupTargetAssignmentMember", "ShareGroupCurrentMemberAssignment",
                                  "ShareGroupStatePartitionMetadata"])
def test_declared_as_kafka_42_records(name):
    from odradek.offsets import share_group_records as sgr

    def load(kind: str) -> dict:
        text = (RECORD_SPECS / f"{name}{kind}.json").read_text(encoding="utf-8")
        return json.loads("\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//")))
    key, value = load("Key"), load("Value")
    ours = next(m for m in vars(sgr).values() if isinstance(m, Message) and m.name == f"{name}Value")
    common = {s["name"]: s["fields"] for s in value.get("commonStructs", [])}
    assert _our_paths(ours.fields) == set(_spec_paths(value["fields"], common))
    assert (value["validVersions"], value["flexibleVersions"]) == ("0", "0+")
    key_type = next(t for cls, (t, _k, v) in sgr._KEYS.items() if v is ours)
    assert key["apiKey"] == value["apiKey"] == key_type
