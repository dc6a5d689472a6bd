"""Offset expiry under KIP-211 (Kafka's ``GroupMetadataManager.cleanupGroupMetadata``): the rules, and the periodic sweep that applies them.

The rules are pure functions in ``odradek.offsets.expiry`` (shared
with ``odradek offsets --expiry-preview`` and the Spark expiry audit, so none
can drift from what the broker will actually do); this module adapts a live
group to them (``group_rule``) and runs the sweep.

An offset carrying its own ``expire_timestamp`` (value v1, a v2-v4 commit
with a retention) expires at that time instead, when its group's row lets it
expire at all.  Offsets with a commit in flight never expire.  Tombstones go
through ``offsets.remove_offsets`` -- one batch per shard -- which also turns
groups left Empty with no offsets into Dead ones.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import structlog

from ...offsets.expiry import Rule, expires_at, rule_for
from ...offsets.records import OffsetValue
from ..runtime.runtime import ShardStatus
from .consumer_admin import expire_consumer_offsets
from .group import ClassicGroup
from .offsets import remove_offsets, run_removal
from .shard import Shard, TopicPartition

if TYPE_CHECKING:
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")

def group_rule(group: ClassicGroup) -> Rule | None:
    """Which row of the KIP-211 table applies to ``group`` now (None: nothing expires)."""
    return rule_for(group.protocol_type, group.state.value, group.current_state_timestamp,
                    group.subscribed_topics)


def expired_offsets(group: ClassicGroup, offsets: Mapping[TopicPartition, OffsetValue],
                    pending: Collection[TopicPartition] | None, now_ms: int,
                    retention_ms: int) -> list[TopicPartition]:
    """The offsets of ``group`` that have expired at ``now_ms``."""
    rule = group_rule(group)
    if rule is None:
        return []
    out = []
    for tp, value in offsets.items():
        if pending and tp in pending:
            continue
        at = expires_at(rule, tp[0], value, retention_ms)
        if at is not None and now_ms >= at:
            out.append(tp)
    return out


class SweepStats(NamedTuple):
    shards: int
    groups: int
    offsets_expired: int
    groups_removed: int


def sweep_shard(shard: Shard, now_ms: int, retention_ms: int) -> tuple[int, int, int]:
    """Expire one shard's offsets; returns (groups looked at, offsets expired, groups removed).

    Every group is offered to ``remove_offsets``, even with nothing expired,
    because an Empty group with no offsets dies in the sweep too.
    """
    selection = {}
    for group_id, group in list(shard.groups.items()):
        offsets = shard.offsets.get(group_id) or {}
        selection[group_id] = expired_offsets(group, offsets, shard.pending_offsets(group_id),
                                              now_ms, retention_ms)
    removed = remove_offsets(shard, selection)
    run_removal(shard, removed, "expired")
    groups, offsets, gone = len(selection), removed.offsets, len(removed.groups)
    if shard.consumer_groups:  # KIP-848 groups expire by their own rule
        g, o, r = expire_consumer_offsets(shard, now_ms, retention_ms)
        groups, offsets, gone = groups + g, offsets + o, gone + r
    return groups, offsets, gone


class OffsetExpiry:
    """Runs the sweep every ``offsets.retention.check.interval.ms`` on the coordinator's clock
    (once per advance of a test's clock, however many intervals it spans: ``clock.call_every``).

    The first run is at start-up: each shard is swept as soon as its load
    completes (``on_shard_loaded``) -- Kafka sweeps at start-up too, but
    skips partitions still loading, which then wait a whole interval.
    """

    def __init__(self, coordinator: GroupShards) -> None:
        self.coordinator = coordinator
        self.clock = coordinator.clock
        self._timer = None
        self.sweeps = 0

    def start(self) -> None:
        """Arm the periodic sweep; the start-up run is each shard's ``on_shard_loaded``."""
        if self._timer is None:
            interval = self.coordinator.config.offsets_retention_check_interval_ms
            self._timer = self.clock.call_every(interval, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        try:
            self.sweep()
        except Exception:  # a bug here must not stop future sweeps
            log.exception("offsets.expiry_failed")

    def on_shard_loaded(self, shard: Shard) -> None:
        if self._timer is not None:
            self.sweep([shard])

    def sweep(self, shards: Iterable[Shard] | None = None) -> SweepStats:
        """One pass over the active shards; one log event with the counts."""
        started = time.perf_counter()
        now = self.clock.now_ms()
        retention = self.coordinator.config.offsets_retention_ms
        shards = [s for s in (self.coordinator.shards if shards is None else shards)
                  if s.status is ShardStatus.ACTIVE]
        groups = offsets = removed = 0
        for shard in shards:
            g, o, r = sweep_shard(shard, now, retention)
            groups, offsets, removed = groups + g, offsets + o, removed + r
        self.sweeps += 1
        stats = SweepStats(len(shards), groups, offsets, removed)
        log.info("offsets.expiry_sweep", shards=stats.shards, groups=stats.groups,
                 offsets_expired=stats.offsets_expired, groups_removed=stats.groups_removed,
                 ms=round((time.perf_counter() - started) * 1000, 2))
        return stats
