"""Offline compaction: the broker's cleaner over a copy, swapped in atomically, reopened by storage."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

from odradek.pipeline import reports  # noqa: E402
from odradek.pipeline.compact import (  # noqa: E402
    TEMP_SUFFIX,
    CompactionError,
    compact_data_dir,
    compact_partition,
    latest_by_key,
    scan_log_end,
)
from odradek.pipeline.decode import find_segments  # noqa: E402
from odradek.protocol.records import Record, encode_batch  # noqa: E402
from odradek.storage.config import LogConfig  # noqa: E402
from odradek.storage.log import Log  # noqa: E402
from odradek.storage.log_manager import offsets_topic_config  # noqa: E402
from tests.spark.datagen import DAY, HOUR, T0  # noqa: E402

pytestmark = pytest.mark.spark

OFFSETS = "__consumer_offsets-0"


def _copy(scenario, tmp_path: Path, broker: str = "broker-a") -> Path:
    target = tmp_path / broker
    shutil.copytree(scenario.dirs[broker], target)
    return target


def _log_bytes(pdir: Path) -> int:
    return sum(p.stat().st_size for p in pdir.glob("*.log"))


def test_compaction_keeps_the_newest_record_of_every_key(scenario, tmp_path):
    data = _copy(scenario, tmp_path)
    before = latest_by_key(data / OFFSETS)
    end = scan_log_end(data / OFFSETS)
    orders_before = (data / "orders-0" / "00000000000000000000.log").read_bytes()

    results = {Path(r.directory).name: r for r in compact_data_dir(data, now_ms=T0 + HOUR, verify=True)}

    assert set(results) == {OFFSETS}, "orders has cleanup.policy=delete: not a compaction target"
    r = results[OFFSETS]
    assert (r.status, r.swap) == ("compacted", "exchange")
    assert r.bytes_after < r.bytes_before and r.records_kept < r.records_in
    assert latest_by_key(data / OFFSETS) == before  # tombstones too: delete.retention.ms has not passed
    assert (data / "orders-0" / "00000000000000000000.log").read_bytes() == orders_before
    assert not list(data.glob(f".*{TEMP_SUFFIX}"))
    # the broker's storage opens it: same log end offset (the empty active segment keeps it)
    log = Log.open(data / OFFSETS, offsets_topic_config(LogConfig()))
    try:
        assert log.log_end_offset == end
        assert log.segments[-1].base_offset == end and log.segments[-1].size == 0
    finally:
        log.close()


def test_tombstones_go_after_delete_retention(scenario, tmp_path):
    data = _copy(scenario, tmp_path)
    before = latest_by_key(data / OFFSETS)
    compact_data_dir(data, now_ms=T0 + HOUR)
    r = compact_data_dir(data, now_ms=T0 + HOUR + DAY + 1)[0]  # past the delete horizon set by pass one
    # orders-app orders-2; gone-app's offset and group; cg-app's departed c1: its member
    # metadata, target and current assignment (datagen)
    assert r.tombstones_dropped == 6
    after = latest_by_key(data / OFFSETS)
    assert after == {k: v for k, v in before.items() if v[1] is not None}
    assert scan_log_end(data / OFFSETS) == scan_log_end(scenario.dirs["broker-a"] / OFFSETS)


def test_in_place_fallback_gives_the_same_partition(scenario, tmp_path):
    data = _copy(scenario, tmp_path)
    before = latest_by_key(data / OFFSETS)
    config = offsets_topic_config(LogConfig())
    r = compact_partition(data / OFFSETS, config, T0 + HOUR, verify=True, use_exchange=False)
    assert (r.status, r.swap) == ("compacted", "in-place")
    assert latest_by_key(data / OFFSETS) == before


def test_a_data_topic_is_compacted_when_its_config_says_so(tmp_path):
    data = tmp_path / "d"
    log = Log.open(data / "users-0", LogConfig(segment_bytes=1024), clock=lambda: T0)
    for i in range(200):  # 20 keys, each rewritten 10 times
        log.append(encode_batch([Record(i, T0 + i, f"user-{i % 20}".encode(), f"v{i}".encode())], base_offset=i))
    log.close()
    assert compact_data_dir(data, now_ms=T0) == []  # default cleanup.policy=delete
    results = compact_data_dir(data, now_ms=T0, topic_configs={"users": {"cleanup.policy": "compact"}}, verify=True)
    assert [(r.topic, r.status, r.records_kept) for r in results] == [("users", "compacted", 20)]
    assert {v[1] for v in latest_by_key(data / "users-0").values()} == {f"v{i}".encode() for i in range(180, 200)}


def test_topic_configs_come_from_the_brokers_registry(tmp_path):
    data = tmp_path / "d"
    log = Log.open(data / "users-0", LogConfig(segment_bytes=1024), clock=lambda: T0)
    for i in range(100):
        log.append(encode_batch([Record(i, T0 + i, f"user-{i % 10}".encode(), b"x")], base_offset=i))
    log.close()
    (data / "topics.json").write_text(json.dumps({"version": 1, "topics": [
        {"name": "users", "id": "5f1c2d2e-0000-4000-8000-000000000001", "partitions": 1,
         "configs": {"cleanup.policy": "compact"}}], "deleting": []}))
    assert [(r.topic, r.status, r.records_kept) for r in compact_data_dir(data, now_ms=T0)] == [
        ("users", "compacted", 10)]


def test_refuses_while_a_broker_holds_the_data_dir(scenario, tmp_path):
    data = _copy(scenario, tmp_path)
    fd = os.open(data / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(CompactionError, match="in use"):
            compact_data_dir(data, now_ms=T0)
    finally:
        os.close(fd)


def test_a_corrupt_partition_is_left_untouched(scenario, tmp_path):
    data = _copy(scenario, tmp_path)
    seg = sorted((data / OFFSETS).glob("*.log"))[1]
    raw = bytearray(seg.read_bytes())
    raw[100] ^= 0xFF  # inside the first batch's records: the CRC no longer matches
    seg.write_bytes(raw)
    files = {p.name: p.read_bytes() for p in (data / OFFSETS).iterdir()}
    r = compact_data_dir(data, now_ms=T0)[0]
    assert r.status == "failed" and "CRC" in r.error
    assert {p.name: p.read_bytes() for p in (data / OFFSETS).iterdir()} == files


def test_a_crash_leftover_is_ignored_by_readers_and_removed(scenario, tmp_path):
    data = _copy(scenario, tmp_path)
    leftover = data / f".{OFFSETS}{TEMP_SUFFIX}"
    shutil.copytree(data / OFFSETS, leftover)
    assert all(".compacting" not in s.path for s in find_segments([str(data)]))
    compact_data_dir(data, now_ms=T0)
    assert not leftover.exists()


def test_compacted_dirs_report_the_same_committed_offsets(spark, scenario, tmp_path):
    parent = tmp_path / "parent"
    for broker in scenario.dirs:
        _copy(scenario, parent, broker)
    def latest() -> set[tuple]:
        df = spark.read.format("odradek-log").load(str(parent)).cache()  # one scan for the report's two uses
        try:
            return {tuple(r) for r in reports.latest_offsets(df).collect()}
        finally:
            df.unpersist()

    before = latest()
    size = sum(_log_bytes(p) for p in parent.glob(f"*/{OFFSETS}"))
    results = [r for d in sorted(parent.iterdir()) for r in compact_data_dir(d, now_ms=T0 + HOUR, spark=spark)]
    # broker-b's two records have nothing to drop: its partition is left alone
    assert [(Path(r.directory).parent.name, r.status) for r in results] == [
        ("broker-a", "compacted"), ("broker-b", "unchanged")]
    assert sum(_log_bytes(p) for p in parent.glob(f"*/{OFFSETS}")) < size
    assert latest() == before
