"""How an fsync round reaches the disk without blocking the event loop.

Why not just a worker thread: a thread that returns from ``fsync`` has to
take the GIL back, and while the event loop is busy it waits for the whole
switch interval (5 ms) before the loop yields it.  On the project VM, with
the loop busy, a thread's fsync took 5.5 ms at the median against 0.1 ms for
the syscall; each ``log.fsync.mode=always`` commit pays that at least once.

Linux kernel AIO (``IOCB_CMD_FSYNC``, Linux 4.18+) runs the fsync in the
kernel and counts the completion on an eventfd that the event loop watches,
so no thread and no GIL hand-off is involved: ``AioEngine``.  Where it is
missing (another OS or CPU, an old kernel, a sandbox that refuses
``io_setup``), ``ThreadEngine`` does the fsyncs in the default executor; the
first submission that the kernel rejects switches an ``AioEngine`` to the
thread for good.

One engine per event loop (``engine_for``), created on first use.
"""

from __future__ import annotations

import asyncio
import errno
import os
import platform
import struct
import sys
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

if TYPE_CHECKING:
    import ctypes

logger = structlog.get_logger("odradek.storage")

# syscall numbers: (io_setup, io_destroy, io_getevents, io_submit)
_SYSCALLS = {"x86_64": (206, 207, 208, 209), "aarch64": (0, 1, 4, 2)}
_IOCB = struct.Struct("<QIIHhIQQqQII")  # struct iocb (little-endian), 64 bytes
_EVENT = struct.Struct("<QQqq")  # struct io_event: data, obj, res, res2
_IOCB_CMD_FSYNC = 2
_IOCB_FLAG_RESFD = 1
_RING = 128  # fsyncs in flight per context; beyond that io_submit says EAGAIN (then: a thread)


Callback = Callable[[BaseException | None], None]


class Engine(Protocol):
    name: str

    def submit(self, fds: Sequence[int], callback: Callback) -> None:
        """fsync every fd, then call ``callback`` on the loop with None or the first failure."""


async def fsync(engine: Engine, fds: Sequence[int]) -> None:
    """``engine.submit`` as a coroutine."""
    future = asyncio.get_running_loop().create_future()

    def settle(error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(None)

    engine.submit(fds, settle)
    await future


def _fsync_all(fds: Sequence[int]) -> None:
    for fd in fds:
        os.fsync(fd)


class ThreadEngine:
    name = "thread"

    def submit(self, fds: Sequence[int], callback: Callback) -> None:
        done = asyncio.get_running_loop().run_in_executor(None, _fsync_all, list(fds))
        done.add_done_callback(lambda f: callback(None if f.cancelled() else f.exception()))

    def close(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        pass


class _Batch:
    """The fsyncs of one ``submit``: the callback runs when the last one is done."""

    __slots__ = ("callback", "remaining", "error")

    def __init__(self, callback: Callback, remaining: int) -> None:
        self.callback = callback
        self.remaining = remaining
        self.error: BaseException | None = None

    def done(self, count: int, error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = error
        self.remaining -= count
        if self.remaining == 0:
            self.callback(self.error)

    def one_done(self, res: int) -> None:
        self.done(1, OSError(-res, os.strerror(-res)) if res < 0 else None)


class AioEngine:
    """Kernel AIO fsync, completions read from an eventfd on the event loop."""

    name = "aio"

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        calls = _SYSCALLS.get(platform.machine())
        if calls is None or sys.byteorder != "little" or not hasattr(os, "eventfd"):
            raise OSError(errno.ENOSYS, "kernel AIO fsync is not supported here")
        self._setup, self._destroy, self._getevents, self._submit = calls
        # ctypes loads with the first engine (the first fsync), not with every start: a broker
        # with log.fsync.mode=never (the default) never makes one
        global ctypes  # noqa: PLW0603
        import ctypes  # noqa: PLC0415

        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.syscall.restype = ctypes.c_long
        ctx = ctypes.c_ulong(0)
        if self._libc.syscall(ctypes.c_long(self._setup), ctypes.c_long(_RING), ctypes.byref(ctx)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"io_setup: {os.strerror(err)}")
        self._ctx = ctx
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._next_id = 1
        self._inflight: dict[int, tuple[ctypes.Array, _Batch]] = {}  # id -> (iocb buffer, batch)
        self._events = ctypes.create_string_buffer(_EVENT.size * _RING)
        self._zero = (ctypes.c_long * 2)(0, 0)
        self._fallback: ThreadEngine | None = None
        loop.add_reader(self._efd, self._reap)

    def submit(self, fds: Sequence[int], callback: Callback) -> None:
        if self._fallback is not None:
            self._fallback.submit(fds, callback)
            return
        if not fds:
            callback(None)
            return
        batch = _Batch(callback, len(fds))
        try:
            submitted = self._submit_all(fds, batch)
        except OSError as exc:
            batch.done(len(fds), exc)
            return
        if submitted < len(fds):  # ring full or refused: the rest goes to a thread
            rest = list(fds[submitted:])
            ThreadEngine().submit(rest, partial(batch.done, len(rest)))

    def _submit_all(self, fds: Sequence[int], batch: _Batch) -> int:
        """Submit one fsync per fd; returns how many the kernel took."""
        ids = []
        ptrs = (ctypes.c_void_p * len(fds))()
        for i, fd in enumerate(fds):
            ident = self._next_id
            self._next_id += 1
            cb = ctypes.create_string_buffer(
                _IOCB.pack(ident, 0, 0, _IOCB_CMD_FSYNC, 0, fd, 0, 0, 0, 0, _IOCB_FLAG_RESFD, self._efd),
                _IOCB.size)
            self._inflight[ident] = (cb, batch)
            ids.append(ident)
            ptrs[i] = ctypes.addressof(cb)
        n = self._libc.syscall(ctypes.c_long(self._submit), self._ctx, ctypes.c_long(len(fds)), ptrs)
        if n < 0:
            err = ctypes.get_errno()
            n = 0
            if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # no IOCB_CMD_FSYNC (< 4.18)
                logger.warning("log.fsync_engine.fallback", engine="thread", error=os.strerror(err))
                self._fallback = ThreadEngine()
            elif err == errno.EBADF:  # as os.fsync would fail
                for ident in ids:
                    self._inflight.pop(ident, None)
                raise OSError(err, os.strerror(err))
        for ident in ids[n:]:
            self._inflight.pop(ident, None)
        return n

    def _reap(self) -> None:
        """Completions: the eventfd counted them; collect them without blocking."""
        try:
            os.eventfd_read(self._efd)
        except BlockingIOError:
            return
        while self._inflight:
            n = self._libc.syscall(ctypes.c_long(self._getevents), self._ctx, ctypes.c_long(0),
                                   ctypes.c_long(_RING), self._events, self._zero)
            if n <= 0:
                return
            for i in range(n):
                ident, _, res, _ = _EVENT.unpack_from(self._events, i * _EVENT.size)
                entry = self._inflight.pop(ident, None)
                if entry is not None:
                    entry[1].one_done(res)

    def close(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Free the kernel context (it waits for in-flight fsyncs) and the eventfd.

        The engine holds no reference to its loop (the loop is the weak key
        of ``_ENGINES``): pass the loop to stop watching, unless it is gone.
        """
        if self._efd < 0:
            return
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._efd)
        self._libc.syscall(ctypes.c_long(self._destroy), self._ctx)
        os.close(self._efd)
        self._efd = -1


_ENGINES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Engine] = weakref.WeakKeyDictionary()


def engine_for(loop: asyncio.AbstractEventLoop) -> Engine:
    """The loop's engine: kernel AIO where the kernel offers it, else a thread."""
    engine = _ENGINES.get(loop)
    if engine is None:
        try:
            engine = AioEngine(loop)
        except OSError as exc:
            logger.info("log.fsync_engine", engine="thread", reason=str(exc))
            engine = ThreadEngine()
        else:
            weakref.finalize(loop, engine.close)  # the kernel context lives as long as the loop
        _ENGINES[loop] = engine
    return engine


def use_engine(loop: asyncio.AbstractEventLoop, engine: Engine) -> None:
    """Make ``engine`` the loop's engine (tests; forcing the thread engine)."""
    _ENGINES[loop] = engine
