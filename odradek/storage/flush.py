"""Durability bookkeeping for one Log: what is dirty, what is fsynced, group commit.

Appends only mark segments dirty and bump a sequence number (cheap, on the
event loop).  fsync runs in a worker thread, never on the loop.  ``sync()`` is
group commit: a caller waits for the fsync round in flight; when it ends and
the caller's append is still not covered, *one* new round starts for all
waiters, so N concurrent appenders cost about two fsyncs, not N.  A finished
round advances the recovery point to the log end offset it snapshotted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from odradek.storage.files import fsync_dir
from odradek.storage.segment import Segment

logger = structlog.get_logger("odradek.storage")


@dataclass(slots=True)
class _Round:
    seq: int
    end_offset: int
    segments: list[Segment]
    directory_dirty: bool
    truncations: int


class Durability:
    """Dirty segments, write/durable sequence numbers, recovery point, fsync rounds."""

    def __init__(self, directory: Path, recovery_point: int, now_ms: int) -> None:
        self.directory = directory
        self.recovery_point = recovery_point
        self.write_seq = 0
        self.durable_seq = 0
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms
        self.truncations = 0
        self.failed: BaseException | None = None
        self._dirty: dict[Segment, None] = {}
        self._directory_dirty = False
        self._task: asyncio.Future[None] | None = None
        self._background: set[asyncio.Task[None]] = set()

    # --- called by Log on the appending thread ------------------------------------

    def written(self, segment: Segment, messages: int) -> None:
        self.write_seq += 1
        self.unflushed_messages += messages
        self._dirty[segment] = None

    def directory_changed(self) -> None:
        self._directory_dirty = True

    def truncated(self, end_offset: int) -> None:
        self.truncations += 1
        self.recovery_point = min(self.recovery_point, end_offset)

    @property
    def pending(self) -> bool:
        return self.durable_seq < self.write_seq or bool(self._dirty) or self._directory_dirty

    # --- rounds ----------------------------------------------------------------------

    def _prepare(self, end_offset: int) -> _Round:
        r = _Round(self.write_seq, end_offset, list(self._dirty), self._directory_dirty, self.truncations)
        self._dirty.clear()
        self._directory_dirty = False
        self.unflushed_messages = 0
        return r

    def _run(self, r: _Round) -> None:
        for seg in r.segments:
            seg.flush()
        if r.directory_dirty:
            fsync_dir(self.directory)

    def _done(self, r: _Round, now_ms: int) -> None:
        self.durable_seq = max(self.durable_seq, r.seq)
        if r.truncations == self.truncations:
            self.recovery_point = max(self.recovery_point, r.end_offset)
        self.last_flush_ms = now_ms

    def _undo(self, r: _Round, exc: BaseException) -> None:
        for seg in r.segments:
            self._dirty[seg] = None
        self._directory_dirty |= r.directory_dirty
        if isinstance(exc, OSError):
            self.failed = exc  # Kafka halts on a failed fsync: refuse further appends
            logger.error("log.flush.failed", dir=str(self.directory), error=str(exc))

    def flush_blocking(self, end_offset: int, now_ms: int) -> None:
        """fsync everything written so far, in the calling thread (not for the event loop)."""
        r = self._prepare(end_offset)
        try:
            self._run(r)
        except BaseException as exc:
            self._undo(r, exc)
            raise
        self._done(r, now_ms)

    async def sync(self, end_offset: Callable[[], int], now_ms: Callable[[], int]) -> None:
        """Resolve once every append made before the call is fsynced (group commit)."""
        target = self.write_seq
        while self.durable_seq < target:
            if self.failed is not None:
                raise self.failed
            task = self._task
            if task is None:
                task = self._task = asyncio.ensure_future(self._round(end_offset, now_ms))
            await asyncio.shield(task)

    async def _round(self, end_offset: Callable[[], int], now_ms: Callable[[], int]) -> None:
        r = self._prepare(end_offset())
        try:
            await asyncio.get_running_loop().run_in_executor(None, self._run, r)
        except BaseException as exc:
            self._undo(r, exc)
            raise
        finally:
            self._task = None
        self._done(r, now_ms())

    def schedule(self, end_offset: Callable[[], int], now_ms: Callable[[], int]) -> None:
        """Start a background fsync round; without a running loop, fsync right here."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.flush_blocking(end_offset(), now_ms())
            return
        t = asyncio.ensure_future(self._background_sync(end_offset, now_ms))
        self._background.add(t)
        t.add_done_callback(self._background.discard)

    async def _background_sync(self, end_offset: Callable[[], int], now_ms: Callable[[], int]) -> None:
        try:
            await self.sync(end_offset, now_ms)
        except Exception as exc:  # logged in _undo; nobody awaits a background round
            logger.debug("log.flush.background_failed", dir=str(self.directory), error=str(exc))

    async def drain(self) -> None:
        """Wait for background rounds (before closing the files they fsync)."""
        while self._background or self._task is not None:
            pending = list(self._background)
            if self._task is not None:
                pending.append(self._task)  # type: ignore[arg-type]
            await asyncio.gather(*pending, return_exceptions=True)
