"""A share-partition's durable state, as the share coordinator keeps it, and its replay.

What a ShareSnapshot carries (start offset, epochs, delivery-complete count,
state batches) is the whole durable state; a ShareUpdate or a write from the
data path (Kafka's WriteShareGroupState partition: the changed batches) is
merged into it by Kafka's ``PersisterStateBatchCombiner`` rules:

- (parts of) batches below the start offset are dropped;
- where batches overlap, the one with the **higher delivery count** wins, and
  with equal counts the **higher state id** (ARCHIVED 4 > ACKNOWLEDGED 2 >
  AVAILABLE 0) -- not simply the newest: a record's count only grows, and a
  terminal state is never undone;
- adjacent ranges with equal state and count are joined; the result is
  sorted and non-overlapping.

Nothing here does I/O: :class:`~odradek.shares.partition.SharePartition`
produces :class:`StateWrite` s, the coordinator shard turns them into records,
and :func:`replay` rebuilds the state from those records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field, replace

from ..protocol.lean_dataclass import dataclass
from .records import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue, StateBatch

__all__ = ["StateWrite", "PersistedState", "combine", "replay", "apply_record", "update_value"]


@dataclass(slots=True, kw_only=True)
class StateWrite:
    """One write of a share-partition's state (Kafka's WriteShareGroupState partition data).

    ``state_batches`` hold only what changed; ``start_offset`` is the
    partition's start offset after the change.
    """

    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int
    delivery_complete_count: int = -1
    state_batches: list[StateBatch] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class PersistedState:
    """The merged durable state of one share-partition (what ReadShareGroupState answers)."""

    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = -1
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1
    state_batches: list[StateBatch] = field(default_factory=list)

    def merged(self, write: StateWrite) -> PersistedState:
        """This state with ``write`` applied as a ShareUpdate is replayed (-1 keeps start / epochs)."""
        start = self.start_offset if write.start_offset == -1 else write.start_offset
        return replace(
            self, start_offset=start,
            leader_epoch=self.leader_epoch if write.leader_epoch == -1 else write.leader_epoch,
            state_epoch=self.state_epoch if write.state_epoch == -1 else write.state_epoch,
            delivery_complete_count=write.delivery_complete_count,
            state_batches=combine(self.state_batches, write.state_batches, start))


    def snapshot_value(self) -> ShareSnapshotValue:
        """This state as the ShareSnapshot value that replaces it on replay."""
        return ShareSnapshotValue(
            snapshot_epoch=self.snapshot_epoch, state_epoch=self.state_epoch, leader_epoch=self.leader_epoch,
            start_offset=self.start_offset, delivery_complete_count=self.delivery_complete_count,
            create_timestamp=self.create_timestamp, write_timestamp=self.write_timestamp,
            state_batches=list(self.state_batches))


def update_value(snapshot_epoch: int, write: StateWrite) -> ShareUpdateValue:
    """The ShareUpdate value recording ``write`` against the snapshot of ``snapshot_epoch``.

    The write's batches are combined first (clipped at its start offset,
    overlaps resolved, equal neighbours joined), as Kafka's shard does before
    it writes them.
    """
    return ShareUpdateValue(snapshot_epoch=snapshot_epoch, leader_epoch=write.leader_epoch,
                            start_offset=write.start_offset, delivery_complete_count=write.delivery_complete_count,
                            state_batches=combine([], write.state_batches, write.start_offset))


def _beats(a: StateBatch, b: StateBatch) -> bool:
    return (a.delivery_count, a.delivery_state) > (b.delivery_count, b.delivery_state)


def combine(current: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    """Kafka's ``PersisterStateBatchCombiner.combineStateBatches``: merged, clipped at ``start_offset``."""
    batches = [b for b in [*current, *new] if b.last_offset >= start_offset and b.last_offset >= b.first_offset]
    if not batches:
        return []
    cuts = sorted({max(b.first_offset, start_offset) for b in batches} | {b.last_offset + 1 for b in batches})
    out: list[StateBatch] = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        winner = None
        for b in batches:
            if b.first_offset <= lo and b.last_offset >= hi - 1 and (winner is None or _beats(b, winner)):
                winner = b
        if winner is None:
            continue
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == lo and prev.delivery_state == winner.delivery_state
                and prev.delivery_count == winner.delivery_count):
            out[-1] = replace(prev, last_offset=hi - 1)
        else:
            out.append(StateBatch(lo, hi - 1, winner.delivery_state, winner.delivery_count))
    return out


def apply_record(state: PersistedState | None, key: object,
                 value: ShareSnapshotValue | ShareUpdateValue | None) -> PersistedState | None:
    """The state after one ``__share_group_state`` record for its key (Kafka's shard replay).

    A snapshot replaces the state, a snapshot tombstone deletes it, an
    update merges into it (an update for a key without a snapshot is
    ignored, as Kafka's shard does; an update tombstone changes nothing).
    """
    if type(key) is ShareSnapshotKey:
        if value is None:
            return None
        return PersistedState(
            snapshot_epoch=value.snapshot_epoch, state_epoch=value.state_epoch, leader_epoch=value.leader_epoch,
            start_offset=value.start_offset, delivery_complete_count=value.delivery_complete_count,
            create_timestamp=value.create_timestamp, write_timestamp=value.write_timestamp,
            state_batches=combine([], value.state_batches, value.start_offset))
    if type(key) is ShareUpdateKey and value is not None and state is not None:
        return state.merged(StateWrite(
            state_epoch=state.state_epoch, leader_epoch=value.leader_epoch, start_offset=value.start_offset,
            delivery_complete_count=value.delivery_complete_count, state_batches=value.state_batches))
    return state


def replay(records: Iterable[tuple[object, ShareSnapshotValue | ShareUpdateValue | None]]) -> dict:
    """(group, topic id, partition) -> :class:`PersistedState`, from decoded (key, value) records in log order."""
    states: dict = {}
    for key, value in records:
        ident = (key.group_id, key.topic_id, key.partition)
        state = apply_record(states.get(ident), key, value)
        if state is None:
            states.pop(ident, None)
        else:
            states[ident] = state
    return states
