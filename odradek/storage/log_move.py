"""Moving a partition to another log dir: the file work (blocking; worker threads).

Kafka moves a replica between log dirs through a *future* log
(``<topic>-<partition>.<id>-future`` in the target dir) that a fetcher thread
fills from the current one; once caught up, ``LogManager.replaceCurrentWithFutureLog``
renames the future dir to the partition's name and the current one to
``*-delete``.  Here the future dir is filled by copying files: the segment
files' complete prefixes while appends go on, then, with appends held, the
rest and every other file (indexes, transaction indexes, producer snapshots).

Crash safety rests on the order of the renames and on :data:`MOVE_FILE`,
which every future dir carries from its first moment:

- a ``-future`` dir whose partition still has its current dir is an
  unfinished copy: start-up removes it (the log manager then moves again);
- the future dir is renamed to the partition's name *before* the source dir
  becomes ``*-delete``: a crash in between leaves two dirs of the same name,
  and the one whose move file says ``switched`` (the complete copy, written
  while appends were held) wins;
- the move file also keeps the source's log start offset and cleaner
  checkpoint until the target dir's checkpoint files name the partition.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    MAX_FILE_NAME,
    SWAP_SUFFIX,
    fsync_dir,
    parse_partition_dir,
    pread_exact,
    write_all,
    write_file,
)

FUTURE_DIR_SUFFIX = "-future"
MOVE_FILE = "future-replica"
_SKIPPED = (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX, ".tmp")
_CHUNK = 1 << 20


class MoveCancelled(Exception):
    """The move was called off (AlterReplicaLogDirs named another dir) before the switch."""


def future_dir_name(topic: str, partition: int, unique_id: str) -> str:
    return f"{topic}-{partition}.{unique_id}{FUTURE_DIR_SUFFIX}"


def future_name_fits(topic: str, partition: int) -> bool:
    """Kafka refuses a move whose future dir name would not fit one path component
    (``ReplicaManager.alterReplicaLogDirs``: INVALID_TOPIC_EXCEPTION, KAFKA-4893)."""
    return len(future_dir_name(topic, partition, "0" * 32).encode()) <= MAX_FILE_NAME


def is_future_dir(name: str) -> bool:
    return name.endswith(FUTURE_DIR_SUFFIX)


def read_move_file(directory: Path) -> dict[str, str] | None:
    try:
        text = (directory / MOVE_FILE).read_text(encoding="utf-8")
    except OSError:
        return None
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def write_move_file(directory: Path, **fields: object) -> None:
    """tmp + fsync + rename inside ``directory`` (the caller fsyncs the dir when it matters)."""
    tmp = directory / (MOVE_FILE + ".tmp")
    write_file(tmp, "".join(f"{k}={v}\n" for k, v in fields.items()).encode())
    os.replace(tmp, directory / MOVE_FILE)


def future_dir_partition(name: str) -> tuple[str, int] | None:
    """The partition a future dir holds, from its name (``orders-3.<id>-future``)."""
    head, sep, _unique = name.removesuffix(FUTURE_DIR_SUFFIX).rpartition(".")
    return parse_partition_dir(head) if sep else None


class LogCopier:
    """Fills one future dir from a partition dir.  ``sync_logs`` may run while appends go on (it
    copies only the byte counts given, which the appending thread has finished writing);
    ``sync_all`` runs with appends held."""

    def __init__(self, source: Path, target: Path, cancelled: threading.Event) -> None:
        self.source = source
        self.target = target
        self.cancelled = cancelled
        self.copied_bytes = 0

    def begin(self, topic: str, partition: int) -> None:
        self.target.mkdir()
        write_move_file(self.target, topic=topic, partition=partition, state="copying")
        fsync_dir(self.target)
        fsync_dir(self.target.parent)

    def sync_logs(self, lengths: dict[str, int]) -> int:
        """Each segment file in ``lengths`` (name -> bytes) copied up to that length, only the
        tail the target lacks when it already holds a prefix; segment files no longer in the
        source removed.  Returns the bytes copied."""
        before = self.copied_bytes
        for name in os.listdir(self.target):
            if name.endswith(LOG_SUFFIX) and name not in lengths:
                os.unlink(self.target / name)
        for name, length in lengths.items():
            self._check()
            dst = self.target / name
            have = dst.stat().st_size if dst.exists() else 0
            if have > length:  # cannot happen while the log's maintenance lock is held; be safe
                have = 0
            self._copy_range(self.source / name, dst, have, length)
        return self.copied_bytes - before

    def sync_all(self, lengths: dict[str, int]) -> None:
        """Segments as ``sync_logs``, then every other file of the source whole, and fsync."""
        import shutil  # noqa: PLC0415 - a move between data dirs is rare: not a start's import

        self.sync_logs(lengths)
        wanted = set(lengths)
        for name in os.listdir(self.source):
            path = self.source / name
            if name.endswith(LOG_SUFFIX) or name == MOVE_FILE or name.endswith(_SKIPPED) or not path.is_file():
                continue
            self._check()
            wanted.add(name)
            shutil.copyfile(path, self.target / name)
            self.copied_bytes += path.stat().st_size
        for name in os.listdir(self.target):
            if name not in wanted and name != MOVE_FILE:
                os.unlink(self.target / name)
        for name in os.listdir(self.target):
            fd = os.open(self.target / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _copy_range(self, src: Path, dst: Path, start: int, end: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if start == 0 else 0)
        fd_in = os.open(src, os.O_RDONLY)
        try:
            fd_out = os.open(dst, flags, 0o644)
            try:
                os.lseek(fd_out, start, os.SEEK_SET)
                pos = start
                while pos < end:
                    self._check()
                    data = pread_exact(fd_in, min(_CHUNK, end - pos), pos)
                    if not data:
                        raise OSError(f"{src} ends at {pos}, before {end}")
                    write_all(fd_out, data)
                    pos += len(data)
                    self.copied_bytes += len(data)
            finally:
                os.close(fd_out)
        finally:
            os.close(fd_in)

    def _check(self) -> None:
        if self.cancelled.is_set():
            raise MoveCancelled(str(self.target))


def resolve_duplicates(first: Path, second: Path) -> tuple[Path, Path]:
    """(keep, drop) for one partition found in two dirs: a crash between the two renames of a
    switch; the copy that was switched in wins."""
    for keep, drop in ((first, second), (second, first)):
        fields = read_move_file(keep)
        if fields and fields.get("state") == "switched":
            return keep, drop
    raise RuntimeError(f"partition {first.name} found in both {first.parent} and {second.parent}")
