"""LogManager: log dirs, partition create/delete, checkpoints, background retention and compaction."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from odradek.protocol.records import encode_batch
from odradek.storage.checkpoint import read_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import OFFSETS_TOPIC, LogManager


def batch(key: bytes, value: bytes | None = b"v" * 50, ts: int | None = None) -> bytes:
    return encode_batch([(key, value)], base_timestamp=ts)


async def test_create_reopen_delete(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    mgr = LogManager(dirs, LogConfig(segment_bytes=1000))
    await mgr.start()
    orders = mgr.create("orders", 0)
    other = mgr.create("orders", 1, log_dir=dirs[1])
    offsets = mgr.create(OFFSETS_TOPIC, 3)
    assert orders.directory == dirs[0] / "orders-0" and other.directory == dirs[1] / "orders-1"
    assert offsets.config.compact and offsets.config.segment_bytes == 100 * 1024 * 1024
    assert mgr.create("orders", 0) is orders
    for i in range(30):
        orders.append(batch(b"k%d" % i))
    other.append(batch(b"x"))
    await mgr.close()
    rp = read_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")
    assert rp[("orders", 0)] == 30 and rp[(OFFSETS_TOPIC, 3)] == 0
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text().startswith("0\n2\n")

    mgr = LogManager(dirs, LogConfig(segment_bytes=1000))
    await mgr.start()
    assert set(mgr.logs()) == {("orders", 0), ("orders", 1), (OFFSETS_TOPIC, 3)}
    log = mgr.get("orders", 0)
    assert log is not None and log.log_end_offset == 30 and log.recovery_point == 30
    assert await mgr.delete("orders", 1)
    assert not (dirs[1] / "orders-1").exists() and mgr.get("orders", 1) is None
    await mgr.close()


def test_same_partition_in_two_dirs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a" / "t-0").mkdir(parents=True)
    (tmp_path / "b" / "t-0").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="t-0"):
        LogManager([tmp_path / "a", tmp_path / "b"]).open()


def test_leftover_delete_dirs_are_removed(tmp_path: Path) -> None:
    (tmp_path / "a" / "t-0.0123abc-delete").mkdir(parents=True)
    mgr = LogManager([tmp_path / "a"])
    mgr.open()
    assert not (tmp_path / "a" / "t-0.0123abc-delete").exists() and mgr.logs() == {}
    mgr.close_blocking()


async def test_background_compaction_and_retention(tmp_path: Path) -> None:
    now = [1_700_000_000_000]

    def clock() -> int:
        return now[0]

    def topic_config(topic: str) -> LogConfig | None:
        if topic == "compacted":
            return LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=1000)
        return LogConfig(segment_bytes=1000, retention_ms=60_000)

    mgr = LogManager([tmp_path], topic_config=topic_config, clock=clock, retention_check_interval_ms=10,
                     cleaner_backoff_ms=10, flush_check_interval_ms=10, checkpoint_interval_ms=10)
    await mgr.start()
    await asyncio.sleep(0.05)  # let the scheduler take its first reading of the clock
    c = mgr.create("compacted", 0)
    d = mgr.create("deleted", 0)
    for i in range(200):
        c.append(batch(b"k%d" % (i % 3)))
        d.append(batch(b"k", ts=now[0]))
    segs_before = len(c.segments)
    now[0] += 120_000
    checkpoint = tmp_path / "cleaner-offset-checkpoint"
    for _ in range(300):
        await asyncio.sleep(0.01)
        if (len(c.segments) < segs_before and len(d.segments) == 1
                and read_checkpoint(checkpoint).get(("compacted", 0), 0) > 0):
            break
    assert len(c.segments) < segs_before, "the cleaner did not run"
    assert len(d.segments) == 1 and d.log_start_offset == d.active_segment.base_offset
    assert read_checkpoint(checkpoint)[("compacted", 0)] == c.active_segment.base_offset
    await mgr.close()


async def test_compaction_switched_off_keeps_gapped_log_after_crash(tmp_path: Path) -> None:
    """A log compacted once has offset gaps; with compaction switched off (AlterConfigs) a recovery
    after a crash (recovery point behind) must not take the first gap for a lost tail."""
    from odradek.storage.checkpoint import RECOVERY_POINT_FILE, write_checkpoint

    compact = LogConfig(segment_bytes=300, cleanup_policy=frozenset({"compact"}), min_cleanable_dirty_ratio=0.0)
    configs = {"t": compact}
    mgr = LogManager([tmp_path], LogConfig(segment_bytes=300), topic_config=configs.get)
    await mgr.start()
    log = mgr.create("t", 0)
    for i in range(40):
        log.append(batch(b"k%d" % (i % 4)))
    assert await mgr.run_cleaner(force=True) == 1
    kept = [r.offset for b in _batches(log) for r in b]
    assert len(kept) < 40 and kept[-1] == 39
    configs["t"] = LogConfig(segment_bytes=300)  # compaction off again
    mgr.update_config("t", configs["t"])
    await mgr.close()
    write_checkpoint(tmp_path / RECOVERY_POINT_FILE, {("t", 0): 0})  # as after a crash: nothing vouched for

    mgr = LogManager([tmp_path], LogConfig(segment_bytes=300), topic_config=configs.get)
    await mgr.start()
    log = mgr.get("t", 0)
    assert [r.offset for b in _batches(log) for r in b] == kept and log.log_end_offset == 40
    await mgr.close()


def _batches(log):
    from odradek.protocol.records import iter_records

    return [list(iter_records(log.read(0, 1 << 20)))]


async def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path: Path) -> None:
    """LogManager.nextLogDirs: each new partition to the emptiest dir, ties to the first listed;
    a batch of new partitions spreads as if placed one by one."""
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    mgr = LogManager(dirs, LogConfig())
    await mgr.start()
    try:
        mgr.create("t", 0, log_dir=dirs[1])
        mgr.create("t", 1, log_dir=dirs[1])
        created = await mgr.create_many([("u", p, LogConfig()) for p in range(5)])
        placed = {p: created[("u", p)].directory.parent for p in range(5)}
        assert sorted(placed.values()).count(dirs[0]) == 3 and list(placed.values()).count(dirs[2]) == 2
        assert mgr.create("v", 0).directory.parent == dirs[1]  # a=3, b=2, c=2: b, the first of the least
    finally:
        await mgr.close()


async def test_start_up_settles_what_a_crashed_move_left(tmp_path: Path) -> None:
    """A future dir whose partition is still in place goes, and the move runs again; a partition
    in two dirs keeps the copy whose move file says it was switched in, with that file's start."""
    from odradek.storage.log_move import future_dir_partition, write_move_file

    a, b = tmp_path / "a", tmp_path / "b"
    mgr = LogManager([a, b], LogConfig())
    await mgr.start()
    one = mgr.create("one", 0, log_dir=a)
    two = mgr.create("two", 0, log_dir=a)
    for i in range(5):
        one.append(batch(b"k%d" % i))
        two.append(batch(b"k%d" % i))
    await mgr.close()
    # "one": a copy cut short in b; "two": switched into b, the old dir still in a
    unfinished = b / "one-0.0123abcd-future"
    shutil.copytree(a / "one-0", unfinished)
    assert future_dir_partition(unfinished.name) == ("one", 0)
    shutil.copytree(a / "two-0", b / "two-0")
    write_move_file(b / "two-0", topic="two", partition=0, state="switched", log_start=3, cleaner_checkpoint=0)

    mgr = LogManager([a, b], LogConfig())
    await mgr.start()
    try:
        assert mgr.get("two", 0).directory == b / "two-0" and not (a / "two-0").exists()
        assert mgr.get("two", 0).log_start_offset == 3 and mgr.get("two", 0).log_end_offset == 5
        assert not unfinished.exists()
        for _ in range(200):  # the move of "one" resumed
            if not mgr.moves():
                break
            await asyncio.sleep(0.02)
        assert mgr.get("one", 0).directory == b / "one-0" and mgr.get("one", 0).log_end_offset == 5
        assert not (a / "one-0").exists()
    finally:
        await mgr.close()
