"""Keys and values of the ``__consumer_offsets`` topic, in Kafka's exact format.

Records are the only way coordinator state survives, and a real Kafka
partition directory must be readable (and ours readable by Kafka's tools), so
the bytes follow Kafka's record schemas exactly.  Each schema is declared
once below with per-field version ranges, mirroring Kafka's JSON
(``records/OffsetCommitKey.json`` and friends); field names are the snake_case
of Kafka's.

Framing: a key is ``int16 key type`` + key struct, a value is ``int16 value
version`` + value struct, and a tombstone is a null value (``None`` here).

- Key types 0 and 1 are offset commits (same layout; we write 1, as Kafka
  >= 0.9 does), 2 is group metadata.  Other types (KIP-848 / KIP-932 records)
  decode to ``None`` so that a classic coordinator skips them, as Kafka does;
  a *known* type that fails to parse raises :class:`RecordDecodeError`, which
  aborts a load instead of silently losing state.
- Values of every version 0-4 are read (v4 is flexible; unknown tagged fields
  are skipped).  Bytes after the struct are ignored, as Kafka's reader does.
- The written value versions are exactly Kafka's (``GroupMetadataManager``
  at inter-broker protocol 2.3 and later, every release since 2019):
  OffsetCommitValue v3, or v1 when the commit carries its own expire
  timestamp (v1 drops the leader epoch exactly as Kafka's v1 does), and
  GroupMetadataValue v3.  Tools that decode only the versions Kafka writes
  (every Burrow release reads offset values v0, v1, v3 and v4, not v2) rely
  on it.  The v1, v2 and v4 writers stay reachable through ``version=`` for
  emulated releases (2.0 wrote v1 values, 4.1 writes OffsetCommitValue v4).

Decoding is on the replay path, so encode/decode run through readers and
writers generated from these declarations by :mod:`.fastcodec` (about 2x
faster than the compiled construct structs per key or value, measured side by
side), and decoded keys are memoised by their bytes, since replay sees each
partition's key again with every commit.  The declarations remain usable
with ``Message.parse``/``build``; the tests hold both paths to the same bytes.
"""

from __future__ import annotations

import struct
from dataclasses import field
from functools import lru_cache

from odradek.protocol.lean_dataclass import dataclass
from odradek.protocol.primitives import ProtocolError
from odradek.protocol.schema import F, Message

from ..protocol.fastcodec import CodecCache, compile_reader, compile_writer
from ..protocol.javahash import java_partition, java_string_hash

__all__ = [
    "OFFSET_COMMIT_KEY", "OFFSET_COMMIT_VALUE", "GROUP_METADATA_KEY", "GROUP_METADATA_VALUE",
    "OFFSET_KEY_TYPE", "GROUP_KEY_TYPE",
    "OffsetKey", "OffsetValue", "GroupKey", "GroupValue", "MemberValue",
    "RecordDecodeError", "RecordEncodeError",
    "encode_key", "encode_value", "decode_key", "decode_value", "CommitRecords", "encode_commits",
    "offset_value_version", "group_value_version",
    "java_string_hash", "partition_for",
]

# --- declarations (Kafka's records/*.json, once) ------------------------------

OFFSET_COMMIT_KEY = Message("OffsetCommitKey", [
    F("group", "string", "0-1"),
    F("topic", "string", "0-1"),
    F("partition", "int32", "0-1"),
], valid="0-1")

OFFSET_COMMIT_VALUE = Message("OffsetCommitValue", [
    F("offset", "int64", "0+"),
    F("leader_epoch", "int32", "3+", default=-1),
    F("metadata", "string", "0+"),
    F("commit_timestamp", "int64", "0+"),
    F("expire_timestamp", "int64", "1", default=-1),
], valid="0-4", flexible="4+")

GROUP_METADATA_KEY = Message("GroupMetadataKey", [
    F("group", "string", "2"),
], valid="2")

GROUP_METADATA_VALUE = Message("GroupMetadataValue", [
    F("protocol_type", "string", "0+"),
    F("generation", "int32", "0+"),
    F("protocol", "string", "0+", nullable="0+"),
    F("leader", "string", "0+", nullable="0+"),
    F("current_state_timestamp", "int64", "2+", default=-1),
    F("members", "[]", "0+", fields=[
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("client_id", "string", "0+"),
        F("client_host", "string", "0+"),
        F("rebalance_timeout", "int32", "1+", default=-1),
        F("session_timeout", "int32", "0+"),
        F("subscription", "bytes", "0+"),
        F("assignment", "bytes", "0+"),
    ]),
], valid="0-4", flexible="4+")

OFFSET_KEY_TYPE = 1  # what we write; 0 (0.8.2) reads the same
GROUP_KEY_TYPE = 2


class RecordDecodeError(ValueError):
    """A record of a known key type whose key or value cannot be parsed.

    Kafka aborts loading a partition on such a record rather than skip it:
    skipping would silently drop committed offsets or group state.
    """


class RecordEncodeError(ValueError):
    """A record that cannot be represented (e.g. an int out of range, a null name)."""


# --- record dataclasses ---------------------------------------------------------
# Field order and names follow the declarations (checked when the codecs are
# generated).  Keys are frozen: they identify state (dict keys, compaction).
# Values are keyword-only, since they carry several same-typed ints that are
# too easy to swap positionally, and not frozen: replay builds one per record
# and a frozen instance costs noticeably more to fill.

@dataclass(slots=True, frozen=True)
class OffsetKey:
    """Key of a committed offset: (group, topic, partition)."""

    group: str
    topic: str
    partition: int


@dataclass(slots=True, kw_only=True)
class OffsetValue:
    """A committed offset.  -1 means "absent" for leader_epoch and expire_timestamp."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(slots=True, frozen=True)
class GroupKey:
    """Key of a group's metadata record."""

    group: str


@dataclass(slots=True)
class MemberValue:
    """One member as persisted: its selected protocol's subscription and its assignment."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True, kw_only=True)
class GroupValue:
    """A classic group's persisted state (protocol/leader None when it has no members)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


# --- generated codecs -------------------------------------------------------------

_NESTED = {"members": MemberValue}

_KEY_READERS = CodecCache(
    lambda t: compile_reader(GROUP_METADATA_KEY if t == GROUP_KEY_TYPE else OFFSET_COMMIT_KEY, t,
                             GroupKey if t == GROUP_KEY_TYPE else OffsetKey), (0, 1, 2))
_OFFSET_VALUE_READERS = CodecCache(
    lambda v: compile_reader(OFFSET_COMMIT_VALUE, v, OffsetValue), OFFSET_COMMIT_VALUE.valid)
_GROUP_VALUE_READERS = CodecCache(
    lambda v: compile_reader(GROUP_METADATA_VALUE, v, GroupValue, _NESTED), GROUP_METADATA_VALUE.valid)
_KEY_WRITERS = CodecCache(
    lambda t: compile_writer(GROUP_METADATA_KEY if t == GROUP_KEY_TYPE else OFFSET_COMMIT_KEY, t, prefix=t),
    (OFFSET_KEY_TYPE, GROUP_KEY_TYPE))
_OFFSET_VALUE_WRITERS = CodecCache(
    lambda v: compile_writer(OFFSET_COMMIT_VALUE, v, prefix=v), (1, 2, 3, 4))
_GROUP_VALUE_WRITERS = CodecCache(
    lambda v: compile_writer(GROUP_METADATA_VALUE, v, prefix=v, nested=_NESTED), (1, 2, 3))

_INT16 = struct.Struct(">h")
_new = object.__new__


# --- keys -----------------------------------------------------------------------------

def offset_key(group: str, topic: str, partition: int) -> OffsetKey:
    """``OffsetKey(group, topic, partition)``, the same instance for the same partition.

    A consumer commits the same partitions over and over: a frozen
    dataclass costs about as much to fill as the rest of a record's encoding,
    and the shared instance also finds its bytes in :func:`encode_key`'s
    cache by identity.  Bounded like that cache.
    """
    fields = (group, topic, partition)
    key = _OFFSET_KEYS.get(fields)
    if key is None:
        if len(_OFFSET_KEYS) >= _KEY_CACHE_MAX:
            _OFFSET_KEYS.clear()
        key = _OFFSET_KEYS[fields] = OffsetKey(group, topic, partition)
    return key


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                 expire_timestamp: int) -> OffsetValue:
    """``OffsetValue(...)`` from positional fields, filled without the keyword-only ``__init__``
    (which costs twice as much; one is made per committed partition)."""
    value = _new(OffsetValue)
    value.offset = offset
    value.leader_epoch = leader_epoch
    value.metadata = metadata
    value.commit_timestamp = commit_timestamp
    value.expire_timestamp = expire_timestamp
    return value


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    """Key bytes: offset keys as type 1, group keys as type 2.

    A consumer commits the same partitions over and over, so encoded keys
    are remembered (bounded like the decode cache below).
    """
    data = _KEY_BYTES.get(key)
    if data is not None:
        return data
    try:
        if type(key) is OffsetKey:
            data = _KEY_WRITERS[OFFSET_KEY_TYPE](key)
        elif type(key) is GroupKey:
            data = _KEY_WRITERS[GROUP_KEY_TYPE](key)
        else:
            raise TypeError(f"not an offsets-topic key: {key!r}")
    except (struct.error, ProtocolError, UnicodeEncodeError) as exc:
        raise RecordEncodeError(f"cannot encode {key!r}: {exc}") from None
    if len(data) <= _KEY_CACHE_MAX_BYTES:
        if len(_KEY_BYTES) >= _KEY_CACHE_MAX:
            _KEY_BYTES.clear()
        _KEY_BYTES[key] = data
    return data


# Replay sees the same few keys over and over (every commit of a partition
# repeats its key), so decoded keys are remembered by their bytes; keys are
# frozen, so sharing one instance is safe.  Bounded, and simply emptied when
# full: a workload with more live keys than this just pays the decode.
_KEY_CACHE: dict[bytes, OffsetKey | GroupKey] = {}
_KEY_BYTES: dict[OffsetKey | GroupKey, bytes] = {}  # the other way round, for encode_key
_OFFSET_KEYS: dict[tuple[str, str, int], OffsetKey] = {}  # offset_key's instances
_KEY_CACHE_MAX = 16384
_KEY_CACHE_MAX_BYTES = 512


def decode_key(data: bytes | bytearray | memoryview) -> OffsetKey | GroupKey | None:
    """Parse a key; ``None`` for key types this classic coordinator does not own.

    Unknown types (3+ today: KIP-848 consumer groups, KIP-932 share groups)
    must be skipped during a load, not fail it -- that is Kafka's behaviour.
    """
    if type(data) is not bytes:
        data = bytes(data)
    key = _KEY_CACHE.get(data)
    if key is not None:
        return key
    try:
        (key_type,) = _INT16.unpack_from(data, 0)
    except struct.error:
        raise RecordDecodeError(f"key of {len(data)} bytes has no key type") from None
    try:
        reader = _KEY_READERS[key_type]
    except KeyError:
        return None
    try:
        key = reader(data, 2)[0]
    except ProtocolError as exc:
        raise RecordDecodeError(f"cannot decode key of type {key_type}: {exc}") from None
    if len(data) <= _KEY_CACHE_MAX_BYTES:
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        _KEY_CACHE[data] = key
    return key


# --- values ---------------------------------------------------------------------------

def offset_value_version(value: OffsetValue) -> int:
    """The OffsetCommitValue version Kafka writes for ``value``: 1 with an expire timestamp, else 3."""
    return 1 if value.expire_timestamp != -1 else 3


def group_value_version(value: GroupValue) -> int:
    """The GroupMetadataValue version Kafka writes: always 3."""
    return 3


def encode_value(value: OffsetValue | GroupValue | None, version: int | None = None) -> bytes | None:
    """Value bytes in the version Kafka writes (or ``version``: 1-3); ``None`` stays a tombstone.

    An explicit older version drops the fields it lacks, as Kafka's writer
    of that version does (v2 has no leader epoch or static member id).
    """
    if value is None:
        return None
    try:
        if type(value) is OffsetValue:
            return _OFFSET_VALUE_WRITERS[offset_value_version(value) if version is None else version](value)
        if type(value) is GroupValue:
            return _GROUP_VALUE_WRITERS[group_value_version(value) if version is None else version](value)
    except (struct.error, ProtocolError, UnicodeEncodeError) as exc:
        raise RecordEncodeError(f"cannot encode {type(value).__name__}: {exc}") from None
    raise TypeError(f"not an offsets-topic value: {value!r}")


def encode_offset_records(records: list[tuple[OffsetKey, OffsetValue | None]]) -> list[tuple[bytes, bytes | None]]:
    """``[(encode_key(k), encode_value(v)) for k, v in records]`` for a batch of offset commits
    (or their tombstones), in one loop: the key's bytes straight from :func:`encode_key`'s cache
    and each value through its version's writer (:func:`offset_value_version`, inlined), without
    the two calls per record that are a quarter of the records' encoding.  Whatever cannot be
    encoded goes the general way, which raises its ``RecordEncodeError``."""
    cached = _KEY_BYTES.get
    v1, v3 = _OFFSET_VALUE_WRITERS[1], _OFFSET_VALUE_WRITERS[3]
    out: list[tuple[bytes, bytes | None]] = []
    ap = out.append
    try:
        for key, value in records:
            data = cached(key) or encode_key(key)
            if value is None:
                ap((data, None))
            elif type(value) is OffsetValue:
                ap((data, (v3 if value.expire_timestamp == -1 else v1)(value)))
            else:
                ap((data, encode_value(value)))
    except (struct.error, ProtocolError, UnicodeEncodeError):
        return [(encode_key(k), encode_value(v)) for k, v in records]
    return out


class CommitRecords(list):
    """A commit's records, ``[(OffsetKey, OffsetValue)]``, with their encoded ``pairs`` beside them
    (:func:`encode_commits`): the shard's encoder hands those over instead of encoding again."""

    __slots__ = ("pairs",)


# OffsetCommitValue v3 and v1 as the generated writers lay them out: the head up to the
# metadata's length, then its bytes, then the tail (an empty metadata packs in one go)
_V3_EMPTY = struct.Struct(">hqihq")  # version, offset, leader epoch, metadata length 0, commit timestamp
_V3_HEAD = struct.Struct(">hqih")
_V1_EMPTY = struct.Struct(">hqhqq")  # version, offset, metadata length 0, commit, expire timestamps
_V1_HEAD = struct.Struct(">hqh")
_INT64 = struct.Struct(">q")
_INT64X2 = struct.Struct(">qq")
# (group, topic) -> partition -> (key, its bytes), at most _KEY_CACHE_MAX keys in all (then emptied)
_TOPIC_KEYS: dict[tuple[str, str], dict[int, tuple[OffsetKey, bytes]]] = {}
_TOPIC_KEYS_HELD = [0]


def encode_commits(group: str, topics: list[tuple[str, list[tuple]]], now: int, expire: int) -> CommitRecords | None:
    """The records of an offset commit and their bytes in one pass; None if one cannot be encoded
    here (the general path then raises its ``RecordEncodeError``).

    ``topics`` are ``[(topic, [(partition, offset, leader_epoch, metadata, commit_timestamp)])]``
    (timestamp -1: ``now``; metadata None: "").  The same records ``offset_key``/``offset_value``
    make and the same bytes ``encode_key``/``encode_value`` write (v3, or v1 with an expire
    timestamp): a key and its bytes are kept per (group, topic) and found by partition, and a
    value is packed from the row's fields, not read back from its object.
    """
    out = CommitRecords()
    pairs: list[tuple[bytes, bytes]] = []
    rap, pap = out.append, pairs.append
    new, value_type = _new, OffsetValue
    v1 = expire != -1
    try:
        for topic, rows in topics:
            keys = _topic_keys(group, topic)
            for partition, offset, epoch, metadata, timestamp in rows:
                entry = keys.get(partition)
                if entry is None:
                    entry = _key_entry(keys, group, topic, partition)
                if timestamp == -1:
                    timestamp = now
                if metadata is None:
                    metadata = ""
                if not metadata:
                    data = (_V1_EMPTY.pack(1, offset, 0, timestamp, expire) if v1
                            else _V3_EMPTY.pack(3, offset, epoch, 0, timestamp))
                else:
                    raw = metadata.encode()
                    data = (_V1_HEAD.pack(1, offset, len(raw)) + raw + _INT64X2.pack(timestamp, expire) if v1
                            else _V3_HEAD.pack(3, offset, epoch, len(raw)) + raw + _INT64.pack(timestamp))
                value = new(value_type)
                value.offset = offset
                value.leader_epoch = epoch
                value.metadata = metadata
                value.commit_timestamp = timestamp
                value.expire_timestamp = expire
                rap((entry[0], value))
                pap((entry[1], data))
    except (struct.error, UnicodeEncodeError, RecordEncodeError):
        return None
    out.pairs = pairs
    return out


def _topic_keys(group: str, topic: str) -> dict[int, tuple[OffsetKey, bytes]]:
    """The (key, bytes) of ``group``'s partitions of ``topic`` met so far (bounded like the key caches)."""
    keys = _TOPIC_KEYS.get((group, topic))
    if keys is None:
        keys = _TOPIC_KEYS[(group, topic)] = {}
    return keys


def _key_entry(keys: dict[int, tuple[OffsetKey, bytes]], group: str, topic: str,
               partition: int) -> tuple[OffsetKey, bytes]:
    """A partition's (key, bytes), kept in ``keys`` (``_topic_keys``' dict for its topic)."""
    key = offset_key(group, topic, partition)
    entry = (key, encode_key(key))
    if _TOPIC_KEYS_HELD[0] >= _KEY_CACHE_MAX:
        _TOPIC_KEYS.clear()  # ``keys`` may be one of them: the entries it gets now are simply dropped
        _TOPIC_KEYS_HELD[0] = 0
    _TOPIC_KEYS_HELD[0] += 1
    keys[partition] = entry
    return entry


def decode_value(key: OffsetKey | GroupKey,
                 data: bytes | bytearray | memoryview | None) -> OffsetValue | GroupValue | None:
    """Parse the value stored under ``key`` (as returned by :func:`decode_key`).

    ``None`` data is a tombstone and returns ``None``.  Versions 0-4 are read;
    fields a version lacks get Kafka's defaults (-1 for leader epoch, expire
    timestamp, current state timestamp), and a v0 group member's rebalance
    timeout is its session timeout, as Kafka fills it in.
    """
    if data is None:
        return None
    if type(data) is not bytes:
        data = bytes(data)
    try:
        (version,) = _INT16.unpack_from(data, 0)
        if type(key) is OffsetKey:
            return _OFFSET_VALUE_READERS[version](data, 2)[0]
        if type(key) is GroupKey:
            value = _GROUP_VALUE_READERS[version](data, 2)[0]
            if version == 0:
                for m in value.members:
                    m.rebalance_timeout = m.session_timeout
            return value
    except (struct.error, KeyError, ProtocolError) as exc:
        raise _value_error(key, data, exc) from None
    raise TypeError(f"not an offsets-topic key: {key!r}")


def _value_error(key: OffsetKey | GroupKey, data: bytes, exc: Exception) -> RecordDecodeError:
    """A message that names the record; built only on the failure path."""
    name = "OffsetCommitValue" if type(key) is OffsetKey else "GroupMetadataValue"
    if len(data) < 2:
        return RecordDecodeError(f"{name} for {key} of {len(data)} bytes has no version")
    (version,) = _INT16.unpack_from(data, 0)
    if isinstance(exc, KeyError):
        return RecordDecodeError(f"unknown {name} version {version} for {key}")
    return RecordDecodeError(f"cannot decode {name} v{version} for {key}: {exc}")


# --- group -> offsets partition ------------------------------------------------------------

@lru_cache(maxsize=8192)
def partition_for(group_id: str, n: int) -> int:
    """The ``__consumer_offsets`` partition owning ``group_id``, exactly as Kafka.

    ``Utils.abs(hashCode) % n`` where Kafka's ``abs`` maps ``Integer.MIN_VALUE``
    to 0 (not 2**31).  Cached: every group request is routed through it.
    """
    if n <= 0:
        raise ValueError(f"number of offsets partitions must be positive, got {n}")
    return java_partition(group_id, n)
