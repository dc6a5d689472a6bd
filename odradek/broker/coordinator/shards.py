"""The group coordinator's shards and the routing every group operation starts with.

``__consumer_offsets`` has ``offsets.topic.num.partitions`` partitions; a
group belongs to partition ``partition_for(group_id, n)`` (Kafka's exact
hash), so an imported Kafka data dir maps groups the same way.  Each
partition is a ``Shard`` that loads independently; requests for a group
whose shard is still loading get COORDINATOR_LOAD_IN_PROGRESS (Kafka's
``GroupCoordinator.validateGroupStatus``).

The operations (``offsets.py``, ``join.py``, ``membership.py``, ``admin.py``,
``expiry.py``, ``txn_offsets.py``) take a ``GroupShards``: what they use of the
coordinator, below the ``Coordinator`` (``service.py``) that wires them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...offsets.records import partition_for
from ...protocol.errors import ErrorCode
from ..clock import Clock
from ..runtime.runtime import CoordinatorRuntime, ShardStatus
from .config import CoordinatorConfig
from .consumer_group import TopicsView
from .group_configs import GroupConfigs
from .shard import Shard


class GroupShards:
    """The shards of ``__consumer_offsets``, group -> shard routing and the checks every request passes."""

    def __init__(self, clock: Clock, config: CoordinatorConfig, logs: list[Any], *,
                 runtime: CoordinatorRuntime | None = None, await_fsync: bool = False):
        """``logs[p]`` is the storage Log of ``__consumer_offsets-p``.

        ``await_fsync``: ``log.fsync.mode=always`` (answers wait for fsync).
        ``runtime``: the broker's coordinator runtime (the server opens its
        turns); a coordinator of its own when not given.
        """
        if len(logs) != config.num_partitions:
            raise ValueError("one log per offsets-topic partition")
        self.clock = clock
        self.config = config
        self.runtime = runtime if runtime is not None else CoordinatorRuntime()
        self.shards = [Shard(p, lg, clock, runtime=self.runtime, await_fsync=await_fsync, config=config)
                       for p, lg in enumerate(logs)]
        # topics as consumer groups see them (the broker wires the data plane's in)
        self.topics = TopicsView()
        for shard in self.shards:
            shard.topics = self.topics
        # the finalized group.version (the broker wires its features in); None: a release without
        # that feature (3.x), where the setting alone decides
        self.group_version: Callable[[], int | None] = lambda: None

    def use_group_configs(self, configs: GroupConfigs) -> None:
        """Read session timeouts and heartbeat intervals through ``configs`` (GROUP resources)."""
        for shard in self.shards:
            shard.group_configs = configs

    def consumer_protocol_enabled(self) -> bool:
        """``KafkaApis.isConsumerGroupProtocolEnabled``: ``consumer`` is in
        ``group.coordinator.rebalance.protocols`` and the finalized ``group.version`` is at least 1
        (UpdateFeatures can lower it); otherwise ConsumerGroupHeartbeat/Describe answer
        UNSUPPORTED_VERSION."""
        if not self.config.consumer_protocol:
            return False
        level = self.group_version()
        return level is None or level >= 1

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def shard_for(self, group_id: str) -> Shard:
        return self.shards[self.partition_for(group_id)]

    def check(self, group_id: str | None, *, allow_empty: bool) -> tuple[Shard | None, ErrorCode]:
        """The checks every group request passes first (``validateGroupStatus``): group id, then its shard's load state."""
        if group_id is None or (not allow_empty and group_id == ""):
            return None, ErrorCode.INVALID_GROUP_ID
        shards = self.shards  # every group request passes here: one partition needs no hash
        shard = shards[0] if len(shards) == 1 else self.shard_for(group_id)
        status = shard.status
        if status is ShardStatus.ACTIVE:
            return shard, ErrorCode.NONE
        if status is ShardStatus.LOADING:
            return shard, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return shard, ErrorCode.NOT_COORDINATOR

    def loading(self) -> bool:
        return any(s.status is ShardStatus.LOADING for s in self.shards)
