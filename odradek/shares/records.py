"""Keys and values of the ``__share_group_state`` topic, in Kafka's exact format.

The durable state of every share-partition (group, topic id, partition) lives
here as records, as the offsets of classic groups live in ``__consumer_offsets``:
a **ShareSnapshot** (key type 0) carries the whole state, a **ShareUpdate**
(key type 1) only the state batches that changed since, and a tombstone of the
snapshot key deletes the share-partition's state.  Declared once below,
mirroring Kafka 4.2's ``ShareSnapshotKey/Value.json`` and
``ShareUpdateKey/Value.json`` (share-coordinator module); field names are the
snake_case of Kafka's.

Framing is the coordinator-record framing of every Kafka 4.x coordinator
topic (``CoordinatorRecordSerde``): a key is ``int16 apiKey`` + the key struct
(version 0, not flexible: int16-length string, 16-byte uuid, int32), a value
is ``int16 version`` (always 0) + the value struct (flexible: compact array,
a tagged-field section after each state batch and at the end).  Kafka 4.2
(KIP-1226) added tag 0, ``delivery_complete_count``, default -1 and written
only when it is not -1 -- so a value without it is exactly what 4.1 wrote.

State batches carry ``RecordState`` ids: 0 AVAILABLE, 2 ACKNOWLEDGED,
4 ARCHIVED (1 ACQUIRED is never persisted; 3 is reserved).

The values have a declared tagged field, which the generated fast codec does
not cover, so they go through the declarations' construct path
(:meth:`Message.codec` picks it); replay of this topic is one record per
acknowledgement batch, not per consumed record.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import field

from ..protocol.javahash import java_partition
from ..protocol.lean_dataclass import dataclass
from ..protocol.primitives import ProtocolError
from ..protocol.schema import F, Message

__all__ = [
    "SHARE_SNAPSHOT_KEY", "SHARE_UPDATE_KEY", "SHARE_SNAPSHOT_VALUE", "SHARE_UPDATE_VALUE",
    "SNAPSHOT_KEY_TYPE", "UPDATE_KEY_TYPE", "STATE_TOPIC",
    "ShareSnapshotKey", "ShareUpdateKey", "StateBatch", "ShareSnapshotValue", "ShareUpdateValue",
    "ShareRecordDecodeError", "ShareRecordEncodeError",
    "encode_key", "decode_key", "encode_value", "decode_value",
    "kafka_uuid_text", "state_partition_for",
]

STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_TYPE = 0
UPDATE_KEY_TYPE = 1

# --- declarations (Kafka's share-coordinator records/*.json, once) ---------------------

_KEY_FIELDS = [
    F("group_id", "string", "0"),
    F("topic_id", "uuid", "0"),
    F("partition", "int32", "0"),
]
SHARE_SNAPSHOT_KEY = Message("ShareSnapshotKey", _KEY_FIELDS, valid="0")
SHARE_UPDATE_KEY = Message("ShareUpdateKey", _KEY_FIELDS, valid="0")


def _state_batches() -> F:
    return F("state_batches", "[]", "0+", fields=[
        F("first_offset", "int64", "0+"),
        F("last_offset", "int64", "0+"),
        F("delivery_state", "int8", "0+"),
        F("delivery_count", "int16", "0+"),
    ])


SHARE_SNAPSHOT_VALUE = Message("ShareSnapshotValue", [
    F("snapshot_epoch", "int32", "0+"),
    F("state_epoch", "int32", "0+"),
    F("leader_epoch", "int32", "0+"),
    F("start_offset", "int64", "0+"),
    F("delivery_complete_count", "int32", "0+", tag=0, default=-1),
    F("create_timestamp", "int64", "0+"),
    F("write_timestamp", "int64", "0+"),
    _state_batches(),
], valid="0", flexible="0+")

SHARE_UPDATE_VALUE = Message("ShareUpdateValue", [
    F("snapshot_epoch", "int32", "0+"),
    F("leader_epoch", "int32", "0+"),
    F("start_offset", "int64", "0+"),
    F("delivery_complete_count", "int32", "0+", tag=0, default=-1),
    _state_batches(),
], valid="0", flexible="0+")


class ShareRecordDecodeError(ValueError):
    """A ``__share_group_state`` record of a known type that cannot be parsed (a load aborts on it)."""


class ShareRecordEncodeError(ValueError):
    """A record that cannot be represented (an int out of range, a non-uuid topic id)."""


# --- record dataclasses ------------------------------------------------------------------

@dataclass(slots=True, frozen=True)
class ShareSnapshotKey:
    """Key of a share-partition's full state; its tombstone deletes the state."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(slots=True, frozen=True)
class ShareUpdateKey:
    """Key of an incremental change to a share-partition's state."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(slots=True, frozen=True)
class StateBatch:
    """Offsets ``first_offset..last_offset`` (inclusive) in one delivery state with one delivery count
    (Kafka's ``PersisterStateBatch``)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(slots=True, kw_only=True)
class ShareSnapshotValue:
    """A share-partition's whole durable state at ``write_timestamp``."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1
    create_timestamp: int
    write_timestamp: int
    state_batches: list[StateBatch] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class ShareUpdateValue:
    """The batches changed by one write; start offset / leader epoch -1 mean "unchanged"."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1
    state_batches: list[StateBatch] = field(default_factory=list)


ShareKey = ShareSnapshotKey | ShareUpdateKey
ShareValue = ShareSnapshotValue | ShareUpdateValue

_KEYS: dict[int, tuple[Message, type]] = {
    SNAPSHOT_KEY_TYPE: (SHARE_SNAPSHOT_KEY, ShareSnapshotKey),
    UPDATE_KEY_TYPE: (SHARE_UPDATE_KEY, ShareUpdateKey),
}
_KEY_TYPES = {ShareSnapshotKey: SNAPSHOT_KEY_TYPE, ShareUpdateKey: UPDATE_KEY_TYPE}
_VALUES: dict[type, tuple[Message, type]] = {
    ShareSnapshotKey: (SHARE_SNAPSHOT_VALUE, ShareSnapshotValue),
    ShareUpdateKey: (SHARE_UPDATE_VALUE, ShareUpdateValue),
}
_VALUE_VERSION = 0  # the only version of either value, in 4.1 and 4.2
_INT16 = struct.Struct(">h")


# --- keys ------------------------------------------------------------------------------------

def encode_key(key: ShareKey) -> bytes:
    """``int16 apiKey`` (0 snapshot, 1 update) + the key struct, version 0."""
    try:
        key_type = _KEY_TYPES[type(key)]
    except KeyError:
        raise TypeError(f"not a share-state key: {key!r}") from None
    message = _KEYS[key_type][0]
    try:
        body = message.build({"group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition}, 0)
    except (struct.error, ProtocolError, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise ShareRecordEncodeError(f"cannot encode {key!r}: {exc}") from None
    return _INT16.pack(key_type) + body


def decode_key(data: bytes | bytearray | memoryview) -> ShareKey | None:
    """Parse a key; ``None`` for a key type this coordinator does not know (skipped on load)."""
    data = bytes(data)
    if len(data) < 2:
        raise ShareRecordDecodeError(f"key of {len(data)} bytes has no key type")
    (key_type,) = _INT16.unpack_from(data, 0)
    if key_type not in _KEYS:
        return None
    message, cls = _KEYS[key_type]
    try:
        obj = message.parse(data[2:], 0)
    except ProtocolError as exc:
        raise ShareRecordDecodeError(f"cannot decode {message.name}: {exc}") from None
    return cls(obj["group_id"], obj["topic_id"], obj["partition"])


# --- values ----------------------------------------------------------------------------------

def _as_dict(value: ShareValue) -> dict:
    obj = {name: getattr(value, name) for name in value.__slots__ if name != "state_batches"}
    obj["state_batches"] = [
        {"first_offset": b.first_offset, "last_offset": b.last_offset,
         "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
        for b in value.state_batches]
    return obj


def encode_value(value: ShareValue | None) -> bytes | None:
    """``int16 0`` + the value struct; ``None`` stays a tombstone."""
    if value is None:
        return None
    if type(value) is ShareSnapshotValue:
        message = SHARE_SNAPSHOT_VALUE
    elif type(value) is ShareUpdateValue:
        message = SHARE_UPDATE_VALUE
    else:
        raise TypeError(f"not a share-state value: {value!r}")
    try:
        return _INT16.pack(_VALUE_VERSION) + message.build(_as_dict(value), _VALUE_VERSION)
    except (struct.error, ProtocolError, AttributeError, TypeError) as exc:
        raise ShareRecordEncodeError(f"cannot encode {type(value).__name__}: {exc}") from None


def decode_value(key: ShareKey, data: bytes | bytearray | memoryview | None) -> ShareValue | None:
    """Parse the value stored under ``key``; ``None`` data (a tombstone) returns ``None``.

    Unknown tagged fields are skipped and bytes after the struct ignored, as
    Kafka's reader does; any version but 0 is an error (Kafka knows no other).
    """
    if data is None:
        return None
    data = bytes(data)
    message, cls = _VALUES[type(key)]
    if len(data) < 2:
        raise ShareRecordDecodeError(f"{message.name} of {len(data)} bytes has no version")
    (version,) = _INT16.unpack_from(data, 0)
    if version != _VALUE_VERSION:
        raise ShareRecordDecodeError(f"unknown {message.name} version {version}")
    try:
        obj = message.parse(data[2:], version)
    except ProtocolError as exc:
        raise ShareRecordDecodeError(f"cannot decode {message.name}: {exc}") from None
    fields = {name: obj[name] for name in cls.__slots__ if name != "state_batches"}
    batches = [StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
               for b in obj["state_batches"]]
    return cls(**fields, state_batches=batches)


# --- placement ---------------------------------------------------------------------------------

def kafka_uuid_text(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def state_partition_for(group_id: str, topic_id: uuid.UUID, partition: int, n: int) -> int:
    """The ``__share_group_state`` partition holding a share-partition's state, as Kafka places it.

    ``ShareCoordinatorService.partitionFor``: ``Utils.abs(hashCode) % n`` of
    ``SharePartitionKey.asCoordinatorKey()``, i.e. ``"group:topicId:partition"``.
    """
    return java_partition(f"{group_id}:{kafka_uuid_text(topic_id)}:{partition}", n)
