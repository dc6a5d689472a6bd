"""The ``consumer`` protocol blobs that groups carry: Subscription and Assignment.

The coordinator treats them as opaque bytes except for one thing: to answer
OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC) it needs the topics a ``consumer``
group is subscribed to.  Kafka learns them by reading the int16 version and
then the **version-0 layout** whatever the version says -- every later version
only appends fields -- so a blob that claims v1 but stops after the v0 fields
(real ones exist, see Burrow's vectors) still yields its topics, and anything
unparsable means "unknown" rather than an error.  :func:`decode_subscription_topics`
does exactly that.

Full decoding and encoding of every version is here for tools and tests.  As
Kafka's ``ConsumerProtocol`` does, a version higher than we know is parsed
with the highest known layout and trailing bytes are ignored; a negative
version is an error.  Declared once, like Kafka's
``ConsumerProtocolSubscription.json`` / ``ConsumerProtocolAssignment.json``,
and decoded through the same generated readers as the offsets records.
"""

from __future__ import annotations

import struct
from dataclasses import field
from typing import Any

from odradek.protocol.lean_dataclass import dataclass
from odradek.protocol.primitives import ProtocolError
from odradek.protocol.schema import F, Message

from ..protocol.fastcodec import CodecCache, compile_reader, compile_writer

__all__ = [
    "CONSUMER_PROTOCOL_TYPE", "SUBSCRIPTION", "ASSIGNMENT", "HIGHEST_VERSION", "ConsumerProtocolError",
    "TopicPartitions", "Subscription", "Assignment",
    "decode_subscription_topics", "decode_subscription", "encode_subscription",
    "decode_assignment", "encode_assignment",
]

# the protocol type every Java-compatible consumer joins with; the blobs below are its metadata
CONSUMER_PROTOCOL_TYPE = "consumer"

SUBSCRIPTION = Message("ConsumerProtocolSubscription", [
    F("topics", "[]string", "0+"),
    F("user_data", "bytes", "0+", nullable="0+", default=None),
    F("owned_partitions", "[]", "1+", fields=[
        F("topic", "string", "1+"),
        F("partitions", "[]int32", "1+"),
    ]),
    F("generation_id", "int32", "2+", default=-1),
    F("rack_id", "string", "3+", nullable="3+", default=None),
], valid="0-3")

ASSIGNMENT = Message("ConsumerProtocolAssignment", [
    F("assigned_partitions", "[]", "0+", fields=[
        F("topic", "string", "0+"),
        F("partitions", "[]int32", "0+"),
    ]),
    F("user_data", "bytes", "0+", nullable="0+", default=None),
], valid="0-3")

HIGHEST_VERSION = 3


class ConsumerProtocolError(ValueError):
    """A subscription or assignment blob that cannot be parsed."""


@dataclass(slots=True)
class TopicPartitions:
    """A topic and some of its partitions (owned or assigned)."""

    topic: str
    partitions: list[int]


@dataclass(slots=True, kw_only=True)
class Subscription:
    """A consumer's subscription; ``version`` is the blob's (possibly > 3 when read)."""

    version: int = HIGHEST_VERSION
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartitions] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(slots=True, kw_only=True)
class Assignment:
    """A member's assignment; the layout is identical in versions 0-3."""

    version: int = HIGHEST_VERSION
    assigned_partitions: list[TopicPartitions] = field(default_factory=list)
    user_data: bytes | None = None


_TP = {"owned_partitions": TopicPartitions, "assigned_partitions": TopicPartitions}
_KNOWN = range(HIGHEST_VERSION + 1)
_SUB_READERS = CodecCache(
    lambda v: compile_reader(SUBSCRIPTION, v, Subscription, _TP, extra=("version",)), _KNOWN)
_SUB_WRITERS = CodecCache(lambda v: compile_writer(SUBSCRIPTION, v, prefix=v, nested=_TP), _KNOWN)
_ASG_READERS = CodecCache(
    lambda v: compile_reader(ASSIGNMENT, v, Assignment, _TP, extra=("version",)), _KNOWN)
_ASG_WRITERS = CodecCache(lambda v: compile_writer(ASSIGNMENT, v, prefix=v, nested=_TP), _KNOWN)
_INT16 = struct.Struct(">h")


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise ConsumerProtocolError(f"{what} of {len(data)} bytes has no version")
    (version,) = _INT16.unpack_from(data, 0)
    if version < 0:
        raise ConsumerProtocolError(f"{what} has negative version {version}")
    return version


def decode_subscription_topics(metadata: bytes | bytearray | memoryview) -> list[str] | None:
    """Topics of a subscription read Kafka's way (v0 prefix), or None if unparsable.

    None means "unknown"; the coordinator then treats the group as subscribed
    to every topic, as Kafka does.
    """
    data = bytes(metadata)
    try:
        _version(data, "subscription")
        return _SUB_READERS[0](data, 2)[0].topics
    except (ConsumerProtocolError, ProtocolError):
        return None


def _decode(data: bytes | bytearray | memoryview, kind: str, readers: dict) -> Any:
    """A blob of any version >= 0, read as the highest version we know when it is newer."""
    data = bytes(data)
    version = _version(data, kind)
    try:
        blob = readers[min(version, HIGHEST_VERSION)](data, 2)[0]
    except ProtocolError as exc:
        raise ConsumerProtocolError(f"{kind} v{version}: {exc}") from None
    blob.version = version
    return blob


def _encode(blob: Subscription | Assignment, kind: str, writers: dict) -> bytes:
    """The blob for ``blob.version`` (0-3); fields that version lacks are dropped."""
    if not 0 <= blob.version <= HIGHEST_VERSION:
        raise ConsumerProtocolError(f"cannot write {kind} version {blob.version}")
    try:
        return writers[blob.version](blob)
    except (struct.error, ProtocolError, UnicodeEncodeError) as exc:
        raise ConsumerProtocolError(f"cannot encode {kind}: {exc}") from None


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Every field of a subscription blob, any version >= 0."""
    return _decode(data, "subscription", _SUB_READERS)


def encode_subscription(sub: Subscription) -> bytes:
    """The blob for ``sub.version`` (0-3); fields that version lacks are dropped."""
    return _encode(sub, "subscription", _SUB_WRITERS)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Every field of an assignment blob, any version >= 0."""
    return _decode(data, "assignment", _ASG_READERS)


def encode_assignment(asg: Assignment) -> bytes:
    """The blob for ``asg.version`` (0-3)."""
    return _encode(asg, "assignment", _ASG_WRITERS)
