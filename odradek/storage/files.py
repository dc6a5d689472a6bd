"""File names of Kafka's partition layout and the few file operations that need care.

Every rename/unlink/fsync done by recovery, retention and the cleaner goes
through :class:`FileOps`, so tests can stop a run after any single operation
and check that reopening loses nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
DELETE_DIR_SUFFIX = "-delete"
MAX_FILE_NAME = 255  # bytes in one path component (NAME_MAX on Linux, macOS and Windows)


def remove_tree(path: str | os.PathLike, ignore_errors: bool = False) -> None:
    """``shutil.rmtree``, with shutil (and the bz2/lzma modules it loads) imported on the first
    removal rather than by every start."""
    import shutil  # noqa: PLC0415 - a start removes nothing

    shutil.rmtree(path, ignore_errors=ignore_errors)


def segment_name(base_offset: int) -> str:
    """Kafka's 20-digit zero-padded base offset."""
    return f"{base_offset:020d}"


def log_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset) + LOG_SUFFIX)


def index_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset) + INDEX_SUFFIX)


def txn_index_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset) + TXNINDEX_SUFFIX)


def parse_base_offset(name: str) -> int | None:
    """Base offset of ``00000000000000000042.log`` (any suffix), or None."""
    stem = name.split(".", 1)[0]
    if len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """``<topic>-<partition>.<unique id>-delete``, the topic cut short to fit one file name.

    Kafka's ``LocalLog.logDeleteDirName`` (``logDirNameWithSuffixCappedLength``):
    a legal topic name may take 249 characters, so without the cut the rename
    of a long topic's directory fails (ENAMETOOLONG) and the topic can never be
    deleted.  Start-up removes every ``*-delete`` directory whatever its prefix.
    """
    suffix = f"-{partition}.{unique_id}{DELETE_DIR_SUFFIX}"
    return topic[:max(MAX_FILE_NAME - len(suffix.encode()), 0)] + suffix


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``orders-3`` -> ("orders", 3); None for anything else (``x-0.abc-delete``)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)


class SimulatedCrash(Exception):
    """Raised by a FileOps budget to stop a run between two file operations (tests)."""


class FileOps:
    """rename / unlink / fsync, optionally stopping after a budget of operations."""

    def __init__(self, crash_after: int | None = None,
                 on_op: Callable[[str, str], None] | None = None) -> None:
        self.crash_after = crash_after
        self.count = 0
        self.on_op = on_op

    def _tick(self, op: str, what: str) -> None:
        if self.crash_after is not None and self.count >= self.crash_after:
            raise SimulatedCrash(f"stopped before {op} {what}")
        self.count += 1
        if self.on_op is not None:
            self.on_op(op, what)

    def rename(self, src: Path, dst: Path) -> None:
        self._tick("rename", f"{src.name} -> {dst.name}")
        os.replace(src, dst)

    def unlink(self, path: Path) -> None:
        self._tick("unlink", path.name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def fsync_fd(self, fd: int, what: str = "") -> None:
        self._tick("fsync", what)
        os.fsync(fd)

    def fsync_dir(self, directory: Path) -> None:
        self._tick("fsync_dir", directory.name)
        fsync_dir(directory)

    def write_file(self, path: Path, data: bytes) -> None:
        """Create ``path`` with ``data`` and fsync it (one operation)."""
        self._tick("write", path.name)
        write_file(path, data)


DEFAULT_OPS = FileOps()


def fsync_dir(directory: Path) -> None:
    """Make renames and new entries in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes | bytearray | memoryview) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """os.write until done (a regular-file write may be short on ENOSPC or a signal)."""
    n = os.write(fd, data)
    if n == len(data):
        return
    view = memoryview(data)[n:]
    while view:
        n = os.write(fd, view)
        view = view[n:]


def atomic_write_text(path: Path, text: str) -> None:
    """tmp + fsync + rename + dir fsync: readers see the old or the new file, never half."""
    tmp = path.with_name(path.name + ".tmp")
    write_file(tmp, text.encode())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def pread_exact(fd: int, size: int, pos: int) -> bytes:
    """pread that retries short reads; returns fewer bytes only at end of file."""
    data = os.pread(fd, size, pos)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, pos + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)
