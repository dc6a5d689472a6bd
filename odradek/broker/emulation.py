"""Emulating an older Kafka release (``odradek.emulate.kafka.version``).

Two things change, both from Kafka's own sources:

- the request versions served: each API's range is cut to what that release's
  brokers served (the generated table in ``odradek/protocol/kafka_releases.py``);
  an API the release did not have, or served only on its controller listener,
  is not served at all, so ApiVersions and every version check follow;
- the ``__consumer_offsets`` value versions written, as Kafka's
  ``MetadataVersion.offsetCommitValueVersion`` / ``groupMetadataValueVersion``
  chose them at that release's default inter-broker protocol: before 2.1,
  OffsetCommitValue v1 and GroupMetadataValue v1; from 2.3 on, v3 (v1 for an
  offset with its own expire timestamp) and v3, what is written without emulation.
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


def value_versions(release: str) -> tuple[int | None, int | None]:
    """(OffsetCommitValue, GroupMetadataValue) versions to write; None = today's rule."""
    if release and _before(release, (2, 1)):
        return 1, 1
    if release and _before(release, (2, 3)):
        return None, 2
    return None, None


def _before(release: str, version: tuple[int, int]) -> bool:
    major, minor = (int(x) for x in release.split(".")[:2])
    return (major, minor) < version
