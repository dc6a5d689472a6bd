"""Per-group configs (Kafka's ``GroupConfig``, resource type GROUP = 32) over the broker defaults.

Kafka lets an operator override a few broker-wide group settings for one group through
IncrementalAlterConfigs on a GROUP resource (``consumer.session.timeout.ms``,
``share.record.lock.duration.ms``, ``share.auto.offset.reset``, ...).  Every coordinator reads
the value in force through ``GroupConfigs.effective(group_id)``, so the consumer-protocol and
share-group code never look at broker settings directly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from odradek.protocol.lean_dataclass import dataclass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The settings in force for one group (field = Kafka's GroupConfig name, dots as underscores)."""

    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_record_lock_duration_ms: int = 30000
    share_delivery_count_limit: int = 5
    share_partition_max_record_locks: int = 2000
    share_auto_offset_reset: str = "latest"  # latest | earliest | by_duration:<ISO-8601 duration>
    share_isolation_level: str = "read_uncommitted"  # or read_committed

    @classmethod
    def from_config(cls, config: Any) -> GroupConfig:
        """The broker's ``group.consumer.*`` / ``group.share.*`` settings as every group's defaults."""
        return cls(
            consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
            consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            share_session_timeout_ms=config["group.share.session.timeout.ms"],
            share_heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
            share_record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
            share_delivery_count_limit=config["group.share.delivery.count.limit"],
            share_partition_max_record_locks=config["group.share.partition.max.record.locks"],
        )


class GroupConfigs:
    """The broker defaults plus each group's overrides (``effective`` is on hot paths: a dict hit)."""

    def __init__(self, defaults: GroupConfig) -> None:
        self.defaults = defaults
        self._overrides: dict[str, dict[str, Any]] = {}
        self._effective: dict[str, GroupConfig] = {}

    def effective(self, group_id: str) -> GroupConfig:
        """The settings in force for ``group_id``: its overrides over the broker defaults."""
        found = self._effective.get(group_id)
        if found is not None:
            return found
        overrides = self._overrides.get(group_id)
        return self.defaults if not overrides else self._effective.setdefault(
            group_id, replace(self.defaults, **overrides))

    def overrides(self, group_id: str) -> dict[str, Any]:
        """The fields ``group_id`` overrides (a copy; empty when none)."""
        return dict(self._overrides.get(group_id, {}))

    def set_overrides(self, group_id: str, overrides: dict[str, Any]) -> None:
        """Replace ``group_id``'s overrides (field names of ``GroupConfig``); empty removes them."""
        self._effective.pop(group_id, None)
        if overrides:
            self._overrides[group_id] = dict(overrides)
        else:
            self._overrides.pop(group_id, None)

    def clear(self) -> None:
        """Forget every override (the test-control reset)."""
        self._overrides.clear()
        self._effective.clear()
