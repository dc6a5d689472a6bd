"""KIP-848 consumer-group records of ``__consumer_offsets`` (key types 3-8 and 16), in Kafka's bytes.

Kafka's ``group-coordinator/src/main/resources/common/message/ConsumerGroup*Key.json`` and
``*Value.json``: a key is ``int16 type`` + a non-flexible struct of strings, a value is
``int16 version (0)`` + a flexible struct (compact strings and arrays, 16-byte uuids, tagged
fields), a tombstone is a null value.  What is written is what Kafka 4.0 writes
(``GroupCoordinatorRecordHelpers``): the subscription metadata as a type-4 record, not 4.1's
metadata hash (tag 0 of the group-epoch value, read and kept but never computed here).

Partitions of an assignment are held as ``{topic id: frozenset(partitions)}``; they are written
sorted by topic id then partition (Kafka writes its hash maps' order, which no reader relies on).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..protocol.lean_dataclass import dataclass
from ..protocol.primitives import ProtocolError
from ..protocol.schema import F, Message
from .records import RecordDecodeError, RecordEncodeError

__all__ = [
    "CG_KEY_TYPES", "CGMetadataKey", "CGPartitionMetadataKey", "CGMemberKey", "CGTargetMetadataKey",
    "CGTargetMemberKey", "CGAssignmentKey", "CGRegexKey", "CGMetadataValue", "CGPartitionMetadataValue",
    "TopicMetadata", "CGMemberValue", "CGTargetMetadataValue", "CGTargetMemberValue", "CGAssignmentValue",
    "CGRegexValue", "Assignment", "assignment_rows", "rows_assignment", "CG_RECORD_NAMES", "encode_cg_key", "encode_cg_value", "decode_cg_record",
    "decode_cg_value", "decode_group_value", "is_cg_key",
]

Assignment = dict[uuid.UUID, frozenset[int]]

# --- declarations (Kafka's JSON, once) ----------------------------------------------------

_GROUP_KEY = Message("ConsumerGroupKey", [F("group_id", "string", "0")], valid="0")
_MEMBER_KEY = Message("ConsumerGroupMemberKey", [F("group_id", "string", "0"), F("member_id", "string", "0")],
                      valid="0")
_REGEX_KEY = Message("ConsumerGroupRegularExpressionKey",
                     [F("group_id", "string", "0"), F("regular_expression", "string", "0")], valid="0")

_TOPIC_PARTITIONS = [F("topic_id", "uuid"), F("partitions", "[]int32")]

METADATA_VALUE = Message("ConsumerGroupMetadataValue", [
    F("epoch", "int32"),
    F("metadata_hash", "int64", tag=0, default=0),  # 4.1+ (KIP-1101)
], valid="0", flexible="0+")

PARTITION_METADATA_VALUE = Message("ConsumerGroupPartitionMetadataValue", [
    F("topics", "[]", fields=[
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("num_partitions", "int32"),
        F("partition_metadata", "[]", fields=[F("partition", "int32"), F("racks", "[]string")]),
    ]),
], valid="0", flexible="0+")

MEMBER_VALUE = Message("ConsumerGroupMemberMetadataValue", [
    F("instance_id", "string", nullable="0+"),
    F("rack_id", "string", nullable="0+"),
    F("client_id", "string"),
    F("client_host", "string"),
    F("subscribed_topic_names", "[]string"),
    F("subscribed_topic_regex", "string", nullable="0+"),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("server_assignor", "string", nullable="0+"),
    F("classic_member_metadata", "struct", nullable="0+", tag=0, default=None, fields=[
        F("session_timeout_ms", "int32"),
        F("supported_protocols", "[]", fields=[F("name", "string"), F("metadata", "bytes")]),
    ]),
], valid="0", flexible="0+")

TARGET_METADATA_VALUE = Message("ConsumerGroupTargetAssignmentMetadataValue", [
    F("assignment_epoch", "int32"),
], valid="0", flexible="0+")

TARGET_MEMBER_VALUE = Message("ConsumerGroupTargetAssignmentMemberValue", [
    F("topic_partitions", "[]", fields=_TOPIC_PARTITIONS),
], valid="0", flexible="0+")

ASSIGNMENT_VALUE = Message("ConsumerGroupCurrentMemberAssignmentValue", [
    F("member_epoch", "int32"),
    F("previous_member_epoch", "int32"),
    F("state", "int8"),
    F("assigned_partitions", "[]", fields=_TOPIC_PARTITIONS),
    F("partitions_pending_revocation", "[]", fields=_TOPIC_PARTITIONS),
], valid="0", flexible="0+")

REGEX_VALUE = Message("ConsumerGroupRegularExpressionValue", [
    F("topics", "[]string"),
    F("version", "int64"),
    F("timestamp", "int64"),
], valid="0", flexible="0+")


# --- keys ------------------------------------------------------------------------------------

@dataclass(slots=True, frozen=True)
class CGMetadataKey:
    """Type 3: the group epoch."""

    group: str


@dataclass(slots=True, frozen=True)
class CGPartitionMetadataKey:
    """Type 4: the subscribed topics' metadata (Kafka 4.0)."""

    group: str


@dataclass(slots=True, frozen=True)
class CGMemberKey:
    """Type 5: a member's subscription and client facts."""

    group: str
    member: str


@dataclass(slots=True, frozen=True)
class CGTargetMetadataKey:
    """Type 6: the target assignment's epoch."""

    group: str


@dataclass(slots=True, frozen=True)
class CGTargetMemberKey:
    """Type 7: one member's target assignment."""

    group: str
    member: str


@dataclass(slots=True, frozen=True)
class CGAssignmentKey:
    """Type 8: one member's current assignment, epoch and state."""

    group: str
    member: str


@dataclass(slots=True, frozen=True)
class CGRegexKey:
    """Type 16: a resolved regular expression."""

    group: str
    regex: str


# --- values ------------------------------------------------------------------------------------

@dataclass(slots=True)
class CGMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(slots=True, frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(slots=True)
class CGPartitionMetadataValue:
    topics: dict[str, TopicMetadata] = field(default_factory=dict)  # by name


@dataclass(slots=True, kw_only=True)
class CGMemberValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = ""
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: Any = None  # only for classic-protocol members (kept, not interpreted)


@dataclass(slots=True)
class CGTargetMetadataValue:
    assignment_epoch: int


@dataclass(slots=True)
class CGTargetMemberValue:
    partitions: Assignment


@dataclass(slots=True, kw_only=True)
class CGAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


@dataclass(slots=True)
class CGRegexValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


# --- codec -------------------------------------------------------------------------------------

_KEYS: dict[type, tuple[int, Message]] = {
    CGMetadataKey: (3, _GROUP_KEY), CGPartitionMetadataKey: (4, _GROUP_KEY), CGMemberKey: (5, _MEMBER_KEY),
    CGTargetMetadataKey: (6, _GROUP_KEY), CGTargetMemberKey: (7, _MEMBER_KEY), CGAssignmentKey: (8, _MEMBER_KEY),
    CGRegexKey: (16, _REGEX_KEY),
}
_BY_TYPE = {t: (cls, msg) for cls, (t, msg) in _KEYS.items()}
# Kafka's names of the record types (``CoordinatorRecordType``), for tools that print them
CG_RECORD_NAMES = {CGMetadataKey: "ConsumerGroupMetadata", CGPartitionMetadataKey: "ConsumerGroupPartitionMetadata",
                   CGMemberKey: "ConsumerGroupMemberMetadata", CGTargetMetadataKey: "ConsumerGroupTargetAssignmentMetadata",
                   CGTargetMemberKey: "ConsumerGroupTargetAssignmentMember",
                   CGAssignmentKey: "ConsumerGroupCurrentMemberAssignment", CGRegexKey: "ConsumerGroupRegularExpression"}
CG_KEY_TYPES = frozenset(_BY_TYPE)
_VALUES: dict[type, Message] = {
    CGMetadataKey: METADATA_VALUE, CGPartitionMetadataKey: PARTITION_METADATA_VALUE, CGMemberKey: MEMBER_VALUE,
    CGTargetMetadataKey: TARGET_METADATA_VALUE, CGTargetMemberKey: TARGET_MEMBER_VALUE,
    CGAssignmentKey: ASSIGNMENT_VALUE, CGRegexKey: REGEX_VALUE,
}
_INT16 = struct.Struct(">h")
_DECODING = {t: (cls, msg, _VALUES[cls]) for t, (cls, msg) in _BY_TYPE.items()}


def is_cg_key(key: object) -> bool:
    return type(key) in _KEYS


# a key dataclass's fields -> its JSON struct's (every group record's key is some of these)
_KEY_FIELDS = {"group": "group_id", "member": "member_id", "regex": "regular_expression"}


def encode_group_key(key_type: int, msg: Message, key: Any) -> bytes:
    """``int16 type`` + the key struct of any modern group record (consumer and share groups)."""
    fields = {_KEY_FIELDS[name]: getattr(key, name) for name in key.__dataclass_fields__}
    try:
        return _INT16.pack(key_type) + msg.build(fields, 0)
    except (struct.error, ProtocolError, UnicodeEncodeError) as exc:
        raise RecordEncodeError(f"cannot encode {key!r}: {exc}") from None


def decode_group_record(by_type: Mapping[int, tuple[type, Message, Message]], make_value: Any,
                        key_data: bytes, value_data: bytes | None) -> tuple[Any, Any] | None:
    """(key, value) of a modern group record whose type ``by_type`` knows ({type: (key class, key
    struct, value struct)}; ``make_value(key class, parsed)`` builds the value); None for another
    type.  Raises ``RecordDecodeError`` for one that does not parse: a load stops rather than lose
    group state."""
    key_data = bytes(key_data)
    try:
        (key_type,) = _INT16.unpack_from(key_data, 0)
    except struct.error:
        raise RecordDecodeError(f"key of {len(key_data)} bytes has no key type") from None
    found = by_type.get(key_type)
    if found is None:
        return None
    cls, key_msg, value_msg = found
    try:
        k = key_msg.parse(key_data[2:], 0)
        key = cls(*(k[_KEY_FIELDS[name]] for name in cls.__dataclass_fields__))
    except ProtocolError as exc:
        raise RecordDecodeError(f"cannot decode key of type {key_type}: {exc}") from None
    if value_data is None:
        return key, None
    return key, decode_group_value(value_msg, make_value, key, value_data)


def decode_group_value(value_msg: Message, make_value: Any, key: Any, value_data: bytes) -> Any:
    """The value of a modern group record whose ``key`` is decoded already (the value struct
    ``value_msg`` is its type's); raises ``RecordDecodeError`` as :func:`decode_group_record` does."""
    value_data = bytes(value_data)
    try:
        (version,) = _INT16.unpack_from(value_data, 0)
        if version != 0:
            raise RecordDecodeError(f"unknown value version {version} for {key}")
        return make_value(type(key), value_msg.parse(value_data[2:], 0))
    except (struct.error, ProtocolError) as exc:
        raise RecordDecodeError(f"cannot decode value of {key}: {exc}") from None


def encode_cg_key(key: Any) -> bytes:
    key_type, msg = _KEYS[type(key)]
    return encode_group_key(key_type, msg, key)


def assignment_rows(assignment: Mapping[uuid.UUID, frozenset[int]]) -> list[dict]:
    """An assignment as the records' TopicPartitions rows (sorted by topic id; empty topics left out)."""
    return [{"topic_id": t, "partitions": sorted(assignment[t])} for t in sorted(assignment, key=lambda u: u.bytes)
            if assignment[t]]


def rows_assignment(rows: list) -> Assignment:
    """TopicPartitions rows as an assignment."""
    return {r["topic_id"]: frozenset(r["partitions"]) for r in rows}


def _value_fields(value: Any) -> dict:
    kind = type(value)
    if kind is CGMetadataValue:
        return {"epoch": value.epoch, "metadata_hash": value.metadata_hash}
    if kind is CGPartitionMetadataValue:
        return {"topics": [{"topic_id": t.topic_id, "topic_name": t.topic_name, "num_partitions": t.num_partitions,
                            "partition_metadata": []} for _n, t in sorted(value.topics.items())]}
    if kind is CGMemberValue:
        return {"instance_id": value.instance_id, "rack_id": value.rack_id, "client_id": value.client_id,
                "client_host": value.client_host, "subscribed_topic_names": sorted(value.subscribed_topic_names),
                "subscribed_topic_regex": value.subscribed_topic_regex,
                "rebalance_timeout_ms": value.rebalance_timeout_ms, "server_assignor": value.server_assignor,
                "classic_member_metadata": value.classic_member_metadata}
    if kind is CGTargetMetadataValue:
        return {"assignment_epoch": value.assignment_epoch}
    if kind is CGTargetMemberValue:
        return {"topic_partitions": assignment_rows(value.partitions)}
    if kind is CGAssignmentValue:
        return {"member_epoch": value.member_epoch, "previous_member_epoch": value.previous_member_epoch,
                "state": value.state, "assigned_partitions": assignment_rows(value.assigned),
                "partitions_pending_revocation": assignment_rows(value.pending_revocation)}
    if kind is CGRegexValue:
        return {"topics": sorted(value.topics), "version": value.version, "timestamp": value.timestamp}
    raise TypeError(f"not a consumer-group value: {value!r}")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tps_bytes(assignment: Mapping[uuid.UUID, frozenset[int]]) -> bytes:
    """A compact array of TopicPartitions (uuid, compact []int32, empty tags), as ``_tps`` orders it."""
    topics = [t for t in sorted(assignment, key=lambda u: u.bytes) if assignment[t]]
    parts = [_uvarint(len(topics) + 1)]
    for t in topics:
        ps = sorted(assignment[t])
        parts.append(t.bytes + _uvarint(len(ps) + 1) + struct.pack(f">{len(ps)}i", *ps) + b"\x00")
    return b"".join(parts)


def _encode_assignment_fast(value: Any) -> bytes:
    """Types 7 and 8, the records a rebalance writes one per member: written directly (the same bytes
    as the declarations, held to them by the tests), since a group of n members writes O(n) of them
    per epoch."""
    if type(value) is CGTargetMemberValue:
        return b"\x00\x00" + _tps_bytes(value.partitions) + b"\x00"
    return (b"\x00\x00" + struct.pack(">iib", value.member_epoch, value.previous_member_epoch, value.state)
            + _tps_bytes(value.assigned) + _tps_bytes(value.pending_revocation) + b"\x00")


def encode_cg_value(key: Any, value: Any) -> bytes | None:
    """Value bytes (version 0); ``None`` stays a tombstone."""
    if value is None:
        return None
    try:
        if type(value) is CGTargetMemberValue or type(value) is CGAssignmentValue:
            return _encode_assignment_fast(value)
        return b"\x00\x00" + _VALUES[type(key)].build(_value_fields(value), 0)
    except (struct.error, ProtocolError, UnicodeEncodeError, OverflowError) as exc:
        raise RecordEncodeError(f"cannot encode {type(value).__name__}: {exc}") from None


def _make_value(kind: type, c: Any) -> Any:
    if kind is CGMetadataKey:
        return CGMetadataValue(c["epoch"], c["metadata_hash"])
    if kind is CGPartitionMetadataKey:
        return CGPartitionMetadataValue({t["topic_name"]: TopicMetadata(t["topic_id"], t["topic_name"],
                                                                        t["num_partitions"]) for t in c["topics"]})
    if kind is CGMemberKey:
        return CGMemberValue(instance_id=c["instance_id"], rack_id=c["rack_id"], client_id=c["client_id"],
                             client_host=c["client_host"],
                             subscribed_topic_names=tuple(c["subscribed_topic_names"]),
                             subscribed_topic_regex=c["subscribed_topic_regex"],
                             rebalance_timeout_ms=c["rebalance_timeout_ms"], server_assignor=c["server_assignor"],
                             classic_member_metadata=c["classic_member_metadata"])
    if kind is CGTargetMetadataKey:
        return CGTargetMetadataValue(c["assignment_epoch"])
    if kind is CGTargetMemberKey:
        return CGTargetMemberValue(rows_assignment(c["topic_partitions"]))
    if kind is CGAssignmentKey:
        return CGAssignmentValue(member_epoch=c["member_epoch"], previous_member_epoch=c["previous_member_epoch"],
                                 state=c["state"], assigned=rows_assignment(c["assigned_partitions"]),
                                 pending_revocation=rows_assignment(c["partitions_pending_revocation"]))
    return CGRegexValue(tuple(c["topics"]), c["version"], c["timestamp"])


def decode_cg_record(key_data: bytes, value_data: bytes | None) -> tuple[Any, Any] | None:
    """(key, value) of a consumer-group record; None for a key type that is not one (share,
    streams groups: skipped here, as Kafka's loader skips what it does not know)."""
    return decode_group_record(_DECODING, _make_value, key_data, value_data)


def decode_cg_value(key: Any, value_data: bytes) -> Any:
    """The value of a consumer-group record whose key is decoded already (readers that meet a key many
    times decode it once)."""
    return decode_group_value(_VALUES[type(key)], _make_value, key, value_data)
