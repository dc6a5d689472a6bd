"""Durability bookkeeping for one Log: what is dirty, what is fsynced, group commit.

Appends only mark segments dirty and bump a sequence number (cheap, on the
event loop).  fsync never runs on the loop: a round goes to the loop's fsync
engine (kernel AIO, else a worker thread; ``fsync_engine.py``).  ``sync()`` is
group commit: a caller waits for the fsync round in flight; when it ends and
the caller's append is still not covered, *one* new round starts for all
waiters, so N concurrent appenders cost about two fsyncs, not N.  A finished
round advances the recovery point to the log end offset it snapshotted.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

import structlog

from odradek.protocol.lean_dataclass import dataclass
from odradek.storage.files import fsync_dir
from odradek.storage.fsync_engine import engine_for
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
        self._inflight: _Round | None = None
        self._waiters: list[tuple[int, Callable[[BaseException | None], None]]] = []
        self._idle: list[asyncio.Future[None]] = []

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

    def when_durable(self, end_offset: Callable[[], int], now_ms: Callable[[], int],
                     callback: Callable[[BaseException | None], None]) -> None:
        """Call ``callback(None)`` once every append made before this call is fsynced.

        Group commit: the waiters of one round share it; when it ends and some
        are still not covered, *one* new round starts for all of them.  The
        callbacks run in registration order, straight from the round's
        completion (no task per waiter, no extra loop turn); a failed round
        calls each with its exception.
        """
        target = self.write_seq
        if self.durable_seq >= target:
            callback(None)
        elif self.failed is not None:
            callback(self.failed)
        else:
            self._waiters.append((target, callback))
            if self._inflight is None:
                self._start_round(end_offset, now_ms)

    async def sync(self, end_offset: Callable[[], int], now_ms: Callable[[], int]) -> None:
        """Resolve once every append made before the call is fsynced (group commit)."""
        future = asyncio.get_running_loop().create_future()
        self.when_durable(end_offset, now_ms, partial(_settle, future))
        await future

    def _start_round(self, end_offset: Callable[[], int], now_ms: Callable[[], int]) -> None:
        """One fsync round through the loop's engine: every dirty file at once."""
        r = self._prepare(end_offset())
        fds = [seg.fd for seg in r.segments]
        claimed = []
        for seg in r.segments:
            fd = seg.index.claim_dirty()
            if fd is not None:
                fds.append(fd)
                claimed.append(seg.index)
        self._inflight = r
        done = partial(self._round_done, r, claimed, end_offset, now_ms)
        if r.directory_dirty:
            try:
                dir_fd = os.open(self.directory, os.O_RDONLY)
            except OSError as exc:
                done(-1, exc)
                return
            fds.append(dir_fd)
            done = partial(done, dir_fd)
        else:
            done = partial(done, -1)
        engine_for(asyncio.get_running_loop()).submit(fds, done)

    def _round_done(self, r: _Round, claimed: list, end_offset: Callable[[], int], now_ms: Callable[[], int],
                    dir_fd: int, error: BaseException | None) -> None:
        self._inflight = None
        if dir_fd >= 0:
            os.close(dir_fd)
        if error is not None:
            for index in claimed:
                index.mark_dirty()
            self._undo(r, error)
            ready, self._waiters = self._waiters, []
        else:
            self._done(r, now_ms())
            durable = self.durable_seq
            waiters = self._waiters
            n = 0
            while n < len(waiters) and waiters[n][0] <= durable:
                n += 1
            ready, self._waiters = waiters[:n], waiters[n:]
        for _, callback in ready:
            try:
                callback(error)
            except Exception:  # one waiter's bug must not strand the others
                logger.exception("log.flush.waiter_failed", dir=str(self.directory))
        if self._inflight is None:
            if self._waiters:
                self._start_round(end_offset, now_ms)
            else:
                idle, self._idle = self._idle, []
                for future in idle:
                    if not future.done():
                        future.set_result(None)

    def schedule(self, end_offset: Callable[[], int], now_ms: Callable[[], int]) -> None:
        """Start a background fsync round; without a running loop, fsync right here."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.flush_blocking(end_offset(), now_ms())
            return
        self.when_durable(end_offset, now_ms, self._background_done)

    def _background_done(self, error: BaseException | None) -> None:
        if error is not None:  # logged in _undo; nobody awaits a background round
            logger.debug("log.flush.background_failed", dir=str(self.directory), error=str(error))

    async def drain(self) -> None:
        """Wait until no round is in flight (before closing the files they fsync)."""
        while self._inflight is not None:
            future = asyncio.get_running_loop().create_future()
            self._idle.append(future)
            await future


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return  # the waiter went away
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
