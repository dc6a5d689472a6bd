"""One ``__share_group_state`` partition: the durable state of the share-partitions that hash to it.

The share coordinator owns ``__share_group_state`` as the transaction
coordinator owns ``__transaction_state``: operations validate against the
shard's state and return a ``CoordinatorResult``; ``run`` writes their
records through the coordinator runtime, which replays them
(:func:`odradek.shares.state.apply_record`) once durable and only then
releases the answer; loading replays the log with the same function.

The operations are Kafka's ``ShareCoordinatorShard``: Initialize, Read,
Read summary, Write and Delete of one share-partition's state (Kafka's
InitializeShareGroupState ... DeleteShareGroupState, one partition per call),
each one record at most.  A Write becomes a ShareUpdate carrying only the
changed batches, or -- once ``share.coordinator.snapshot.update.records.per.snapshot``
updates exist for the key since its last snapshot -- a ShareSnapshot with the
merged state and the next snapshot epoch, so replay never has to merge more
than that many updates per key.

``coordinator.py`` holds the shards and calls these operations for the
group coordinator and the share-partition manager (docs/ARCHITECTURE.md,
*Share groups*).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...shares import records as share_records
from ...shares.records import ShareKey, ShareSnapshotKey, ShareUpdateKey, ShareValue
from ...shares.state import PersistedState, StateWrite, apply_record, update_value
from ..clock import Clock
from ..runtime.loading import replay_log
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, CoordinatorRuntime, EncodedRecord, ShardStatus

log = structlog.get_logger("odradek.share")

StateKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
Record = tuple[ShareKey, ShareValue | None]

SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT = 500  # share.coordinator.snapshot.update.records.per.snapshot


def encode_records(records: list[Record]) -> list[EncodedRecord]:
    return [(share_records.encode_key(k), share_records.encode_value(v)) for k, v in records]


class ShareStateShard:
    """The share coordinator's shard (Kafka's ``ShareCoordinatorShard``) for one state partition."""

    def __init__(self, partition: int, log_, clock: Clock, *, runtime: CoordinatorRuntime,
                 await_fsync: bool = False, updates_per_snapshot: int = SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT) -> None:
        self.partition = partition
        self.log = log_
        self.clock = clock
        self.status = ShardStatus.LOADING
        self.updates_per_snapshot = updates_per_snapshot
        self.states: dict[StateKey, PersistedState] = {}
        self.updates_since_snapshot: dict[StateKey, int] = {}
        self.writer = runtime.writer(self, log_, encode_records, clock.now_ms, await_fsync=await_fsync)
        self.write = self.writer.write  # tests replace it to hold or fail writes
        self.loaded_records = 0

    # -- replay -----------------------------------------------------------------------

    def replay(self, key: ShareKey | None, value: ShareValue | None) -> None:
        """Apply one record: a snapshot replaces (a tombstone deletes), an update merges."""
        if key is None:
            return
        ident = (key.group_id, key.topic_id, key.partition)
        state = apply_record(self.states.get(ident), key, value)
        if state is None:
            self.states.pop(ident, None)
            self.updates_since_snapshot.pop(ident, None)
            return
        self.states[ident] = state
        if type(key) is ShareSnapshotKey:
            self.updates_since_snapshot[ident] = 0
        else:
            self.updates_since_snapshot[ident] = self.updates_since_snapshot.get(ident, 0) + 1

    def run(self, result: CoordinatorResult) -> Promise:
        """Write the operation's records as one batch; a promise of its answer once replayed."""
        if not result.records:
            return Promise.resolved(result.response)
        return result.answer_when(self.write(result.records))

    # -- operations (Kafka's ShareCoordinatorShard) -----------------------------------------

    def initialize(self, ident: StateKey, *, state_epoch: int, start_offset: int) -> CoordinatorResult:
        """A fresh snapshot: no batches, the next snapshot epoch; FENCED_STATE_EPOCH for an older state epoch."""
        current = self.states.get(ident)
        if current is not None and state_epoch < current.state_epoch:
            return CoordinatorResult([], ErrorCode.FENCED_STATE_EPOCH)
        now = self.clock.now_ms()
        state = PersistedState(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1, state_epoch=state_epoch,
            leader_epoch=0, start_offset=start_offset, delivery_complete_count=-1 if start_offset == -1 else 0,
            create_timestamp=now, write_timestamp=now)
        return CoordinatorResult([(ShareSnapshotKey(*ident), state.snapshot_value())], ErrorCode.NONE)

    def write_state(self, ident: StateKey, write: StateWrite) -> CoordinatorResult:
        """Record a data-path write: a ShareUpdate, or a merged ShareSnapshot every N updates."""
        current = self.states.get(ident)
        error = self._fenced(current, write.leader_epoch, write.state_epoch)
        if error is not None:
            return CoordinatorResult([], error)
        if self.updates_since_snapshot.get(ident, 0) >= self.updates_per_snapshot:
            merged = current.merged(write)
            now = self.clock.now_ms()
            merged = replace(merged, snapshot_epoch=current.snapshot_epoch + 1, create_timestamp=now,
                             write_timestamp=now)
            return CoordinatorResult([(ShareSnapshotKey(*ident), merged.snapshot_value())], ErrorCode.NONE)
        value = update_value(current.snapshot_epoch, write)
        return CoordinatorResult([(ShareUpdateKey(*ident), value)], ErrorCode.NONE)

    def read_state(self, ident: StateKey, leader_epoch: int) -> tuple[CoordinatorResult, PersistedState | None]:
        """The merged state for a leader loading the partition; a newer leader epoch is recorded."""
        current = self.states.get(ident)
        error = self._fenced(current, leader_epoch, -1)
        if error is not None:
            return CoordinatorResult([], error), None
        if leader_epoch != -1 and leader_epoch > current.leader_epoch:
            write = StateWrite(state_epoch=current.state_epoch, leader_epoch=leader_epoch, start_offset=-1,
                               delivery_complete_count=current.delivery_complete_count)
            return self.write_state(ident, write), current.merged(write)
        return CoordinatorResult([], ErrorCode.NONE), current

    def read_summary(self, ident: StateKey) -> PersistedState:
        """Start offset, epochs and delivery-complete count for admin; start -1 when there is no state."""
        return self.states.get(ident) or PersistedState(start_offset=-1)

    def delete(self, ident: StateKey) -> CoordinatorResult:
        """The snapshot key's tombstone; nothing to write for an unknown key (still a success)."""
        if ident not in self.states:
            return CoordinatorResult([], ErrorCode.NONE)
        return CoordinatorResult([(ShareSnapshotKey(*ident), None)], ErrorCode.NONE)

    @staticmethod
    def _fenced(current: PersistedState | None, leader_epoch: int, state_epoch: int) -> ErrorCode | None:
        if current is None:  # "write/read on uninitialized share partition"
            return ErrorCode.INVALID_REQUEST
        if leader_epoch != -1 and leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if state_epoch != -1 and state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return None

    # -- loading ------------------------------------------------------------------------------

    def _load_failed(self, offset: int, exc: Exception) -> None:
        log.error("share.load_failed", partition=self.partition, offset=offset, error=str(exc))
        self.status = ShardStatus.FAILED

    async def load(self, yield_every: int = 200) -> None:
        """Replay the whole log, yielding to the loop regularly, then go Active."""
        started = time.perf_counter()
        self.states, self.updates_since_snapshot = {}, {}
        count = await replay_log(self.log, _decode, self.replay, self._load_failed,
                                 share_records.ShareRecordDecodeError, yield_every)
        self.loaded_records = count
        self.status = ShardStatus.ACTIVE
        log.info("share.loaded", partition=self.partition, records=count, share_partitions=len(self.states),
                 ms=round((time.perf_counter() - started) * 1000, 1))


def _decode(record: Any) -> tuple[Any, Any]:
    key = share_records.decode_key(record.key or b"")
    return key, None if key is None else share_records.decode_value(key, record.value)
