"""Producer state rebuilt from the log (from a snapshot or from nothing) equals the state the
live path built, for random histories of transactional and idempotent batches and markers."""

from __future__ import annotations

import random

import pytest

from odradek.broker.dataplane.producers import PartitionProducers
from odradek.protocol.records import encode_batch, encode_end_txn_batch, read_batch_header
from odradek.storage import producer_snapshot, txn_index
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.producer_snapshot import SnapshotEntry


def _view(s: PartitionProducers):
    return (sorted(s.snapshot_entries()), list(s.open_txns.items()), list(s.aborted))


def _live_history(log: Log, rng: random.Random, steps: int) -> PartitionProducers:
    live = PartitionProducers()
    seqs: dict[int, int] = {}
    for _ in range(steps):
        pid = rng.randrange(4)
        roll = rng.random()
        if roll < 0.55:
            n = rng.randint(1, 3)
            txn = pid < 3
            data = encode_batch([(b"k%d" % i, b"v") for i in range(n)], producer_id=pid, producer_epoch=0,
                                base_sequence=seqs.get(pid, 0), transactional=txn)
            if not txn and live.in_txn(pid):
                continue
            first, _ = log.append(data)
            live.record(read_batch_header(data), first, -1)
            seqs[pid] = seqs.get(pid, 0) + n
        elif roll < 0.85 and pid < 3:
            commit = rng.random() < 0.5
            offset, _ = log.append(encode_end_txn_batch(commit, producer_id=pid, producer_epoch=0,
                                                        coordinator_epoch=1, timestamp=1000))
            aborted = live.complete(pid, 0, 1, commit, offset, 1000)
            if aborted is not None:
                log.append_aborted_txn(aborted)
        elif roll < 0.95:
            txn_index.sync(log.directory, log.active_segment.base_offset)
            producer_snapshot.write(log.directory, log.log_end_offset, live.snapshot_entries())
        else:
            log.append(encode_batch([(b"plain", b"v")]))
    return live


@pytest.mark.parametrize("seed", range(12))
def test_rebuild_equals_the_live_state(tmp_path, seed):
    rng = random.Random(seed)
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=600, index_interval_bytes=100))
    try:
        live = _live_history(log, rng, 120)
        from_snapshot = PartitionProducers()
        from_snapshot.rebuild(log)
        assert _view(from_snapshot) == _view(live)
        for o in producer_snapshot.offsets(log.directory):
            producer_snapshot.snapshot_path(log.directory, o).unlink()
        for seg in log.segments:  # a full replay rewrites every index
            txn_index.write_entries(log.directory, seg.base_offset, [])
        full = PartitionProducers()
        full.rebuild(log)
        assert _view(full) == _view(live)
        assert [e for seg in log.segments for e in txn_index.read_entries(log.directory, seg.base_offset)] \
            == live.aborted
    finally:
        log.close()


def test_snapshot_bytes_are_kafkas(tmp_path):
    entry = SnapshotEntry(7, 2, 41, 100, 3, 1234, 5, 90)
    data = producer_snapshot.encode([entry])
    # int16 version 1, uint32 crc, int32 count, then the 46-byte entry
    assert data[:2] == b"\x00\x01" and data[6:10] == b"\x00\x00\x00\x01" and len(data) == 10 + 46
    assert producer_snapshot.decode(data) == [entry]
    assert producer_snapshot.decode(data[:-1]) is None
    assert producer_snapshot.decode(data[:20] + bytes([data[20] ^ 1]) + data[21:]) is None  # CRC
    producer_snapshot.write(tmp_path, 50, [entry])
    producer_snapshot.write(tmp_path, 80, [])
    (tmp_path / "00000000000000000090.snapshot").write_bytes(b"torn")
    assert producer_snapshot.latest(tmp_path, 85) == (80, [])  # 90 is past the log end: deleted
    assert producer_snapshot.offsets(tmp_path) == [50, 80]
    (tmp_path / "00000000000000000080.snapshot").write_bytes(b"torn")
    assert producer_snapshot.latest(tmp_path, 85) == (50, [entry])  # a torn one is skipped


def test_a_snapshot_older_than_the_first_segment_is_not_used(tmp_path):
    """Retention deleted the segments after it (and the marker of a transaction it holds open):
    replaying what is left must not leave that transaction open forever."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200, index_interval_bytes=50, retention_ms=1))
    try:
        live = PartitionProducers()
        data = encode_batch([(b"k", b"v")], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True,
                            base_timestamp=1)
        live.record(read_batch_header(data), log.append(data)[0], -1)
        producer_snapshot.write(log.directory, log.log_end_offset, live.snapshot_entries())  # txn open at 0
        offset, _ = log.append(encode_end_txn_batch(True, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                                    timestamp=1))
        for _ in range(6):
            log.append(encode_batch([(b"x", b"y" * 50)], base_timestamp=1))
        log.roll()
        log.delete_old_segments(now_ms=10_000)
        assert log.segments[0].base_offset > offset  # the transaction and its marker are gone
        rebuilt = PartitionProducers()
        rebuilt.rebuild(log)
        assert rebuilt.open_txns == {}
        assert rebuilt.last_stable_offset(log.log_end_offset) == log.log_end_offset
    finally:
        log.close()
