"""Compaction: newest value per key survives, offsets never move, crashes at any step lose nothing."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from odradek.protocol.records import (
    DELETE_HORIZON_MASK,
    Record,
    encode_batch,
    iter_batch_headers,
    iter_batches,
)
from odradek.storage.cleaner import clean_log
from odradek.storage.config import LogConfig
from odradek.storage.files import FileOps, SimulatedCrash
from odradek.storage.log import Log

DAY = 86_400_000


class ManualClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compact_cfg(**kw) -> LogConfig:
    base = dict(cleanup_policy=frozenset({"compact"}), segment_bytes=2000, index_interval_bytes=200)
    base.update(kw)
    return LogConfig(**base)


def all_records(log: Log) -> list[Record]:
    out: list[Record] = []
    pos = log.log_start_offset
    while pos < log.log_end_offset:
        data = log.read(pos, 1 << 20)
        if not data:
            break
        for h, recs in iter_batches(data, verify_crc=True):
            out.extend(recs)
            pos = h.last_offset + 1
    return out


def latest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for off, k, v in records:
        if k is not None:
            out[k] = (off, v)
    return out


def fill(log: Log, n: int, keys: int = 7, seed: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    written = []
    for i in range(n):
        recs = []
        for j in range(1 + (i + seed) % 3):
            k = b"key-%d" % ((i * 3 + j + seed) % keys)
            v = None if (i + j + seed) % 11 == 0 else b"val-%d-%d" % (i, j)
            recs.append((k, v))
        if i % 13 == 5:
            recs.append((None, b"keyless"))
        base, _last = log.append(encode_batch(recs))
        written.extend((base + idx, k, v) for idx, (k, v) in enumerate(recs))
    return written


def assert_compacted_correctly(log: Log, written: list[tuple[int, bytes | None, bytes | None]],
                               tombstones_may_go: bool = False) -> None:
    by_offset = {o: (k, v) for o, k, v in written}
    recs = all_records(log)
    offsets = [r.offset for r in recs]
    assert offsets == sorted(set(offsets)), "order or uniqueness broken"
    for r in recs:
        assert by_offset[r.offset] == (r.key, r.value), "a record changed"
    present = {r.offset for r in recs}
    for k, (off, v) in latest(written).items():
        if v is None and tombstones_may_go:
            assert all(r.key != k for r in recs if r.offset < off)
            continue
        assert off in present, f"newest record of {k!r} at {off} is gone"
    # the active segment is untouched
    active = log.active_segment.base_offset
    assert [o for o, _k, _v in written if o >= active] == [o for o in offsets if o >= active]


def test_keeps_newest_per_key_and_offsets(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "c-0", compact_cfg())
    written = fill(log, 300)
    before_segments = len(log.segments)
    stats = log.clean()
    assert stats is not None and stats.records_kept < stats.records_in
    assert_compacted_correctly(log, written)
    recs = all_records(log)
    cleaned = [r for r in recs if r.offset < log.active_segment.base_offset]
    assert all(r.key is not None for r in cleaned), "keyless records must go"
    keys = [r.key for r in cleaned]
    assert len(keys) == len(set(keys)), "one record per key in the cleaned part"
    assert len(log.segments) < before_segments, "small cleaned segments are merged"
    # batches keep their base offset and lastOffsetDelta; CRCs valid
    data = log.read(0, 1 << 30)
    assert list(iter_batch_headers(data, validate=True))
    # reopen gives the same
    log.close()
    log = Log.open(tmp_path / "c-0", compact_cfg())
    assert_compacted_correctly(log, written)
    assert not [p for p in (tmp_path / "c-0").iterdir() if p.suffix not in (".log", ".index")]


def test_repeated_passes_and_appends(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "c-0", compact_cfg())
    written: list = []
    for round_ in range(5):
        written += fill(log, 80, seed=round_)
        log.clean()
        assert_compacted_correctly(log, written)


def test_tombstones_get_a_horizon_then_go(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "c-0", compact_cfg(delete_retention_ms=DAY), clock=clock)
    log.append(encode_batch([(b"a", b"1"), (b"b", b"1")]))
    log.append(encode_batch([(b"a", None)]))
    log.roll()
    log.append(encode_batch([(b"c", b"1")]))
    log.clean()
    recs = {r.key: r for r in all_records(log)}
    assert recs[b"a"].value is None and recs[b"b"].value == b"1"
    heads = [h for _p, h in iter_batch_headers(log.read(0, 1 << 20))]
    tomb_batch = next(h for h in heads if h.base_offset == 2)
    assert tomb_batch.attributes & DELETE_HORIZON_MASK and tomb_batch.base_timestamp == clock.now + DAY
    clock.now += DAY - 1
    log.clean()
    assert b"a" in {r.key for r in all_records(log)}
    clock.now += 1
    log.clean()
    keys = {r.key for r in all_records(log)}
    assert keys == {b"b", b"c"}


def test_never_touches_active_segment_or_non_compacted_logs(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "c-0", compact_cfg(segment_bytes=1 << 20))
    written = fill(log, 50)
    assert log.clean() is None  # one segment only: it is the active one
    assert [r.offset for r in all_records(log)] == [o for o, _k, _v in written]
    plain = Log.open(tmp_path / "d-0", LogConfig(segment_bytes=500))
    fill(plain, 50)
    assert plain.clean() is None


def test_dirty_ratio(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "c-0", compact_cfg(min_cleanable_dirty_ratio=0.5))
    fill(log, 200)
    assert log.dirty_ratio() == 1.0 and log.needs_cleaning()
    log.clean()
    assert log.dirty_ratio() == 0.0 and not log.needs_cleaning()
    fill(log, 5)
    assert not log.needs_cleaning() or log.dirty_ratio() >= 0.5


def count_ops(tmp_path: Path) -> int:
    d = tmp_path / "probe" / "c-0"
    log = Log.open(d, compact_cfg())
    fill(log, 300)
    ops = FileOps()
    clean_log(log, log.clock(), ops=ops)
    log.close()
    shutil.rmtree(d.parent)
    return ops.count


def test_crash_at_every_step_of_compaction_loses_nothing(tmp_path: Path) -> None:
    total = count_ops(tmp_path)
    assert total > 10
    for n in range(total + 1):
        d = tmp_path / f"run{n}" / "c-0"
        log = Log.open(d, compact_cfg())
        written = fill(log, 300)
        end = log.log_end_offset
        try:
            clean_log(log, log.clock(), ops=FileOps(crash_after=n))
        except SimulatedCrash:
            pass
        # the process "dies": drop the Log without closing it and reopen from disk
        del log
        reopened = Log.open(d, compact_cfg())
        assert reopened.log_end_offset == end
        assert_compacted_correctly(reopened, written)
        assert not [p.name for p in d.iterdir() if p.suffix not in (".log", ".index")]
        # and a later pass finishes the job
        reopened.clean()
        assert_compacted_correctly(reopened, written)
        reopened.close()
        shutil.rmtree(d.parent)


async def test_log_stays_readable_and_appendable_during_compaction(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "c-0", compact_cfg(segment_bytes=20_000))
    written = fill(log, 3000)
    task = asyncio.ensure_future(log.compact())
    appended = 0
    reads = 0
    while not task.done():
        base, _ = log.append(encode_batch([(b"key-1", b"during-%d" % appended)]))
        written.append((base, b"key-1", b"during-%d" % appended))
        appended += 1
        data = log.read(log.log_start_offset, 64 * 1024)
        assert list(iter_batch_headers(data, validate=True))
        reads += 1
        await asyncio.sleep(0)
    stats = task.result()
    assert stats is not None and appended > 0 and reads > 0
    assert_compacted_correctly(log, written)
    await log.aclose()


@pytest.mark.slow
def test_compaction_of_many_segments_with_lag(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "c-0", compact_cfg(min_compaction_lag_ms=10_000), clock=clock)
    written = []
    for i in range(400):
        base, _ = log.append(encode_batch([(b"k%d" % (i % 17), b"v%d" % i)], base_timestamp=clock.now))
        written.append((base, b"k%d" % (i % 17), b"v%d" % i))
        clock.now += 100
    stats = log.clean()
    assert stats is not None
    # segments younger than the lag are left dirty
    assert log.cleaner_checkpoint <= 400 - 10_000 // 100 + 20
    assert_compacted_correctly(log, written)
