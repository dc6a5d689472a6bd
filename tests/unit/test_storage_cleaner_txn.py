"""Compaction of transactional data, as Kafka's LogCleaner: aborted data goes (and never hides a
committed value), markers stay while their transaction's data does and then go like tombstones,
nothing at or past the last stable offset is touched."""

from __future__ import annotations

import os

from odradek.protocol.records import DELETE_HORIZON_MASK, encode_batch, encode_end_txn_batch, iter_batches
from odradek.storage import txn_index
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.txn_index import AbortedTxn

DAY = 86_400_000
NOW = 1_700_000_000_000


def cfg() -> LogConfig:
    return LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=100_000, index_interval_bytes=200,
                     delete_retention_ms=DAY)


def txn(log: Log, pid: int, seq: int, pairs) -> int:
    first, _ = log.append(encode_batch(pairs, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                       transactional=True))
    return first


def end(log: Log, pid: int, commit: bool, first: int) -> int:
    offset, _ = log.append(encode_end_txn_batch(commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0))
    if not commit:
        log.append_aborted_txn(AbortedTxn(pid, first, offset, offset + 1))
    return offset


def batches(log: Log):
    out = []
    for seg in log.segments:
        for h, recs in iter_batches(seg.read(0, seg.size), verify_crc=True):
            out.append((h, recs))
    return out


def test_aborted_data_is_removed_and_never_hides_the_committed_value(tmp_path):
    log = Log.open(tmp_path / "c-0", cfg())
    try:
        first = txn(log, 1, 0, [(b"a", b"committed")])  # 0
        end(log, 1, True, first)  # 1
        first = txn(log, 2, 0, [(b"a", b"aborted"), (b"b", b"aborted")])  # 2-3
        abort_at = end(log, 2, False, first)  # 4
        log.append(encode_batch([(b"c", b"plain")]))  # 5
        log.roll()
        log.append(encode_batch([(b"d", b"tail")]))

        assert log.clean(NOW, stable_offset=log.log_end_offset) is not None
        kept = batches(log)
        values = {r.key: r.value for h, recs in kept if not h.is_control for r in recs}
        assert values == {b"a": b"committed", b"c": b"plain", b"d": b"tail"}
        markers = [(h.base_offset, h.producer_id) for h, _ in kept if h.is_control]
        assert markers == [(1, 1), (abort_at, 2)]  # both kept: their data was seen in this pass
        # the ABORT marker's index entry is carried to the cleaned segment
        assert txn_index.read_entries(log.directory, 0) == [AbortedTxn(2, 2, 4, 5)]

        # next pass: no data of either transaction is left, so the markers get a delete horizon
        log.cleaner_checkpoint = 0
        log.clean(NOW, stable_offset=log.log_end_offset)
        horizons = [bool(h.attributes & DELETE_HORIZON_MASK) for h, _ in batches(log) if h.is_control]
        assert horizons == [False, True]  # the COMMIT marker's data (a) is still there
        assert txn_index.read_entries(log.directory, 0) == []
        # after delete.retention.ms the ABORT marker goes
        log.clean(NOW + DAY + 1, stable_offset=log.log_end_offset)
        assert [h.base_offset for h, _ in batches(log) if h.is_control] == [1]
        assert [r.offset for h, recs in batches(log) for r in recs if not h.is_control] == [0, 5, 6]
    finally:
        log.close()


def test_nothing_at_or_past_the_last_stable_offset_is_cleaned(tmp_path):
    log = Log.open(tmp_path / "c-0", cfg())
    try:
        log.append(encode_batch([(b"a", b"old")]))  # 0
        log.append(encode_batch([(b"a", b"new")]))  # 1
        log.roll()
        open_first = txn(log, 3, 0, [(b"a", b"pending")])  # 2, open
        log.roll()
        log.append(encode_batch([(b"z", b"z")]))
        # the open transaction bounds the pass: only the first segment may be cleaned
        log.clean(NOW, stable_offset=open_first)
        values = [(r.offset, r.value) for _h, recs in batches(log) for r in recs]
        assert values == [(1, b"new"), (2, b"pending"), (3, b"z")]
    finally:
        log.close()


def test_abort_marker_without_an_index_entry_still_drops_its_data(tmp_path):
    """A writer that kept no ``.txnindex`` (or lost it): the aborted value must not hide the
    committed one in the key map, or compaction would leave only data that replay drops."""
    log = Log.open(tmp_path / "c-0", cfg())
    try:
        log.append(encode_batch([(b"a", b"good")]))  # 0
        txn(log, 2, 0, [(b"a", b"bad")])  # 1
        log.append(encode_end_txn_batch(False, producer_id=2, producer_epoch=0, coordinator_epoch=0))  # 2, no entry
        log.roll()
        log.append(encode_batch([(b"z", b"tail")]))
        log.clean(NOW, stable_offset=log.log_end_offset)
        values = [(r.offset, r.value) for h, recs in batches(log) if not h.is_control for r in recs]
        assert values == [(0, b"good"), (3, b"tail")]
        assert [h.base_offset for h, _ in batches(log) if h.is_control] == [2]  # kept: its data was here
    finally:
        log.close()


def test_recovery_cutting_a_torn_tail_drops_its_index_entries_and_snapshots(tmp_path):
    from odradek.storage import producer_snapshot
    from odradek.storage.files import log_path

    log = Log.open(tmp_path / "c-0", cfg())
    first = txn(log, 1, 0, [(b"a", b"x")])  # 0
    end(log, 1, False, first)  # 1: ABORT, indexed
    producer_snapshot.write(log.directory, 2, [])
    log.close()
    path = log_path(tmp_path / "c-0", 0)
    os.truncate(path, path.stat().st_size - 5)  # the marker's batch is torn
    log = Log.open(tmp_path / "c-0", cfg())
    try:
        assert log.log_end_offset == 1
        assert txn_index.read_entries(log.directory, 0) == []
        assert producer_snapshot.offsets(log.directory) == []
    finally:
        log.close()


def test_offline_compaction_stops_at_an_open_transaction(tmp_path):
    """``odradek compact`` runs without the broker's producer state: the log itself says where
    the oldest open transaction starts, and nothing from there on is cleaned."""
    from odradek.pipeline.compact import compact_partition
    from odradek.storage.cleaner import first_unstable_offset

    log = Log.open(tmp_path / "c-0", cfg())
    log.append(encode_batch([(b"a", b"old")]))  # 0
    log.roll()
    txn(log, 1, 0, [(b"a", b"pending")])  # 1: open
    log.roll()
    log.append(encode_batch([(b"a", b"newer")]))  # 2
    log.roll()
    log.append(encode_batch([(b"z", b"tail")]))  # 3
    assert first_unstable_offset(log) == 1
    log.close()
    compact_partition(tmp_path / "c-0", cfg(), NOW)
    log = Log.open(tmp_path / "c-0", cfg())
    try:
        offsets = [r.offset for _h, recs in batches(log) for r in recs]
        assert offsets == [0, 1, 2, 3]  # only [0, 1) was cleanable, and it holds a's only value there
    finally:
        log.close()
