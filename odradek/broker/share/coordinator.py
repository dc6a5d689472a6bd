"""The share coordinator: every ``__share_group_state`` shard, and the persister the others call.

Kafka reaches its share coordinator through the ``Persister`` (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and the read summary, one
share-partition per call); a single node calls the shard that holds the key directly, keeping
Kafka's placement (``shares.records.state_partition_for``: Java's hash of
``"group:topicId:partition"``) so a Kafka broker would find the state where it looks.

As in Kafka, ``__share_group_state`` exists only once a share group needs it: a broker that never
saw a share group has no such topic (Metadata does not list it).  Its partitions are then created
with ``share.coordinator.state.topic.num.partitions`` and are Active at once (empty logs); a
broker that finds them on disk replays them at start.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from ...protocol.errors import ErrorCode
from ...shares.records import state_partition_for
from ...shares.state import PersistedState, StateWrite
from ..clock import Clock
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, CoordinatorRuntime, ShardStatus
from .shard import SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT, ShareStateShard, StateKey

_STATUS_ERRORS = {ShardStatus.LOADING: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                  ShardStatus.FAILED: ErrorCode.NOT_COORDINATOR}


class ShareCoordinator:
    """The shards of ``__share_group_state`` (made on first use) and the persister's operations."""

    def __init__(self, clock: Clock, num_partitions: int, open_logs: Callable[[int], list[Any]],
                 existing: list[Any] | None = None, *, runtime: CoordinatorRuntime, await_fsync: bool = False,
                 updates_per_snapshot: int = SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT) -> None:
        """``open_logs(n)`` creates the topic's n partition logs; ``existing``: those found on disk;
        ``updates_per_snapshot``: ``share.coordinator.snapshot.update.records.per.snapshot``."""
        self.clock = clock
        self.updates_per_snapshot = updates_per_snapshot
        self.num_partitions = num_partitions
        self._open_logs = open_logs
        self.runtime = runtime
        self.await_fsync = await_fsync
        self.shards: list[ShareStateShard] = [self._shard(p, lg) for p, lg in enumerate(existing or [])]

    def _shard(self, partition: int, log_: Any) -> ShareStateShard:
        return ShareStateShard(partition, log_, self.clock, runtime=self.runtime, await_fsync=self.await_fsync,
                               updates_per_snapshot=self.updates_per_snapshot)

    async def load(self) -> None:
        """Replay the partitions found on disk (none on a broker that never had a share group)."""
        await asyncio.gather(*(shard.load() for shard in self.shards))

    def ensure(self) -> list[ShareStateShard]:
        """The shards, the topic created first when it does not exist yet (Active at once: empty)."""
        if not self.shards:
            self.shards = [self._shard(p, lg) for p, lg in enumerate(self._open_logs(self.num_partitions))]
            for shard in self.shards:
                shard.status = ShardStatus.ACTIVE
        return self.shards

    def shard_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[ShareStateShard, ErrorCode]:
        shards = self.ensure()
        shard = shards[state_partition_for(group_id, topic_id, partition, len(shards))]
        return shard, _STATUS_ERRORS.get(shard.status, ErrorCode.NONE)

    # --- the persister's operations (one share-partition each) ---------------------------------

    def initialize(self, ident: StateKey, *, state_epoch: int, start_offset: int) -> Promise:
        """InitializeShareGroupState: a promise of its error code once the snapshot is durable."""
        shard, error = self.shard_for(*ident)
        if error is not ErrorCode.NONE:
            return Promise.resolved(error)
        return _run(shard, shard.initialize(ident, state_epoch=state_epoch, start_offset=start_offset))

    def delete(self, ident: StateKey) -> Promise:
        """DeleteShareGroupState: a promise of its error code once the tombstone is durable."""
        if not self.shards:
            return Promise.resolved(ErrorCode.NONE)  # no topic, no state
        shard, error = self.shard_for(*ident)
        if error is not ErrorCode.NONE:
            return Promise.resolved(error)
        return _run(shard, shard.delete(ident))

    def read_summary(self, ident: StateKey) -> tuple[PersistedState | None, ErrorCode]:
        """ReadShareGroupStateSummary: the state (start offset -1 when none) or the shard's error."""
        if not self.shards:
            return PersistedState(start_offset=-1), ErrorCode.NONE
        shard, error = self.shard_for(*ident)
        return (None, error) if error is not ErrorCode.NONE else (shard.read_summary(ident), error)

    def read(self, ident: StateKey, leader_epoch: int = 0) -> Promise:
        """ReadShareGroupState (the data path's load): a promise of (error, merged state or None);
        a newer leader epoch is recorded first.  No state: INVALID_REQUEST, as Kafka's shard."""
        if not self.shards:
            return Promise.resolved((ErrorCode.INVALID_REQUEST, None))
        shard, error = self.shard_for(*ident)
        if error is not ErrorCode.NONE:
            return Promise.resolved((error, None))
        result, state = shard.read_state(ident, leader_epoch)
        if state is None:
            return Promise.resolved((ErrorCode(result.response), None))
        return _then(_run(shard, result), lambda code: (code, state if code is ErrorCode.NONE else None))

    def write(self, ident: StateKey, write: StateWrite) -> Promise:
        """WriteShareGroupState (the data path's changes): a promise of its error code once durable."""
        if not self.shards:
            return Promise.resolved(ErrorCode.INVALID_REQUEST)  # a write on an uninitialized share-partition
        shard, error = self.shard_for(*ident)
        if error is not ErrorCode.NONE:
            return Promise.resolved(error)
        return _run(shard, shard.write_state(ident, write))

    def states_of(self, group_id: str) -> dict[StateKey, PersistedState]:
        """Every share-partition state of ``group_id`` the active shards hold (admin listings)."""
        return {k: v for shard in self.shards if shard.status is ShardStatus.ACTIVE
                for k, v in shard.states.items() if k[0] == group_id}

    def stop(self) -> None:
        """Nothing runs in the background yet (pruning and cold snapshots are not built)."""


def _run(shard: ShareStateShard, result: CoordinatorResult) -> Promise:
    """The operation's records written; its error code (NONE, or the write's failure)."""
    result.failed = _write_failed
    return shard.run(result)


def _write_failed(_response: Any, error: ErrorCode) -> ErrorCode:
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if error is ErrorCode.NOT_LEADER_OR_FOLLOWER else error


def _then(promise: Promise, fn: Callable[[Any], Any]) -> Promise:
    out = Promise()
    promise.add_done_callback(lambda result: out.set(fn(result)))
    return out


def wait(promise: Promise) -> asyncio.Future:
    """The promise as an awaitable on the running loop (the data path's handlers await it)."""
    fut = asyncio.get_running_loop().create_future()
    promise.add_done_callback(lambda result: fut.done() or fut.set_result(result))
    return fut
