"""The transaction coordinator's settings, read once from the broker config (Kafka's names)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.lean_dataclass import dataclass


@dataclass(frozen=True)
class TxnConfig:
    num_partitions: int = 1
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_timed_out_interval_ms: int = 10000
    remove_expired_interval_ms: int = 3600000
    marker_retry_backoff_ms: int = 100  # Kafka's marker channel retries after its request backoff

    @classmethod
    def from_config(cls, config: Any) -> TxnConfig:
        return cls(
            num_partitions=config["transaction.state.log.num.partitions"],
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
            abort_timed_out_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            remove_expired_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
        )
