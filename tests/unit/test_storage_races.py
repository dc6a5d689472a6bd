"""Races between the event loop and worker threads over the same logs, made deterministic.

Each test puts a hook where the race window is (a segment list a reader is
walking, an attribute a checkpoint round reads) and runs the other side's
action from inside it, so the interleaving the race needs happens every time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.broker.handlers.fetch import EARLIEST, LATEST, legacy_offsets_before
from odradek.protocol.records import encode_batch
from odradek.storage.checkpoint import LOG_START_FILE, RECOVERY_POINT_FILE, read_checkpoint
from odradek.storage.config import LogConfig
from odradek.storage.errors import LogClosedError
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager

SMALL = LogConfig().with_topic_config({"segment.bytes": "300", "retention.ms": "1000"})


class _ActOnWalk(tuple):
    """A log's segment view that runs ``action`` once, when a reader starts walking it:
    the deletion lands after the reader took its view and before it touched a file."""

    action: Callable[[], None] | None

    def __iter__(self):
        action, self.action = self.action, None
        if action is not None:
            action()
        return super().__iter__()


def _log_with_segments(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "t-0", SMALL)
    for i in range(30):
        log.append(encode_batch([(b"k", b"v%d" % i)], base_timestamp=1000 + i))
    assert len(log.segments) > 3
    return log


def _hook(log: Log, action: Callable[[], None]) -> None:
    segs, bases = log._view
    view = _ActOnWalk(segs)
    view.action = action
    log._view = (view, bases)


def _delete_records(log: Log) -> None:
    log.advance_start(20)
    log.delete_old_segments(now_ms=0)  # frees the segments wholly below the new start


@pytest.mark.parametrize("deletion", [
    _delete_records,
    lambda log: log.delete_old_segments(now_ms=10**13),  # retention: every closed segment is past it
    Log.delete_blocking,  # DeleteTopics
], ids=["delete-records", "retention", "delete-topic"])
def test_list_offsets_v0_survives_segments_deleted_under_it(tmp_path: Path, deletion) -> None:
    """ListOffsets v0 (Burrow, sarama) reads every segment file's time; segments deleted
    meanwhile are still answered from (the read pins them), not an UNKNOWN_SERVER_ERROR."""
    log = _log_with_segments(tmp_path)
    end = log.log_end_offset
    first_files = sorted(tmp_path.glob("t-0/*.log"))
    _hook(log, lambda: deletion(log))
    offsets = legacy_offsets_before(log, LATEST, 100)
    assert offsets[0] == end and offsets == sorted(offsets, reverse=True)
    assert not all(p.exists() for p in first_files)  # the deletion did happen under the read
    if not log.closed:
        assert legacy_offsets_before(log, EARLIEST, 1) == [log.log_start_offset]
        log.close()


def test_list_offsets_v0_of_a_deleted_log_is_log_closed(tmp_path: Path) -> None:
    """Deleted before the read starts: LogClosedError, which the handler answers
    UNKNOWN_TOPIC_OR_PARTITION."""
    log = _log_with_segments(tmp_path)
    log.delete_blocking()
    with pytest.raises(LogClosedError):
        legacy_offsets_before(log, LATEST, 10)


class _HookedDir(type(Path())):  # type: ignore[misc]
    """A log directory whose ``parent`` runs a hook: the point where a checkpoint round
    reads each log's attributes while iterating the manager's logs."""

    hook: Callable[[], None] | None = None

    @property
    def parent(self):
        hook = type(self).hook
        if hook is not None:
            hook()
        return super().parent


async def test_checkpoint_round_survives_logs_created_and_deleted_meanwhile(tmp_path: Path) -> None:
    """The checkpoint round runs in a worker thread while the loop creates and deletes
    partitions; a worker that walked the live dict would fail ("dictionary changed size
    during iteration") and skip the round.  The hook creates a partition from the worker
    thread in the middle of that walk: the round must not walk the live dict there."""
    mgr = LogManager([tmp_path / "d"], SMALL)
    await mgr.start()
    try:
        for p in range(3):
            mgr.create("t", p).append(encode_batch([(b"k", b"v")]))
        created: list[int] = []

        def from_worker_thread() -> None:
            if threading.current_thread() is not threading.main_thread() and not created:
                created.append(1)
                mgr.create("late", 0)

        for lg in mgr.logs().values():
            lg.directory = _HookedDir(lg.directory)
        _HookedDir.hook = from_worker_thread
        try:
            await mgr.checkpoint()
        finally:
            _HookedDir.hook = None
        rp = read_checkpoint(tmp_path / "d" / RECOVERY_POINT_FILE)
        assert {tp for tp in rp if tp[0] == "t"} == {("t", 0), ("t", 1), ("t", 2)}
        assert set(read_checkpoint(tmp_path / "d" / LOG_START_FILE)) >= {("t", 0), ("t", 1), ("t", 2)}
    finally:
        await mgr.close()


async def test_an_older_checkpoint_snapshot_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    """Snapshots are taken on the loop and written by threads in any order: the files keep
    the newest snapshot's contents."""
    mgr = LogManager([tmp_path / "d"], SMALL)
    await mgr.start()
    try:
        log = mgr.create("t", 0)
        old = mgr.checkpoint_snapshot()
        log.append(encode_batch([(b"k", b"v")]))
        log.advance_start(1)
        new = mgr.checkpoint_snapshot()
        mgr.write_snapshot(new)
        mgr.write_snapshot(old)
        assert read_checkpoint(tmp_path / "d" / LOG_START_FILE)[("t", 0)] == 1
    finally:
        await mgr.close()
