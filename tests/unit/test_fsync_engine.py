"""fsync engines: kernel AIO where Linux offers it, a worker thread elsewhere; same answers."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from odradek.protocol.records import encode_batch
from odradek.storage import fsync_engine
from odradek.storage.config import FsyncMode, LogConfig
from odradek.storage.fsync_engine import AioEngine, ThreadEngine, engine_for, fsync, use_engine
from odradek.storage.log import Log


def _aio_or_skip() -> AioEngine:
    try:
        return AioEngine(asyncio.get_running_loop())
    except OSError as exc:
        pytest.skip(f"no kernel AIO here: {exc}")


@pytest.fixture(params=["aio", "thread"])
async def engine(request):
    e = _aio_or_skip() if request.param == "aio" else ThreadEngine()
    yield e
    e.close(asyncio.get_running_loop())


def _files(tmp_path: Path, n: int) -> list[int]:
    fds = []
    for i in range(n):
        fd = os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, b"x" * 100)
        fds.append(fd)
    return fds


async def test_fsyncs_every_fd(engine, tmp_path):
    fds = _files(tmp_path, 3)
    try:
        await fsync(engine, fds)
        await fsync(engine, [])
    finally:
        for fd in fds:
            os.close(fd)


async def test_more_fds_than_the_kernel_ring_holds(engine, tmp_path):
    fds = _files(tmp_path, fsync_engine._RING + 40)
    try:
        await asyncio.gather(fsync(engine, fds[:100]), fsync(engine, fds[100:]))
    finally:
        for fd in fds:
            os.close(fd)


async def test_a_bad_fd_fails_like_os_fsync(engine, tmp_path):
    fd = os.open(tmp_path / "gone", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(fd)
    with pytest.raises(OSError) as info:
        await fsync(engine, [fd])
    assert info.value.errno == errno.EBADF


async def test_aio_completions_arrive_on_the_loop_without_threads(tmp_path):
    engine = _aio_or_skip()
    fds = _files(tmp_path, 2)
    try:
        for _ in range(20):
            await fsync(engine, fds)
        assert not engine._inflight
    finally:
        engine.close(asyncio.get_running_loop())
        for fd in fds:
            os.close(fd)


async def test_without_kernel_aio_the_loop_gets_the_thread_engine(monkeypatch):
    monkeypatch.setattr(fsync_engine, "_SYSCALLS", {})
    loop = asyncio.new_event_loop()
    try:
        assert isinstance(engine_for(loop), ThreadEngine)
    finally:
        loop.close()


async def test_a_log_syncs_through_either_engine(engine, tmp_path):
    loop = asyncio.get_running_loop()
    previous = engine_for(loop)
    use_engine(loop, engine)
    try:
        log = Log.open(tmp_path / "t-0", LogConfig(fsync=FsyncMode.ALWAYS))
        await asyncio.gather(*(log.append_async(encode_batch([(b"k", b"v")])) for _ in range(50)))
        assert log.recovery_point == 50
        await log.aclose()
    finally:
        use_engine(loop, previous)


async def test_a_failed_round_halts_appends_and_keeps_the_index_dirty(tmp_path):
    class Failing:
        name = "failing"

        def submit(self, fds, callback) -> None:
            callback(OSError(errno.EIO, "I/O error"))

    loop = asyncio.get_running_loop()
    previous = engine_for(loop)
    use_engine(loop, Failing())
    try:
        log = Log.open(tmp_path / "t-0", LogConfig(fsync=FsyncMode.ALWAYS, index_interval_bytes=1))
        with pytest.raises(OSError):
            await log.append_async(encode_batch([(b"k", b"v")]))
        assert log.durability.failed is not None and log.recovery_point == 0
        assert log.active_segment.index.claim_dirty() is not None  # given back for the next try
    finally:
        use_engine(loop, previous)
        log.close()
