"""The group coordinator: its shards (``shards.GroupShards``) wired to loading, the expiry sweep,
session timers, deleted topics and transaction markers.

The operations below it take a ``GroupShards``, not this class, so nothing
they import leads back here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ..clock import Clock
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorRuntime, ShardStatus
from ..txn_contracts import TxnMarker
from . import consumer_heartbeat, rebalance, share_heartbeat
from .config import CoordinatorConfig
from .expiry import OffsetExpiry
from .offsets import delete_topic_offsets
from .shard import Shard
from .shards import GroupShards
from .share_admin import forget_deleted_topics
from .txn_offsets import write_marker

log = structlog.get_logger("odradek.coordinator")


class Coordinator(GroupShards):
    """The group coordinator as the broker runs it: its shards (``GroupShards``), their loading,
    the KIP-211 expiry sweep, session timers, deleted topics and transaction markers."""

    def __init__(self, clock: Clock, config: CoordinatorConfig, logs: list[Any], *,
                 runtime: CoordinatorRuntime | None = None, await_fsync: bool = False):
        super().__init__(clock, config, logs, runtime=runtime, await_fsync=await_fsync)
        self._tasks: list[asyncio.Task] = []
        self.expiry = OffsetExpiry(self)  # KIP-211 sweep; started by load()
        # run in order when a shard has replayed its log: expiry sweep, session timers
        self.load_listeners: list[Callable[[Shard], None]] = [self.expiry.on_shard_loaded,
                                                              rebalance.on_shard_loaded,
                                                              consumer_heartbeat.on_shard_loaded,
                                                              share_heartbeat.on_shard_loaded]

    def spare_active(self, heard_since_real_ms: int, shift_ms: int) -> int:
        """Before a sparing advance: members heard from since then keep their session time left."""
        return sum(rebalance.spare_members(shard, heard_since_real_ms, shift_ms) for shard in self.shards)

    async def load(self) -> None:
        """Replay every shard (each yields to the loop while it loads).

        The offset-expiry sweep starts here (first run at start-up, as in
        Kafka); a shard still loading then is swept once its load completes.
        """
        self.expiry.start()
        await asyncio.gather(*(shard.load(on_loaded=self._on_loaded) for shard in self.shards))

    def _on_loaded(self, shard: Shard) -> None:
        for listener in self.load_listeners:
            listener(shard)

    def on_topics_deleted(self, topics: list[str]) -> list:
        """DeleteTopics: tombstone every group's offsets of ``topics`` (one batch per shard); share
        groups forget those topics' share-partitions and their state goes (``share_admin``).

        Returns the shards' write promises (callers may ignore them).
        """
        return delete_topic_offsets(self, topics) + forget_deleted_topics(self, set(topics))

    def stable_offset(self, partition: int) -> int:
        """The cleaner's bound for ``__consumer_offsets-partition``: its last stable offset.

        Kafka never compacts past it (an open transaction's offsets may still be aborted, and
        the committed values they would hide must stay); nothing is cleanable while it loads.
        """
        shard = self.shards[partition]
        if shard.status is not ShardStatus.ACTIVE:
            return shard.log.log_start_offset
        first = shard.stable_offset()
        end = shard.log.log_end_offset
        return end if first is None else min(first, end)

    async def write_txn_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        """``txn_contracts.MarkerTarget`` for ``__consumer_offsets``: the marker's control batch, durable and replayed.

        The transaction coordinator's markers for the groups of a transaction
        (Kafka's ``GroupCoordinator.completeTransaction``); answers NONE or
        the per-partition error ``WriteTxnMarkers`` would.
        """
        return await promised(write_marker(self, topic, partition, marker))

    def start_background(self, coro) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro))

    async def stop(self) -> None:
        self.expiry.stop()
        for shard in self.shards:
            rebalance.unload_shard(shard)  # no group timer may outlive the coordinator
            consumer_heartbeat.unload_shard(shard)
            share_heartbeat.unload_shard(shard)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()


async def promised(promise: Promise) -> Any:
    """Await a ``Promise`` (completed at once when the write needed no fsync wait)."""
    if promise.done:
        return promise.result()
    future = asyncio.get_running_loop().create_future()

    def done(result: Any) -> None:
        if not future.done():
            future.set_result(result)
    promise.add_done_callback(done)
    return await future
