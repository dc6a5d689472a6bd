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

import uuid
from collections.abc import Callable
from typing import Any, Protocol

from ...offsets.records import partition_for
from ...protocol.errors import ErrorCode
from ..clock import Clock
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorRuntime, ShardStatus
from .config import CoordinatorConfig
from .consumer_group import TopicsView
from .group_configs import GroupConfig, GroupConfigs
from .shard import Shard


class SharePersister(Protocol):
    """What the group coordinator asks of the share coordinator (Kafka's ``Persister``): a promise of
    an error code once the share-partition's state is written or deleted."""

    def initialize(self, ident: tuple[str, uuid.UUID, int], *, state_epoch: int, start_offset: int) -> Promise: ...

    def delete(self, ident: tuple[str, uuid.UUID, int]) -> Promise: ...


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
        self._group_version: Callable[[], int | None] = lambda: None
        self._consumer_enabled: bool | None = None  # consumer_protocol_enabled's answer, until features change
        # share groups (KIP-932): the finalized share.version, each group's settings (GROUP configs)
        # and the share coordinator that keeps share-partition state (the broker wires them in)
        self.share_version: Callable[[], int] = lambda: 0
        self._group_configs = GroupConfigs(GroupConfig(
            consumer_session_timeout_ms=config.consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.consumer_heartbeat_interval_ms))
        for shard in self.shards:
            shard.group_configs = self._group_configs
        self.share_persister: SharePersister | None = None

    def consumer_protocol_enabled(self) -> bool:
        """``KafkaApis.isConsumerGroupProtocolEnabled``: ``consumer`` is in
        ``group.coordinator.rebalance.protocols`` and the finalized ``group.version`` is at least 1
        (UpdateFeatures can lower it); otherwise ConsumerGroupHeartbeat/Describe answer
        UNSUPPORTED_VERSION.  Asked on every heartbeat: the answer is kept until the features
        change (``features_changed``, wired to ``Features.listeners``: UpdateFeatures, a reset)."""
        enabled = self._consumer_enabled
        if enabled is None:
            level = self._group_version()
            enabled = self._consumer_enabled = self.config.consumer_protocol and (level is None or level >= 1)
        return enabled

    @property
    def group_version(self) -> Callable[[], int | None]:
        """The finalized ``group.version`` (None: a release without that feature)."""
        return self._group_version

    @group_version.setter
    def group_version(self, level: Callable[[], int | None]) -> None:
        self._group_version = level
        self._consumer_enabled = None

    def features_changed(self) -> None:
        """The finalized features moved: ``consumer_protocol_enabled`` asks ``group_version`` again."""
        self._consumer_enabled = None

    @property
    def group_configs(self) -> GroupConfigs:
        """Each group's settings in force (the broker's GROUP configs); every shard reads the same."""
        return self._group_configs

    @group_configs.setter
    def group_configs(self, configs: GroupConfigs) -> None:
        self._group_configs = configs
        for shard in self.shards:
            shard.group_configs = configs

    def share_groups_enabled(self) -> bool:
        """``KafkaApis.isShareGroupProtocolEnabled`` (4.1+): ``group.share.enable`` or the finalized
        ``share.version`` at 1 or more; otherwise every share API answers UNSUPPORTED_VERSION."""
        return self.config.share_enable or self.share_version() >= 1

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
