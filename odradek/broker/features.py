"""Feature flags (KIP-584): what ApiVersions lists and UpdateFeatures changes.

The table below is one small hand-made table, kept apart from the generated
release tables (``protocol/kafka_releases.py``): for each Kafka release, the
features its brokers support (``BrokerFeatures.defaultSupportedFeatures``: one
entry per production feature whose latest production level is above 0, from
``minimumProduction``) and the level a freshly formatted cluster of that
release finalizes (``Formatter``: the highest level whose bootstrap
``metadata.version`` is at or below the release's).  ``kraft.version`` is 1
as ``kafka-storage format --standalone`` leaves a single node (Kafka omits a
kraft.version of 0).  ``odradek.emulate.kafka.version`` picks a release's row;
without it the newest row is served.

The finalized levels are cluster state: UpdateFeatures changes them, and they
are kept in ``<data dir>/features.json`` (rewritten whole, off the loop, before
the answer), with the epoch clients compare (Kafka's is the metadata log
offset; here it grows by one at every change, which is what clients rely on:
the Java producer re-reads the features only when the epoch grows).

Validation is ``FeatureControlManager.updateFeature`` and
``QuorumFeatures.reasonNotSupported``: every refusal is INVALID_UPDATE_VERSION
with Kafka's message, the first refusal fails the whole request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..protocol.errors import ErrorCode
from ..protocol.lean_dataclass import dataclass
from ..storage.files import atomic_write_text

FILE_NAME = "features.json"
METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELR_VERSION = "eligible.leader.replicas.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
NODE_ID = 1  # the local controller's id in Kafka's messages (a single node)

# UpdateFeatures' upgrade types (FeatureUpdate.UpgradeType)
UNKNOWN, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_level: int  # supported range (SupportedFeatures)
    max_level: int
    default: int  # finalized on a fresh cluster of that release


def _row(mv: tuple[int, int], *others: tuple[str, int, int, int]) -> tuple[Feature, ...]:
    return (Feature(METADATA_VERSION, mv[0], mv[1], mv[1]),) + tuple(Feature(*o) for o in others)


# release -> its features (Kafka's Feature enum and each *Version class on that release's branch)
RELEASE_FEATURES: dict[str, tuple[Feature, ...]] = {
    "2.0": (),  # ApiVersions v0-2: no features
    "2.8": (),  # the feature framework exists, no production feature yet
    "3.0": (),
    "3.5": _row((1, 11)),  # MINIMUM_KRAFT_VERSION 3.0-IV1 .. 3.5-IV2
    "3.9": _row((1, 21), (KRAFT_VERSION, 0, 1, 1)),  # TV/GV exist but not in production yet
    "4.0": _row((7, 25), (KRAFT_VERSION, 0, 1, 1), (TRANSACTION_VERSION, 0, 2, 2), (GROUP_VERSION, 0, 1, 1),
                (ELR_VERSION, 0, 1, 0)),  # ELR level 1 bootstraps at 4.1-IV0
    "4.1": _row((7, 27), (KRAFT_VERSION, 0, 1, 1), (TRANSACTION_VERSION, 0, 2, 2), (GROUP_VERSION, 0, 1, 1),
                (ELR_VERSION, 0, 1, 1), (SHARE_VERSION, 0, 1, 0)),  # share groups: a preview, off
    "4.2": _row((7, 29), (KRAFT_VERSION, 0, 1, 1), (TRANSACTION_VERSION, 0, 2, 2), (GROUP_VERSION, 0, 1, 1),
                (ELR_VERSION, 0, 1, 1), (SHARE_VERSION, 0, 1, 1), (STREAMS_VERSION, 0, 0, 0)),
}
# Kafka 4.2 supports and finalizes share.version and streams.version at 1; this broker serves
# share groups (share.version 1, finalized on a fresh cluster as Kafka 4.2's bootstrap metadata
# version does) but not streams groups, which it supports only at level 0 (listed, never
# finalized, and UpdateFeatures cannot turn on what is not served).
# a feature level that needs another feature (FeatureVersion.dependencies)
DEPENDENCIES: dict[tuple[str, int], tuple[str, int]] = {(ELR_VERSION, 1): (METADATA_VERSION, 23)}
# metadata.version levels that changed the metadata format (MetadataVersion.didMetadataChange):
# a downgrade across one of them would lose metadata and is refused
METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23})


def release_features(release: str) -> tuple[Feature, ...]:
    """The row of ``release`` (""= the newest), or of the newest release before it."""
    if not release:
        return RELEASE_FEATURES[max(RELEASE_FEATURES, key=_key)]
    known = [r for r in RELEASE_FEATURES if _key(r) <= _key(release)]
    return RELEASE_FEATURES[max(known, key=_key)] if known else ()


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split(".")[:2])


class FeatureError(ValueError):
    """An update Kafka refuses (always INVALID_UPDATE_VERSION)."""

    code = ErrorCode.INVALID_UPDATE_VERSION


def _invalid(name: str, level: int, why: str) -> FeatureError:
    return FeatureError(f"Invalid update version {level} for feature {name}. {why}")


class Features:
    """The supported features of this broker and the finalized levels of its cluster."""

    def __init__(self, data_dir: Path | None, release: str = "", initial: dict[str, int] | None = None) -> None:
        self.path = None if data_dir is None else Path(data_dir) / FILE_NAME
        self.supported = {f.name: f for f in release_features(release)}
        self.defaults = {f.name: f.default for f in self.supported.values()}
        self.defaults.update({k: v for k, v in (initial or {}).items() if self._in_range(k, v)})
        self.levels = dict(self.defaults)
        self.epoch = 1 if self.supported else -1
        # called after the finalized levels change (``apply``, ``load``): readers that cache a
        # level on a hot path (the consumer protocol's switch) forget it
        self.listeners: list[Callable[[], None]] = []

    def _in_range(self, name: str, level: int) -> bool:
        f = self.supported.get(name)
        return f is not None and f.min_level <= level <= f.max_level

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    # --- ApiVersions ------------------------------------------------------------------------

    def api_versions_fields(self, version: int) -> dict:
        """The v3+ tagged fields (``ApiVersionsResponse.Builder``): supported features (those
        with a minimum of 0 left out below v4, KAFKA-17492), finalized ones (level 0 left out),
        and the epoch."""
        return {
            "supported_features": [{"name": f.name, "min_version": f.min_level, "max_version": f.max_level}
                                   for f in self.supported.values() if version >= 4 or f.min_level != 0],
            "finalized_features": [{"name": n, "max_version_level": lv, "min_version_level": lv}
                                   for n, lv in self.levels.items() if lv != 0],
            "finalized_features_epoch": self.epoch,
        }

    # --- UpdateFeatures ---------------------------------------------------------------------

    def validate(self, updates: list[tuple[str, int, int]]) -> dict[str, int]:
        """The levels after ``updates`` ([(feature, level, upgrade type)], in order); raises
        FeatureError at the first refusal (``FeatureControlManager.updateFeatures``)."""
        proposed = dict(self.levels)
        proposed.update({name: level for name, level, _t in updates})
        for name, level, kind in updates:
            self._check(name, level, kind, proposed)
        return {n: lv for n, lv in proposed.items() if n in self.supported}

    def _check(self, name: str, level: int, kind: int, proposed: dict[str, int]) -> None:
        if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise _invalid(name, level, "The controller does not support the given upgrade type.")
        current = self.levels.get(name, 0)
        if level < 0:
            raise _invalid(name, level, "A feature version cannot be less than 0.")
        f = self.supported.get(name)
        lo, hi = (f.min_level, f.max_level) if f else (0, 0)
        if not lo <= level <= hi:
            what = f"Local controller {NODE_ID}"
            raise _invalid(name, level, f"{what} does not support this feature." if hi == 0
                           else f"{what} only supports versions {lo}-{hi}")
        if level < current and kind == UPGRADE:
            raise _invalid(name, level, "Can't downgrade the version of this feature without setting the "
                                        "upgrade type to either safe or unsafe downgrade.")
        if level > current and kind != UPGRADE:
            raise _invalid(name, level, "Can't downgrade to a newer version.")
        if name == METADATA_VERSION:
            _check_metadata_version(current, level, kind)
        elif name == KRAFT_VERSION:
            if kind != UPGRADE and level != current:
                raise _invalid(name, level, "Can't downgrade the version of this feature.")
        elif f is None:  # an unknown feature at level 0 gets this far (Feature.featureFromName)
            raise _invalid(name, level, f"Feature {name} not found.")
        else:
            need = DEPENDENCIES.get((name, level))
            if need is not None and proposed.get(need[0], 0) < need[1]:
                raise _invalid(name, level, f"{name} could not be set to {level} because it depends on "
                                            f"{need[0]} level {need[1]}")

    def apply(self, levels: dict[str, int]) -> None:
        """New finalized levels (already durable): the epoch moves on."""
        self.levels = dict(levels)
        self.epoch += 1
        self._changed()

    def _changed(self) -> None:
        for listener in self.listeners:
            listener()

    # --- durability -------------------------------------------------------------------------

    def load(self) -> None:
        """The levels UpdateFeatures left (a level this release does not support keeps its default)."""
        if self.path is None or not self.path.exists():
            return
        data = json.loads(self.path.read_text(encoding="utf-8"))
        self.epoch = max(self.epoch, int(data["epoch"]))
        for name, level in data["levels"].items():
            if self._in_range(name, int(level)):
                self.levels[name] = int(level)
        self._changed()

    def save(self, levels: dict[str, int], epoch: int) -> None:
        """Durable first (call off the loop), then ``apply``."""
        if self.path is None:
            return
        atomic_write_text(self.path, json.dumps({"version": 1, "epoch": epoch, "levels": levels},
                                                indent=1, sort_keys=True) + "\n")


def forget_levels(data_dir: Path) -> None:
    """The levels a test set go (a reset finished at start, blocking): the fresh cluster's
    defaults again, the epoch one further so clients notice."""
    path = Path(data_dir) / FILE_NAME
    if path.exists():
        epoch = int(json.loads(path.read_text(encoding="utf-8"))["epoch"])
        atomic_write_text(path, json.dumps({"version": 1, "epoch": epoch + 1, "levels": {}}, indent=1) + "\n")


def _check_metadata_version(current: int, level: int, kind: int) -> None:
    """``FeatureControlManager.updateMetadataVersion``: a downgrade across a format change is refused."""
    if level < current and any(lv in METADATA_CHANGED for lv in range(level + 1, current + 1)):
        why = ("Unsafe metadata downgrade is not supported in this version." if kind == UNSAFE_DOWNGRADE
               else "Refusing to perform the requested downgrade because it might delete metadata information.")
        raise FeatureError(f"Unsupported metadata.version downgrade from {current} to {level}. {why}")


def parse_levels(text: str) -> dict[str, int]:
    """``name=level,name=level`` (the ``--feature`` flags of ``kafka-storage format``)."""
    out: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, level = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{item!r} is not feature=level")
        out[name.strip()] = int(level)
    return out
