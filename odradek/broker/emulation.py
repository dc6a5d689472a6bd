"""Emulating an older Kafka release (``odradek.emulate.kafka.version``).

What changes, all from Kafka's own sources:

- the request versions served: each API's range is cut to what that release's
  brokers served (the generated table in ``odradek/protocol/kafka_releases.py``);
  an API the release did not have, or served only on its controller listener,
  is not served at all, so ApiVersions and every version check follow (Kafka 4
  lists Produce from v0 but refuses v0-2, and so do we);
- the ``__consumer_offsets`` value versions written, as Kafka's
  ``MetadataVersion.offsetCommitValueVersion`` / ``groupMetadataValueVersion``
  chose them at that release's default inter-broker protocol (from 4.0 on,
  ``GroupCoordinatorRecordHelpers``): before 2.1, OffsetCommitValue v1 and
  GroupMetadataValue v1; from 2.3 to 4.0, v3 (v1 for an offset with its own
  expire timestamp) and v3, what is written without emulation; 4.1 writes
  OffsetCommitValue v4 (the flexible one) instead of v3;
- how ListGroups reads its states filter (``state_filter_mode``).
"""

from __future__ import annotations

from ..protocol.kafka_releases import RELEASES

BROKER_LISTENERS = {"broker", "zkBroker"}


def api_limits(release: str) -> dict[int, tuple[int, int]] | None:
    """{api key: (min, max)} a release's brokers served; None when not emulating."""
    if not release:
        return None
    out = {}
    for key, (_name, lo, hi, listeners) in RELEASES[release]["apis"].items():
        if listeners and not BROKER_LISTENERS & set(listeners):
            continue  # a controller-only API (KRaft): never answered by a broker
        out[key] = (lo, hi)
    return out


def advertised_floors(release: str) -> dict[int, int]:
    """Kafka 4 lists Produce from v0 in ApiVersions yet serves only v3+ (KAFKA-18659)."""
    floor = RELEASES[release].get("produce_advertised_min") if release else None
    return {} if floor is None else {0: floor}


def value_versions(release: str) -> tuple[int | None, int | None]:
    """(OffsetCommitValue, GroupMetadataValue) versions to write; None = today's rule.

    An offset with its own expire timestamp is v1 whatever this says (every release).
    """
    if not release:
        return None, None
    if _before(release, (2, 1)):
        return 1, 1
    if _before(release, (2, 3)):
        return None, 2
    if not _before(release, (4, 1)):  # GroupCoordinatorRecordHelpers.offsetCommitValueVersion
        return 4, None
    return None, None


def state_filter_mode(release: str) -> str:
    """How ListGroups reads states_filter (``state.parse_state_filter``): case-sensitive
    in the Scala coordinator to 3.5, lower-cased in 3.9's, also trimmed from 4.0."""
    if release and _before(release, (3, 9)):
        return "exact"
    if release and _before(release, (4, 0)):
        return "lower"
    return "lower-trim"


def consumer_protocol_by_default(release: str) -> bool:
    """Whether ``group.coordinator.rebalance.protocols`` lists ``consumer`` by default: from Kafka 4.0
    (3.7-3.9 defaulted to ``classic``; ConsumerGroupHeartbeat was listed but answered
    UNSUPPORTED_VERSION, as ``KafkaApis.isConsumerGroupProtocolEnabled`` decides)."""
    return not release or not _before(release, (4, 0))


def writes_metadata_hash(release: str) -> bool:
    """Whether the group-epoch record of a consumer group carries the metadata hash: from Kafka 4.1
    (KIP-1101; 4.0 left the tag out)."""
    return not release or not _before(release, (4, 1))


def _before(release: str, version: tuple[int, int]) -> bool:
    major, minor = (int(x) for x in release.split(".")[:2])
    return (major, minor) < version
