"""A share-partition's durable state: Kafka's batch combiner and the replay of snapshots, updates and tombstones."""

from __future__ import annotations

import uuid

from odradek.shares import records as r
from odradek.shares.records import StateBatch as B
from odradek.shares.state import PersistedState, StateWrite, combine, replay, update_value

TOPIC = uuid.uuid4()


def test_higher_delivery_count_wins_not_the_newest():
    assert combine([B(0, 9, 2, 3)], [B(5, 5, 0, 2)], 0) == [B(0, 9, 2, 3)]
    assert combine([B(0, 9, 0, 1)], [B(5, 5, 2, 2)], 0) == [B(0, 4, 0, 1), B(5, 5, 2, 2), B(6, 9, 0, 1)]


def test_equal_counts_the_higher_state_wins():
    assert combine([B(0, 3, 4, 2)], [B(1, 2, 0, 2)], 0) == [B(0, 3, 4, 2)]
    assert combine([B(0, 3, 0, 2)], [B(1, 2, 2, 2)], 0) == [B(0, 0, 0, 2), B(1, 2, 2, 2), B(3, 3, 0, 2)]


def test_clipped_at_the_start_and_adjacent_equal_ranges_joined():
    assert combine([B(0, 4, 2, 1)], [B(5, 9, 2, 1), B(12, 12, 4, 1)], 3) == [B(3, 9, 2, 1), B(12, 12, 4, 1)]
    assert combine([B(0, 4, 2, 1)], [], 5) == []


def test_replay_snapshot_updates_and_tombstone():
    snap_key, upd_key = r.ShareSnapshotKey("g", TOPIC, 1), r.ShareUpdateKey("g", TOPIC, 1)
    snapshot = PersistedState(snapshot_epoch=0, state_epoch=2, start_offset=10, delivery_complete_count=0,
                              create_timestamp=5, write_timestamp=5).snapshot_value()
    write = StateWrite(leader_epoch=1, start_offset=12, delivery_complete_count=1,
                       state_batches=[B(10, 11, 2, 1), B(13, 13, 2, 1), B(14, 15, 0, 1)])
    keep = StateWrite(leader_epoch=-1, start_offset=-1, delivery_complete_count=1, state_batches=[B(14, 14, 4, 1)])
    log = [(snap_key, snapshot), (upd_key, update_value(0, write)), (upd_key, update_value(0, keep))]
    state = replay(log)[("g", TOPIC, 1)]
    assert (state.start_offset, state.leader_epoch, state.state_epoch) == (12, 1, 2)
    assert state.state_batches == [B(13, 13, 2, 1), B(14, 14, 4, 1), B(15, 15, 0, 1)]
    assert replay([*log, (snap_key, None)]) == {}
    assert replay([(upd_key, update_value(0, write))]) == {}  # an update without a snapshot is ignored


def test_an_update_carries_the_writes_batches_combined():
    write = StateWrite(start_offset=5, delivery_complete_count=0,
                       state_batches=[B(3, 6, 0, 1), B(7, 7, 0, 1), B(6, 6, 2, 2)])
    assert update_value(1, write).state_batches == [B(5, 5, 0, 1), B(6, 6, 2, 2), B(7, 7, 0, 1)]
