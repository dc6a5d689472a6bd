"""Kafka 4.1's metadata hash of a consumer group (KIP-1101), written in its group-epoch record.

Kafka's ``Utils.computeTopicHash`` / ``computeGroupHash`` (``ModernGroup.computeMetadataHash``):
each subscribed topic that exists hashes, with streaming XXH3-64 (hash4j, seed 0), the bytes of a
magic byte 0, its id (most then least significant 64 bits), its name (hash4j's ``putString``: the
UTF-16 code units, then their count), its partition count and each partition index (and each
partition's sorted replica racks, none on this broker); the group hashes its topics' hashes in
topic-name order.  No topic: 0.  hash4j writes every number little-endian, and a hash stream's
value is the XXH3-64 of the bytes it was given, so both are one XXH3-64 call over those bytes.

A Kafka 4.1+ broker compares this hash to decide whether the subscribed topics changed; Odradek
decides from the subscription-metadata record it writes as 4.0 does, and writes the hash beside it
so a 4.1+ reading the log sees the same group (an emulated 4.0 writes none).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

from ...offsets.consumer_records import CGMetadataKey, CGMetadataValue, TopicMetadata

TOPIC_HASH_MAGIC_BYTE = b"\x00"
_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_ULONG = struct.Struct("<Q")


def topic_hash(topic_id: uuid.UUID, name: str, partitions: int) -> int:
    """``Utils.computeTopicHash`` for a topic whose partitions have no racks (a Java long)."""
    import xxhash  # noqa: PLC0415 - consumer groups (KIP-848) only, not at start

    utf16 = name.encode("utf-16-le")
    data = b"".join((TOPIC_HASH_MAGIC_BYTE, _ULONG.pack(topic_id.int >> 64), _ULONG.pack(topic_id.int & (2**64 - 1)),
                     utf16, _INT.pack(len(utf16) // 2), _INT.pack(partitions),
                     b"".join(_INT.pack(i) for i in range(partitions))))
    return _signed(xxhash.xxh3_64_intdigest(data))


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """``Utils.computeGroupHash``: the topics' hashes in name order; 0 without topics."""
    if not topic_hashes:
        return 0
    import xxhash  # noqa: PLC0415 - as in topic_hash

    return _signed(xxhash.xxh3_64_intdigest(b"".join(_LONG.pack(topic_hashes[n]) for n in sorted(topic_hashes))))


def metadata_hash(metadata: Mapping[str, TopicMetadata]) -> int:
    """``ModernGroup.computeMetadataHash`` over a group's subscription metadata (the subscribed
    topics that exist: name -> id and partition count)."""
    return group_hash({name: topic_hash(t.topic_id, name, t.num_partitions) for name, t in metadata.items()})


def epoch_record(group_id: str, epoch: int, metadata: Mapping[str, TopicMetadata],
                 with_hash: bool) -> tuple[CGMetadataKey, CGMetadataValue]:
    """The group-epoch record, with the metadata hash unless an emulated 4.0 writes it."""
    return CGMetadataKey(group_id), CGMetadataValue(epoch, metadata_hash(metadata) if with_hash else 0)


def _signed(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value
