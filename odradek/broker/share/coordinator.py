"""The share coordinator: every ``__share_group_state`` shard, and the persister calls on them.

Kafka's ``ShareCoordinatorService`` behind its ``Persister`` interface, on one node: a
share-partition's state lives in the shard ``state_partition_for(group, topic id,
partition)`` (Java's string hash, as Kafka places it), and the five operations of
``ShareCoordinatorShard`` -- Initialize, Read, Write, Read summary, Delete -- are called
directly, one share-partition per call, by the group coordinator (initialize, delete,
summaries for the admin APIs) and by the share-partition manager on the data path (read
on load, write on every state change but acquisition).

Each call answers a :class:`~odradek.broker.runtime.promise.Promise` that completes once
the record is durable and replayed (the runtime's contract), with an ``ErrorCode``
(``NONE`` on success).  A shard still loading answers COORDINATOR_LOAD_IN_PROGRESS, a
failed one NOT_COORDINATOR, as Kafka's runtime does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...protocol.errors import ErrorCode
from ...shares.records import state_partition_for
from ...shares.state import PersistedState, StateWrite
from ..clock import Clock
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorRuntime, ShardStatus
from .shard import ShareStateShard, StateKey

E = ErrorCode


def _then(promise: Promise, fn) -> Promise:
    out = Promise()
    promise.add_done_callback(lambda result: out.set(fn(result)))
    return out


def _code(result: Any) -> ErrorCode:
    """A write's outcome as an error code: None (durable) or a CoordinatorResult's code."""
    return E.NONE if result is None else ErrorCode(result)


class ShareCoordinator:
    """The shards of ``__share_group_state`` and the persister operations over them."""

    def __init__(self, clock: Clock, logs: list[Any], *, runtime: CoordinatorRuntime,
                 await_fsync: bool = False, updates_per_snapshot: int | None = None) -> None:
        self.clock = clock
        extra = {} if updates_per_snapshot is None else {"updates_per_snapshot": updates_per_snapshot}
        self.shards = [ShareStateShard(p, lg, clock, runtime=runtime, await_fsync=await_fsync, **extra)
                       for p, lg in enumerate(logs)]

    def shard_for(self, ident: StateKey) -> ShareStateShard:
        return self.shards[state_partition_for(*ident, len(self.shards))]

    def _active(self, ident: StateKey) -> tuple[ShareStateShard | None, ErrorCode]:
        shard = self.shard_for(ident)
        if shard.status is ShardStatus.ACTIVE:
            return shard, E.NONE
        return None, E.COORDINATOR_LOAD_IN_PROGRESS if shard.status is ShardStatus.LOADING else E.NOT_COORDINATOR

    # --- the persister's operations (one share-partition each) ------------------------------

    def initialize(self, ident: StateKey, *, state_epoch: int, start_offset: int) -> Promise:
        """InitializeShareGroupState: a fresh snapshot (start -1: by ``share.auto.offset.reset``)."""
        shard, error = self._active(ident)
        if shard is None:
            return Promise.resolved(error)
        return _then(shard.run(shard.initialize(ident, state_epoch=state_epoch, start_offset=start_offset)), _code)

    def read(self, ident: StateKey, leader_epoch: int = 0) -> Promise:
        """ReadShareGroupState: a promise of (error, merged state or None)."""
        shard, error = self._active(ident)
        if shard is None:
            return Promise.resolved((error, None))
        result, state = shard.read_state(ident, leader_epoch)
        if state is None:
            return Promise.resolved((ErrorCode(result.response), None))
        return _then(shard.run(result), lambda r: (_code(r), state if _code(r) is E.NONE else None))

    def write(self, ident: StateKey, write: StateWrite) -> Promise:
        """WriteShareGroupState: a promise of the error code once the record is durable."""
        shard, error = self._active(ident)
        if shard is None:
            return Promise.resolved(error)
        return _then(shard.run(shard.write_state(ident, write)), _code)

    def read_summary(self, ident: StateKey) -> tuple[ErrorCode, PersistedState]:
        """ReadShareGroupStateSummary: start offset -1 when the share-partition has no state."""
        shard, error = self._active(ident)
        if shard is None:
            return error, PersistedState(start_offset=-1)
        return E.NONE, shard.read_summary(ident)

    def delete(self, ident: StateKey) -> Promise:
        """DeleteShareGroupState: the snapshot key's tombstone (an unknown key is a success)."""
        shard, error = self._active(ident)
        if shard is None:
            return Promise.resolved(error)
        return _then(shard.run(shard.delete(ident)), _code)

    def states_of(self, group_id: str) -> dict[StateKey, PersistedState]:
        """Every share-partition state of ``group_id`` the active shards hold (admin listings)."""
        return {k: v for shard in self.shards if shard.status is ShardStatus.ACTIVE
                for k, v in shard.states.items() if k[0] == group_id}

    # --- life cycle ------------------------------------------------------------------------------

    async def load(self) -> None:
        await asyncio.gather(*(shard.load() for shard in self.shards))

    def unload(self) -> None:
        """Stop answering at once (NOT_COORDINATOR): a reset replaces the coordinator."""
        for shard in self.shards:
            shard.status = ShardStatus.FAILED


def wait(promise: Promise) -> asyncio.Future:
    """The promise as an awaitable on the running loop."""
    fut = asyncio.get_running_loop().create_future()
    promise.add_done_callback(lambda result: fut.done() or fut.set_result(result))
    return fut
