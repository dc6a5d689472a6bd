"""KIP-848 records in Kafka's bytes, the server-side assignors and the reconciliation rules, each alone."""

from __future__ import annotations

import re
import struct
import uuid

import pytest

from odradek.broker.coordinator.assignors import AssignorMember, range_, uniform
from odradek.broker.coordinator.consumer_group import MemberState
from odradek.broker.coordinator.reconcile import FencedMember, reconcile
from odradek.offsets.consumer_records import (
    CGAssignmentKey,
    CGAssignmentValue,
    CGMemberKey,
    CGMemberValue,
    CGMetadataKey,
    CGMetadataValue,
    CGPartitionMetadataKey,
    CGPartitionMetadataValue,
    CGRegexKey,
    CGRegexValue,
    CGTargetMemberKey,
    CGTargetMemberValue,
    CGTargetMetadataKey,
    CGTargetMetadataValue,
    TopicMetadata,
    decode_cg_record,
    decode_cg_value,
    encode_cg_key,
    encode_cg_value,
)
from odradek.offsets.records import RecordDecodeError

T = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def s16(text: str) -> bytes:  # a non-flexible key string: int16 length
    return struct.pack(">h", len(text)) + text.encode()


def cs(text: str | None) -> bytes:  # a compact (nullable) string: uvarint length + 1
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def carr(items: list[bytes]) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def tps(partitions: list[int]) -> bytes:  # one TopicPartitions entry
    return T.bytes + carr([i32(p) for p in partitions]) + b"\x00"


# (key, value, Kafka's key bytes, Kafka's value bytes): written from the JSON schemas by hand
CASES = [
    (CGMetadataKey("g"), CGMetadataValue(7), b"\x00\x03" + s16("g"), b"\x00\x00" + i32(7) + b"\x00"),
    (CGMetadataKey("g"), CGMetadataValue(7, metadata_hash=5), b"\x00\x03" + s16("g"),
     b"\x00\x00" + i32(7) + b"\x01\x00\x08" + struct.pack(">q", 5)),  # 4.1's tag 0
    (CGPartitionMetadataKey("g"), CGPartitionMetadataValue({"t": TopicMetadata(T, "t", 3)}), b"\x00\x04" + s16("g"),
     b"\x00\x00" + carr([T.bytes + cs("t") + i32(3) + carr([]) + b"\x00"]) + b"\x00"),
    (CGMemberKey("g", "m"), CGMemberValue(instance_id="i", rack_id=None, client_id="c", client_host="/h",
                                          subscribed_topic_names=("b", "a"), subscribed_topic_regex="",
                                          rebalance_timeout_ms=300000, server_assignor="range"),
     b"\x00\x05" + s16("g") + s16("m"),
     b"\x00\x00" + cs("i") + cs(None) + cs("c") + cs("/h") + carr([cs("a"), cs("b")]) + cs("") + i32(300000)
     + cs("range") + b"\x00"),
    (CGTargetMetadataKey("g"), CGTargetMetadataValue(7), b"\x00\x06" + s16("g"), b"\x00\x00" + i32(7) + b"\x00"),
    (CGTargetMemberKey("g", "m"), CGTargetMemberValue({T: frozenset({2, 0})}), b"\x00\x07" + s16("g") + s16("m"),
     b"\x00\x00" + carr([tps([0, 2])]) + b"\x00"),
    (CGAssignmentKey("g", "m"), CGAssignmentValue(member_epoch=7, previous_member_epoch=6, state=1,
                                                  assigned={T: frozenset({0})}, pending_revocation={T: frozenset({1})}),
     b"\x00\x08" + s16("g") + s16("m"),
     b"\x00\x00" + i32(7) + i32(6) + b"\x01" + carr([tps([0])]) + carr([tps([1])]) + b"\x00"),
    (CGRegexKey("g", "t.*"), CGRegexValue(("t2", "t1"), 3, 4), b"\x00\x10" + s16("g") + s16("t.*"),
     b"\x00\x00" + carr([cs("t1"), cs("t2")]) + struct.pack(">qq", 3, 4) + b"\x00"),
]


@pytest.mark.parametrize("key, value, key_bytes, value_bytes", CASES)
def test_records_are_kafkas_bytes_both_ways(key, value, key_bytes, value_bytes):
    assert encode_cg_key(key) == key_bytes
    assert encode_cg_value(key, value) == value_bytes
    k, v = decode_cg_record(key_bytes, value_bytes)
    assert k == key and encode_cg_value(k, v) == value_bytes
    assert decode_cg_record(key_bytes, None) == (key, None)  # a tombstone
    value_alone_decodes_alike(decode_cg_record, decode_cg_value, key, key_bytes, value_bytes)


def value_alone_decodes_alike(decode_record, decode_value, key, key_bytes: bytes, value_bytes: bytes) -> None:
    """The value of a key decoded already (``decode_value``) is the whole record's, and so are its errors
    (an unknown version, truncated bytes)."""
    assert decode_value(key, value_bytes) == decode_record(key_bytes, value_bytes)[1]
    for bad in (b"\x00\x01" + value_bytes[2:], value_bytes[:3]):
        with pytest.raises(RecordDecodeError) as whole:
            decode_record(key_bytes, bad)
        with pytest.raises(RecordDecodeError, match=re.escape(str(whole.value))):
            decode_value(key, bad)


def test_other_key_types_are_skipped_and_broken_ones_stop_a_load():
    assert decode_cg_record(b"\x00\x09" + s16("g"), b"") is None  # a share-group record
    with pytest.raises(RecordDecodeError):
        decode_cg_record(b"\x00\x03\x00", b"\x00\x00")
    with pytest.raises(RecordDecodeError):
        decode_cg_record(b"\x00\x03" + s16("g"), b"\x00\x01" + i32(1) + b"\x00")  # unknown version


# --- assignors -----------------------------------------------------------------------------------

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def members(*names: str, topics=(A,)) -> list[AssignorMember]:
    return [AssignorMember(n, frozenset(topics)) for n in names]


def flat(result) -> list:
    return sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def test_uniform_is_balanced_complete_and_sticky():
    first = uniform(members("m1", "m2"), {A: 6}, {})
    assert flat(first) == [(A, p) for p in range(6)]
    assert sorted(len(a[A]) for a in first.values()) == [3, 3]
    second = uniform(members("m1", "m2", "m3"), {A: 6}, first)
    assert flat(second) == [(A, p) for p in range(6)]
    assert all(len(a.get(A, ())) == 2 for a in second.values())
    moved = sum(len(second[m][A] - first[m][A]) for m in ("m1", "m2"))
    assert moved == 0  # the old members only gave partitions away


def test_uniform_heterogeneous_subscriptions():
    ms = [AssignorMember("m1", frozenset({A})), AssignorMember("m2", frozenset({A, B}))]
    result = uniform(ms, {A: 2, B: 2}, {})
    assert flat(result) == [(A, 0), (A, 1), (B, 0), (B, 1)]
    assert B not in result["m1"] and len(result["m2"][B]) == 2


def test_range_gives_contiguous_ranges_static_members_first():
    ms = [AssignorMember("a", frozenset({A})), AssignorMember("z", frozenset({A}), instance_id="i")]
    result = range_(ms, {A: 5}, {})
    assert result["z"][A] == frozenset({0, 1, 2}) and result["a"][A] == frozenset({3, 4})


# --- reconciliation --------------------------------------------------------------------------------

def fs(*ps: int) -> dict:
    return {A: frozenset(ps)}


def nobody(_t, _p) -> bool:
    return False


def test_revoke_before_assign():
    r = reconcile(1, 0, MemberState.STABLE, fs(0, 1, 2, 3), {}, fs(0, 1), 2, fs(0, 1, 2, 3), nobody)
    assert (r.member_epoch, r.state, r.assigned, r.pending_revocation) == (
        1, MemberState.UNREVOKED_PARTITIONS, fs(0, 1), fs(2, 3))
    still = reconcile(1, 0, r.state, r.assigned, r.pending_revocation, fs(0, 1), 2, fs(0, 1, 2, 3), nobody)
    assert still.state == MemberState.UNREVOKED_PARTITIONS
    done = reconcile(1, 0, r.state, r.assigned, r.pending_revocation, fs(0, 1), 2, fs(0, 1), nobody)
    assert (done.member_epoch, done.previous_member_epoch, done.state, done.assigned) == (2, 1, MemberState.STABLE, fs(0, 1))


def test_a_partition_held_elsewhere_is_unreleased():
    r = reconcile(0, 0, MemberState.STABLE, {}, {}, fs(2, 3), 2, {}, lambda t, p: p == 3)
    assert (r.member_epoch, r.state, r.assigned) == (2, MemberState.UNRELEASED_PARTITIONS, fs(2))
    r = reconcile(2, 0, r.state, r.assigned, {}, fs(2, 3), 2, fs(2), nobody)
    assert (r.state, r.assigned) == (MemberState.STABLE, fs(2, 3))


def test_unknown_state_with_owned_partitions_is_fenced():
    with pytest.raises(FencedMember):
        reconcile(1, 0, MemberState.UNKNOWN, fs(0), {}, fs(0), 2, fs(0), nobody)


def test_the_direct_writers_agree_with_the_declarations():
    """Types 7 and 8 are written without the declarations (they are the bulk of a rebalance)."""
    from odradek.offsets.consumer_records import ASSIGNMENT_VALUE, TARGET_MEMBER_VALUE
    from odradek.offsets.consumer_records import assignment_rows as _tps

    many = {uuid.UUID(int=i): frozenset(range(i, i + 200)) for i in range(1, 4)}
    for value, msg, fields in [
        (CGTargetMemberValue(many), TARGET_MEMBER_VALUE, {"topic_partitions": _tps(many)}),
        (CGAssignmentValue(member_epoch=-2, previous_member_epoch=2**31 - 1, state=127, assigned=many,
                           pending_revocation={}), ASSIGNMENT_VALUE,
         {"member_epoch": -2, "previous_member_epoch": 2**31 - 1, "state": 127, "assigned_partitions": _tps(many),
          "partitions_pending_revocation": []}),
    ]:
        assert encode_cg_value(CGTargetMemberKey("g", "m") if msg is TARGET_MEMBER_VALUE else CGAssignmentKey("g", "m"),
                               value) == b"\x00\x00" + msg.build(fields, 0)


def test_the_generated_codec_reads_and_writes_uuids_and_nullable_structs_as_construct_does():
    """ConsumerGroupHeartbeat is on every member's poll: its request (uuids in an array of structs)
    and its response (a nullable struct) go through the generated codec, byte for byte the
    declaration's construct codec."""
    from odradek.protocol import fastcodec
    from odradek.protocol.registry import APIS

    spec = APIS[68]
    req = {"group_id": "g", "member_id": "m", "member_epoch": 3, "instance_id": None, "rack_id": "r",
           "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "subscribed_topic_regex": "a.*",
           "server_assignor": None, "topic_partitions": [{"topic_id": T, "partitions": [0, 2]}]}
    fast_read = fastcodec.compile_reader(spec.request, 1, None)
    fast_write = fastcodec.compile_writer(spec.request, 1, mapping=True)
    data = spec.request.struct(1).build(req)
    assert fast_write(req) == data
    parsed, end = fast_read(data, 0)
    assert end == len(data) and parsed["topic_partitions"][0]["topic_id"] == T
    write = fastcodec.compile_writer(spec.response, 1, mapping=True)
    for assignment in (None, {"topic_partitions": [{"topic_id": T, "partitions": [1]}]}):
        resp = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m",
                "member_epoch": 3, "heartbeat_interval_ms": 5000, "assignment": assignment}
        assert write(resp) == spec.response.struct(1).build(resp)
