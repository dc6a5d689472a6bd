"""The group coordinator's settings, read once from the broker config (Kafka's property names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...offsets.records import OffsetValue
from ..emulation import consumer_protocol_by_default, state_filter_mode, value_versions, writes_metadata_hash


@dataclass(frozen=True)
class CoordinatorConfig:
    """The coordinator's settings (Kafka names in ``from_config``)."""

    num_partitions: int = 1
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 0
    max_group_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = 300000  # fixed in Kafka
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    # value versions an emulated older Kafka wrote (broker/emulation.py); None = Kafka's current rule
    offset_value_version: int | None = None
    group_value_version: int | None = None
    state_filter_mode: str = "lower-trim"  # ListGroups states_filter (state.parse_state_filter)
    # KIP-848 consumer groups (Kafka's GroupCoordinatorConfig names in from_config)
    consumer_protocol: bool = True
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_max_size: int = 2**31 - 1
    # KIP-932 share groups (Kafka's GroupCoordinatorConfig / ShareGroupConfig names in from_config)
    share_enable: bool = False  # group.share.enable: on even when share.version is 0
    share_max_size: int = 200
    share_initialize_retry_interval_ms: int = 30000
    consumer_migration_policy: str = "bidirectional"  # upgrade | downgrade | bidirectional | disabled
    consumer_metadata_hash: bool = True  # Kafka 4.1's metadata hash in the group-epoch record

    @classmethod
    def from_config(cls, config: Any) -> CoordinatorConfig:
        return cls(
            num_partitions=config["offsets.topic.num.partitions"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_group_size=config["group.max.size"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
            **dict(zip(("offset_value_version", "group_value_version"),
                       value_versions(config["odradek.emulate.kafka.version"]), strict=True)),
            state_filter_mode=state_filter_mode(config["odradek.emulate.kafka.version"]),
            consumer_protocol="consumer" in config["group.coordinator.rebalance.protocols"].split(",") and (
                config.sources.get("group.coordinator.rebalance.protocols", "default") != "default"
                or consumer_protocol_by_default(config["odradek.emulate.kafka.version"])),
            consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
            consumer_assignors=tuple(config["group.consumer.assignors"].split(",")),
            consumer_max_size=config["group.consumer.max.size"],
            share_enable=config["group.share.enable"],
            share_max_size=config["group.share.max.size"],
            share_initialize_retry_interval_ms=config["group.share.initialize.retry.interval.ms"],
            consumer_migration_policy=config["group.consumer.migration.policy"],
            consumer_metadata_hash=writes_metadata_hash(config["odradek.emulate.kafka.version"]),
        )

    @property
    def emulates_value_versions(self) -> bool:
        return self.offset_value_version is not None or self.group_value_version is not None

    def value_version(self, value: object) -> int | None:
        """The version to write ``value`` in: an emulated release's, else None (today's rule)."""
        if isinstance(value, OffsetValue):
            version = self.offset_value_version
            return 1 if version is not None and value.expire_timestamp != -1 else version
        return self.group_value_version
