"""Log behaviour users rely on: offsets, reads, rolls, index lookups, retention, flush policy."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from odradek.protocol.records import (
    CorruptRecordError,
    crc_ok,
    encode_batch,
    iter_batch_headers,
    iter_batches,
    read_batch_header,
)
from odradek.storage import segment as segment_mod
from odradek.storage.config import FsyncMode, LogConfig
from odradek.storage.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from odradek.storage.fsync_engine import ThreadEngine, engine_for, use_engine
from odradek.storage.index import decode_entries
from odradek.storage.log import Log


class ManualClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(n: int = 1, *, key: bytes = b"k", size: int = 10, ts: int | None = None, **kw) -> bytes:
    return encode_batch([(key + b"%d" % i, b"x" * size) for i in range(n)], base_timestamp=ts, **kw)


def records_of(data: bytes) -> list:
    return [r for _h, rs in iter_batches(data) for r in rs]


def test_append_assigns_offsets_and_keeps_crc(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    b = batch(3, producer_id=7, producer_epoch=2, base_sequence=5, partition_leader_epoch=-1)
    assert log.append(b) == (0, 2)
    assert log.append(batch(2)) == (3, 4)
    assert log.log_end_offset == 5
    data = log.read(0, 1 << 20)
    heads = list(iter_batch_headers(data, validate=True))
    assert [h.base_offset for _p, h in heads] == [0, 3]
    h0 = heads[0][1]
    assert (h0.producer_id, h0.producer_epoch, h0.base_sequence, h0.partition_leader_epoch) == (7, 2, 5, 0)
    assert [r.offset for r in records_of(data)] == [0, 1, 2, 3, 4]
    assert (tmp_path / "t-0" / "00000000000000000000.log").exists()


def test_append_record_set_of_many_batches(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    log.append(batch(1))
    assert log.append(batch(2) + batch(3) + batch(1)) == (1, 6)
    assert [h.base_offset for _p, h in iter_batch_headers(log.read(0, 1 << 20))] == [0, 1, 3, 6]


def test_append_rejects_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(max_message_bytes=500))
    good = batch(1)
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(good + bytes(bad))
    with pytest.raises(CorruptRecordError):
        log.append(good[:-3])
    with pytest.raises(RecordBatchTooLargeError):
        log.append(batch(1, size=600))
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_read_returns_whole_batches_and_first_batch_whole(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    sizes = []
    for _ in range(5):
        b = batch(2, size=100)
        sizes.append(len(b))
        log.append(b)
    data = log.read(0, sizes[0] + sizes[1] + 10)
    assert len(data) == sizes[0] + sizes[1]
    # KIP-74: the first batch comes whole even if larger than max_bytes
    assert len(log.read(4, 1)) == sizes[2]
    # an offset inside a batch returns that batch
    assert read_batch_header(log.read(5, 1)).base_offset == 4
    assert log.read(10, 100) == b""
    assert records_of(log.read(0, 1 << 20, max_offset=4))[-1].offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_roll_by_size_and_index_lookups(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=64 * 1024)
    log = Log.open(tmp_path / "t-0", cfg)
    for i in range(400):
        log.append(batch(1 + i % 3, size=300))
    segs = log.segments
    assert len(segs) > 4
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in segs]
    for s in segs[:-1]:
        assert s.size <= cfg.segment_bytes
        entries = decode_entries((tmp_path / "t-0" / f"{s.base_offset:020d}.index").read_bytes())
        assert len(entries) >= s.size // 4096 - 2  # sparse: one entry per ~4 KiB
    # every offset reads back the batch that holds it
    for off in range(0, log.log_end_offset, 7):
        h = read_batch_header(log.read(off, 1))
        assert h.base_offset <= off <= h.last_offset
    # reads span segment boundaries
    assert [r.offset for r in records_of(log.read(0, 1 << 30))] == list(range(log.log_end_offset))


def test_roll_by_time(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000), clock=clock)
    log.append(batch(1, ts=clock.now))
    clock.now += 500
    log.append(batch(1, ts=clock.now))
    assert len(log.segments) == 1
    clock.now += 1000
    log.append(batch(1, ts=clock.now))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_retention_by_time_and_bytes(tmp_path: Path) -> None:
    clock = ManualClock()
    cfg = LogConfig(segment_bytes=2000, retention_ms=10_000)
    log = Log.open(tmp_path / "t-0", cfg, clock=clock)
    for _ in range(30):
        log.append(batch(1, size=400, ts=clock.now))
        clock.now += 1000
    n = len(log.segments)
    assert n > 5
    freed = log.delete_old_segments()
    assert freed > 0
    # all closed segments whose newest record is older than 10 s are gone
    assert all(clock.now - s.compute_max_timestamp() <= 10_000 for s in log.segments[:-1])
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    log.config = LogConfig(segment_bytes=2000, retention_ms=-1, retention_bytes=2500)
    log.delete_old_segments()
    assert log.size_bytes - log.segments[0].size < 2500
    assert len(log.segments) >= 1


def test_truncate_to(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1000))
    for _ in range(20):
        log.append(batch(2, size=100))
    log.truncate_to(21)  # inside the batch [20, 21]: the whole batch goes
    assert log.log_end_offset == 20
    assert records_of(log.read(0, 1 << 20))[-1].offset == 19
    assert log.append(batch(1)) == (20, 20)
    log.close()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1000))
    assert log.log_end_offset == 21
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.append(batch(1)) == (0, 0)


async def test_delete_removes_directory(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    log.append(batch(1))
    await log.delete()
    assert not any(tmp_path.iterdir())


def test_log_append_time(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    log.append(batch(2, ts=5))
    data = log.read(0, 1000)
    h = read_batch_header(data)
    assert h.log_append_time and h.max_timestamp == clock.now and crc_ok(data, 0, h)
    assert [r.timestamp for r in records_of(data)] == [clock.now, clock.now]


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=500))
    for i in range(20):
        log.append(batch(2, ts=1000 + 10 * i))
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1055) == (12, 1060)
    assert log.offset_for_timestamp(1190) == (38, 1190)
    assert log.offset_for_timestamp(5000) is None
    assert log.max_timestamp_offset() == (1190, 38)


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=3000)
    log = Log.open(tmp_path / "t-0", cfg)
    for i in range(50):
        log.append(batch(1 + i % 4, size=50))
    before = log.read(0, 1 << 30)
    end = log.log_end_offset
    log.close()
    assert log.recovery_point == end
    for rp in (0, end):
        log = Log.open(tmp_path / "t-0", cfg, recovery_point=rp)
        assert log.log_end_offset == end and log.read(0, 1 << 30) == before
        log.close()
    log = Log.open(tmp_path / "t-0", cfg, recovery_point=end)
    assert log.append(batch(1)) == (end, end)


@pytest.mark.parametrize("fail_in", ["log", "index"])
def test_a_failed_write_leaves_both_files_as_they_were(tmp_path: Path, monkeypatch, fail_in: str) -> None:
    import odradek.storage.index as index_mod

    cfg = LogConfig(index_interval_bytes=1)  # an index entry for every batch
    log = Log.open(tmp_path / "t-0", cfg)
    log.append(batch(2))
    log.append(batch(1))
    before = log.read(0, 1 << 20)
    real = segment_mod.write_all if fail_in == "log" else index_mod.write_all

    def disk_full(fd: int, data) -> None:
        os.write(fd, bytes(data[:3]))  # part of it got out
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_mod if fail_in == "log" else index_mod, "write_all", disk_full)
    with pytest.raises(OSError):
        log.append(batch(3) + batch(1))
    monkeypatch.setattr(segment_mod if fail_in == "log" else index_mod, "write_all", real)
    assert log.log_end_offset == 3 and log.read(0, 1 << 20) == before
    assert log.append(batch(2)) == (3, 4)  # the next append lands where the file ends
    after = log.read(0, 1 << 20)
    log.close()
    log = Log.open(tmp_path / "t-0", cfg, recovery_point=0)  # recovery re-reads both files
    assert log.read(0, 1 << 20) == after
    segment = log.active_segment
    for offset in range(5):  # every index entry still names the batch at its position
        entry, position = segment.index.lookup(offset)
        if position:
            assert read_batch_header(segment.read(position, 100)).last_offset == entry
    log.close()


def test_config_names() -> None:
    cfg = LogConfig.from_topic_config({"cleanup.policy": "compact,delete", "segment.bytes": "1024",
                                       "min.cleanable.dirty.ratio": "0.25", "fsync.mode": "always",
                                       "compression.type": "zstd"})
    assert cfg.compact and cfg.delete and cfg.segment_bytes == 1024 and cfg.fsync is FsyncMode.ALWAYS
    assert cfg.min_cleanable_dirty_ratio == 0.25
    b = LogConfig.from_broker_config({"log.retention.hours": "2", "log.flush.interval.messages": "10",
                                      "log.segment.bytes": "4096"})
    assert (b.retention_ms, b.flush_messages, b.segment_bytes) == (7_200_000, 10, 4096)
    assert LogConfig.from_broker_config({"log.retention.hours": "2", "log.retention.ms": "5"}).retention_ms == 5
    assert LogConfig.from_topic_config(cfg.to_topic_config()) == cfg
    with pytest.raises(ValueError, match="retention.ms"):
        LogConfig.from_topic_config({"retention.ms": "soon"})
    with pytest.raises(ValueError, match="cleanup.policy"):
        LogConfig.from_topic_config({"cleanup.policy": "shred"})


# --- flush policy ----------------------------------------------------------------


@pytest.fixture
async def fsync_counter(monkeypatch: pytest.MonkeyPatch):
    """Every fd fsynced, whichever way: the loop's fsync engine or a blocking flush."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    loop = asyncio.get_running_loop()
    inner = engine_for(loop)
    if isinstance(inner, ThreadEngine):  # its fsyncs go through os.fsync, counted there
        monkeypatch.setattr(segment_mod.os, "fsync", counting)
        yield calls
        return

    class Counting:
        name = inner.name

        def submit(self, fds, callback) -> None:
            calls.extend(fds)
            inner.submit(fds, callback)

    monkeypatch.setattr(segment_mod.os, "fsync", counting)
    use_engine(loop, Counting())
    try:
        yield calls
    finally:
        use_engine(loop, inner)


async def test_fsync_always_group_commit(tmp_path: Path, fsync_counter: list[int]) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(fsync=FsyncMode.ALWAYS))
    fsync_counter.clear()
    results = await asyncio.gather(*(log.append_async(batch(1)) for _ in range(200)))
    assert sorted(r[0] for r in results) == list(range(200))
    assert log.recovery_point == 200
    rounds = len(fsync_counter) // 2  # each round fsyncs the .log and the .index
    assert 1 <= rounds <= 10, rounds
    await log.aclose()


async def test_fsync_never_does_not_fsync_appends(tmp_path: Path, fsync_counter: list[int]) -> None:
    log = Log.open(tmp_path / "t-0")
    fsync_counter.clear()
    for _ in range(50):
        await log.append_async(batch(1))
    assert fsync_counter == [] and log.recovery_point == 0
    await log.sync()
    assert log.recovery_point == 50 and fsync_counter
    await log.aclose()


async def test_flush_messages_and_interval(tmp_path: Path, fsync_counter: list[int]) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", LogConfig(flush_messages=10), clock=clock)
    for _ in range(9):
        await log.append_async(batch(1))
    assert log.recovery_point == 0
    await log.append_async(batch(1))
    assert log.recovery_point == 10
    log2 = Log.open(tmp_path / "u-0", LogConfig(fsync=FsyncMode.INTERVAL, flush_ms=100), clock=clock)
    await log2.append_async(batch(1))
    assert not log2.maybe_flush()
    clock.now += 100
    assert log2.maybe_flush()
    await log2.durability.drain()
    assert log2.recovery_point == 1
    await log.aclose()
    await log2.aclose()


async def test_roll_flushes_closed_segment_in_background(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1000))
    for _ in range(10):
        log.append(batch(1, size=300))
    await log.durability.drain()
    assert log.recovery_point >= log.segments[-1].base_offset > 0
    await log.aclose()


def test_append_records_assigns_offsets_and_reads_back(tmp_path):
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=clock)
    log.append(batch(3))
    first, last = log.append_records([(b"a", b"1"), (b"b", None)], 1234)
    assert (first, last) == (3, 4)
    got = records_of(log.read(3, 1 << 20))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [(3, 1234, b"a", b"1"), (4, 1234, b"b", None)]
    assert log.log_end_offset == 5
    log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig(), clock=clock)  # recovery accepts what it wrote
    assert reopened.log_end_offset == 5
    reopened.close()


def test_append_records_honours_log_append_time_and_size_limit(tmp_path):
    clock = ManualClock()
    config = LogConfig(message_timestamp_type="LogAppendTime", max_message_bytes=200)
    log = Log.open(tmp_path / "t-0", config, clock=clock)
    log.append_records([(b"k", b"v")], 5)
    (rec,) = records_of(log.read(0, 1 << 20))
    assert rec.timestamp == clock.now
    with pytest.raises(RecordBatchTooLargeError):
        log.append_records([(b"k", b"v" * 300)], 5)
    assert log.log_end_offset == 1
    log.close()


def test_a_delete_closes_the_files_only_after_the_reads_in_flight(tmp_path):
    """A read pinned before the delete keeps valid descriptors; reads after it are refused."""
    from odradek.storage.errors import LogClosedError

    log = Log.open(tmp_path / "pinned-0", LogConfig(segment_bytes=200))
    for _ in range(5):
        log.append(batch(2))
    with log.reading() as segments:
        fds = [s.fd for s in segments]
        log.delete_blocking()
        assert not (tmp_path / "pinned-0").exists()
        for fd in fds:
            os.fstat(fd)  # still this segment's: not closed, not reused
        assert len(records_of(b"".join(s.read(0, s.size) for s in segments))) == 10
        with pytest.raises(LogClosedError):
            log.read(0, 1 << 20)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_read_span_gives_the_offset_after_the_last_batch_read(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "span-0", LogConfig(segment_bytes=300, index_interval_bytes=50))
    try:
        for i in range(12):
            log.append(encode_batch([(b"k", b"v" * 20)] * (1 + i % 3)))
        assert len(log.segments) > 2
        end = log.log_end_offset
        data, nxt = log.read_span(0, 1 << 20)
        assert data == log.read(0, 1 << 20) and nxt == end  # across every segment
        data, nxt = log.read_span(0, 1 << 20, max_offset=7)
        assert [h.base_offset for _p, h in iter_batch_headers(data)][-1] < 7 <= nxt
        assert nxt == max(h.base_offset + h.last_offset_delta + 1 for _p, h in iter_batch_headers(data))
        assert log.read_span(end, 100) == (b"", end)
        data, nxt = log.read_span(3, 1)  # one batch, whole, past the limit (KIP-74)
        assert nxt == max(h.base_offset + h.last_offset_delta + 1 for _p, h in iter_batch_headers(data))
    finally:
        log.close()
