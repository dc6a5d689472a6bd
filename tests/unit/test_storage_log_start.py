"""The log start offset (DeleteRecords' low watermark) in storage: reads, segments, checkpoint, recovery."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.protocol.records import encode_batch
from odradek.storage.checkpoint import LOG_START_FILE, read_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager

SMALL = LogConfig().with_topic_config({"segment.bytes": "300"})


def fill(log: Log, n: int) -> None:
    for i in range(n):
        log.append(encode_batch([(b"k", b"v%d" % i)]))


def bases(log: Log) -> list[int]:
    return sorted(int(p.name[:-4]) for p in log.directory.glob("*.log"))


def test_advance_start_hides_records_and_frees_whole_segments(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    fill(log, 30)
    assert len(bases(log)) > 3
    assert log.advance_start(12) is True
    assert log.log_start_offset == 12
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 1 << 20)
    assert log.read(12, 1 << 20)  # from the batch holding 12
    assert log.advance_start(5) is False and log.log_start_offset == 12  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_start(31)  # past the log end
    asyncio.run(log.delete_segments_below_start())
    assert bases(log)[0] <= 12 < (bases(log)[1] if len(bases(log)) > 1 else 1 << 62)
    assert log.log_start_offset == 12 and log.log_end_offset == 30
    log.close()


def test_start_at_the_end_rolls_and_frees_everything(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    fill(log, 5)
    log.advance_start(5)
    asyncio.run(log.delete_segments_below_start())
    assert bases(log) == [5] and log.size_bytes == 0
    fill(log, 1)
    assert log.log_end_offset == 6
    log.close()


def test_retention_pass_frees_segments_below_start_even_when_compacted(tmp_path: Path) -> None:
    compacted = SMALL.with_topic_config({"cleanup.policy": "compact"})
    log = Log.open(tmp_path / "t-0", compacted)
    fill(log, 20)
    log._log_start = 15  # e.g. loaded from the checkpoint, segments not yet freed
    log.delete_old_segments()
    assert bases(log)[0] <= 15 and all(b > 15 for b in bases(log)[1:])
    log.close()


async def test_start_survives_reopen_through_the_checkpoint(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], SMALL)
    await manager.start()
    log = manager.create("t", 0)
    fill(log, 20)
    log.advance_start(7)
    await asyncio.to_thread(manager.write_checkpoints)
    assert read_checkpoint(tmp_path / LOG_START_FILE)[("t", 0)] == 7
    assert (tmp_path / LOG_START_FILE).read_text().splitlines()[:2] == ["0", "1"]  # Kafka's format
    await manager.close()
    again = LogManager([tmp_path], SMALL)
    await again.start()
    log = again.get("t", 0)
    assert (log.log_start_offset, log.log_end_offset) == (7, 20)
    await again.close()


def test_checkpointed_start_past_the_recovered_end_restarts_the_log_there(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    fill(log, 3)
    log.close()
    reopened = Log.open(tmp_path / "t-0", log_start_offset=10)  # the tail above 10 was lost
    assert (reopened.log_start_offset, reopened.log_end_offset) == (10, 10)
    assert reopened.append(encode_batch([(b"k", b"v")])) == (10, 10)
    reopened.close()
