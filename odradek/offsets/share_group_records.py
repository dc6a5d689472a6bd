"""KIP-932 share-group records of ``__consumer_offsets`` (key types 10-15), in Kafka 4.2's bytes.

Kafka's ``group-coordinator/src/main/resources/common/message/ShareGroup*Key.json`` and
``*Value.json``, framed as every other group record (``consumer_records.py``): a key is
``int16 type`` + a non-flexible struct of strings, a value is ``int16 version (0)`` + a flexible
struct, a tombstone is a null value.  Written as ``GroupCoordinatorRecordHelpers`` writes them
(subscriptions sorted; assignments sorted by topic id then partition).  Type 9 (4.0's
ShareGroupPartitionMetadata, gone in 4.1) is not decoded: the loader skips it like any type it
does not know.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import field
from typing import Any

from ..protocol.lean_dataclass import dataclass
from ..protocol.primitives import ProtocolError
from ..protocol.schema import F, Message
from .consumer_records import (
    Assignment,
    assignment_rows,
    decode_group_record,
    decode_group_value,
    encode_group_key,
    rows_assignment,
)
from .records import RecordEncodeError

__all__ = [
    "SG_KEY_TYPES", "SG_RECORD_NAMES", "SGMemberKey", "SGMetadataKey", "SGTargetMetadataKey", "SGTargetMemberKey",
    "SGAssignmentKey", "SGStatePartitionKey", "SGMemberValue", "SGMetadataValue", "SGTargetMetadataValue",
    "SGTargetMemberValue", "SGAssignmentValue", "SGStatePartitionValue", "TopicPartitionsInfo",
    "encode_sg_key", "encode_sg_value", "decode_sg_record", "decode_sg_value", "is_sg_key",
]

_GROUP_KEY = Message("ShareGroupKey", [F("group_id", "string", "0")], valid="0")
_MEMBER_KEY = Message("ShareGroupMemberKey", [F("group_id", "string", "0"), F("member_id", "string", "0")],
                      valid="0")
_TOPIC_PARTITIONS = [F("topic_id", "uuid"), F("partitions", "[]int32")]
_TOPIC_PARTITIONS_INFO = [F("topic_id", "uuid"), F("topic_name", "string"), F("partitions", "[]int32")]

MEMBER_VALUE = Message("ShareGroupMemberMetadataValue", [
    F("rack_id", "string", nullable="0+"),
    F("client_id", "string"),
    F("client_host", "string"),
    F("subscribed_topic_names", "[]string"),
], valid="0", flexible="0+")

METADATA_VALUE = Message("ShareGroupMetadataValue", [
    F("epoch", "int32"),
    F("metadata_hash", "int64"),
], valid="0", flexible="0+")

TARGET_METADATA_VALUE = Message("ShareGroupTargetAssignmentMetadataValue", [
    F("assignment_epoch", "int32"),
], valid="0", flexible="0+")

TARGET_MEMBER_VALUE = Message("ShareGroupTargetAssignmentMemberValue", [
    F("topic_partitions", "[]", fields=_TOPIC_PARTITIONS),
], valid="0", flexible="0+")

ASSIGNMENT_VALUE = Message("ShareGroupCurrentMemberAssignmentValue", [
    F("member_epoch", "int32"),
    F("previous_member_epoch", "int32"),
    F("state", "int8"),
    F("assigned_partitions", "[]", fields=_TOPIC_PARTITIONS),
], valid="0", flexible="0+")

STATE_PARTITION_VALUE = Message("ShareGroupStatePartitionMetadataValue", [
    F("initializing_topics", "[]", fields=_TOPIC_PARTITIONS_INFO),
    F("initialized_topics", "[]", fields=_TOPIC_PARTITIONS_INFO),
    F("deleting_topics", "[]", fields=[F("topic_id", "uuid"), F("topic_name", "string")]),
], valid="0", flexible="0+")


# --- keys --------------------------------------------------------------------------------------

@dataclass(slots=True, frozen=True)
class SGMemberKey:
    """Type 10: a member's subscription and client facts."""

    group: str
    member: str


@dataclass(slots=True, frozen=True)
class SGMetadataKey:
    """Type 11: the group epoch and the subscribed topics' hash."""

    group: str


@dataclass(slots=True, frozen=True)
class SGTargetMetadataKey:
    """Type 12: the target assignment's epoch."""

    group: str


@dataclass(slots=True, frozen=True)
class SGTargetMemberKey:
    """Type 13: one member's target assignment."""

    group: str
    member: str


@dataclass(slots=True, frozen=True)
class SGAssignmentKey:
    """Type 14: one member's current assignment and epochs."""

    group: str
    member: str


@dataclass(slots=True, frozen=True)
class SGStatePartitionKey:
    """Type 15: which share-partitions are initializing, initialized or being deleted."""

    group: str


# --- values ------------------------------------------------------------------------------------

@dataclass(slots=True, kw_only=True)
class SGMemberValue:
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()


@dataclass(slots=True)
class SGMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(slots=True)
class SGTargetMetadataValue:
    assignment_epoch: int


@dataclass(slots=True)
class SGTargetMemberValue:
    partitions: Assignment


@dataclass(slots=True, kw_only=True)
class SGAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int = 0  # always STABLE in 4.2
    assigned: Assignment


@dataclass(slots=True, frozen=True)
class TopicPartitionsInfo:
    """A topic of the state-partition record: its name (kept for admin answers) and partitions."""

    topic_name: str
    partitions: frozenset[int]


@dataclass(slots=True)
class SGStatePartitionValue:
    """Topic id -> info, per set; ``deleting`` has names only."""

    initializing: dict[uuid.UUID, TopicPartitionsInfo] = field(default_factory=dict)
    initialized: dict[uuid.UUID, TopicPartitionsInfo] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)


# --- codec -------------------------------------------------------------------------------------

_KEYS: dict[type, tuple[int, Message, Message]] = {
    SGMemberKey: (10, _MEMBER_KEY, MEMBER_VALUE), SGMetadataKey: (11, _GROUP_KEY, METADATA_VALUE),
    SGTargetMetadataKey: (12, _GROUP_KEY, TARGET_METADATA_VALUE),
    SGTargetMemberKey: (13, _MEMBER_KEY, TARGET_MEMBER_VALUE), SGAssignmentKey: (14, _MEMBER_KEY, ASSIGNMENT_VALUE),
    SGStatePartitionKey: (15, _GROUP_KEY, STATE_PARTITION_VALUE),
}
_BY_TYPE = {t: (cls, key_msg, value_msg) for cls, (t, key_msg, value_msg) in _KEYS.items()}
SG_KEY_TYPES = frozenset(_BY_TYPE)
# Kafka's names of the record types (``CoordinatorRecordType``), for tools that print them
SG_RECORD_NAMES = {SGMemberKey: "ShareGroupMemberMetadata", SGMetadataKey: "ShareGroupMetadata",
                   SGTargetMetadataKey: "ShareGroupTargetAssignmentMetadata",
                   SGTargetMemberKey: "ShareGroupTargetAssignmentMember",
                   SGAssignmentKey: "ShareGroupCurrentMemberAssignment",
                   SGStatePartitionKey: "ShareGroupStatePartitionMetadata"}
_INT16 = struct.Struct(">h")


def is_sg_key(key: object) -> bool:
    return type(key) in _KEYS


def encode_sg_key(key: Any) -> bytes:
    key_type, msg, _value = _KEYS[type(key)]
    return encode_group_key(key_type, msg, key)


def _infos(topics: dict[uuid.UUID, TopicPartitionsInfo]) -> list[dict]:
    return [{"topic_id": t, "topic_name": i.topic_name, "partitions": sorted(i.partitions)}
            for t, i in sorted(topics.items(), key=lambda kv: kv[0].bytes)]


def _value_fields(value: Any) -> dict:
    kind = type(value)
    if kind is SGMemberValue:
        return {"rack_id": value.rack_id, "client_id": value.client_id, "client_host": value.client_host,
                "subscribed_topic_names": sorted(value.subscribed_topic_names)}
    if kind is SGMetadataValue:
        return {"epoch": value.epoch, "metadata_hash": value.metadata_hash}
    if kind is SGTargetMetadataValue:
        return {"assignment_epoch": value.assignment_epoch}
    if kind is SGTargetMemberValue:
        return {"topic_partitions": assignment_rows(value.partitions)}
    if kind is SGAssignmentValue:
        return {"member_epoch": value.member_epoch, "previous_member_epoch": value.previous_member_epoch,
                "state": value.state, "assigned_partitions": assignment_rows(value.assigned)}
    if kind is SGStatePartitionValue:
        return {"initializing_topics": _infos(value.initializing), "initialized_topics": _infos(value.initialized),
                "deleting_topics": [{"topic_id": t, "topic_name": n}
                                    for t, n in sorted(value.deleting.items(), key=lambda kv: kv[0].bytes)]}
    raise TypeError(f"not a share-group value: {value!r}")


def encode_sg_value(key: Any, value: Any) -> bytes | None:
    """Value bytes (version 0); ``None`` stays a tombstone."""
    if value is None:
        return None
    try:
        return b"\x00\x00" + _KEYS[type(key)][2].build(_value_fields(value), 0)
    except (struct.error, ProtocolError, UnicodeEncodeError, OverflowError) as exc:
        raise RecordEncodeError(f"cannot encode {type(value).__name__}: {exc}") from None


def _topic_infos(rows: list) -> dict[uuid.UUID, TopicPartitionsInfo]:
    return {r["topic_id"]: TopicPartitionsInfo(r["topic_name"], frozenset(r["partitions"])) for r in rows}


def _make_value(kind: type, c: Any) -> Any:
    if kind is SGMemberKey:
        return SGMemberValue(rack_id=c["rack_id"], client_id=c["client_id"], client_host=c["client_host"],
                             subscribed_topic_names=tuple(c["subscribed_topic_names"]))
    if kind is SGMetadataKey:
        return SGMetadataValue(c["epoch"], c["metadata_hash"])
    if kind is SGTargetMetadataKey:
        return SGTargetMetadataValue(c["assignment_epoch"])
    if kind is SGTargetMemberKey:
        return SGTargetMemberValue(rows_assignment(c["topic_partitions"]))
    if kind is SGAssignmentKey:
        return SGAssignmentValue(member_epoch=c["member_epoch"], previous_member_epoch=c["previous_member_epoch"],
                                 state=c["state"], assigned=rows_assignment(c["assigned_partitions"]))
    return SGStatePartitionValue(_topic_infos(c["initializing_topics"]), _topic_infos(c["initialized_topics"]),
                                 {r["topic_id"]: r["topic_name"] for r in c["deleting_topics"]})


def decode_sg_record(key_data: bytes, value_data: bytes | None) -> tuple[Any, Any] | None:
    """(key, value) of a share-group record; None for a key type that is not one."""
    return decode_group_record(_BY_TYPE, _make_value, key_data, value_data)


def decode_sg_value(key: Any, value_data: bytes) -> Any:
    """The value of a share-group record whose key is decoded already."""
    return decode_group_value(_KEYS[type(key)][2], _make_value, key, value_data)
