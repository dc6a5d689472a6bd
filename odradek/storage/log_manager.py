"""All partition logs of a broker's ``log.dirs``, and their background maintenance.

Start-up opens every ``<topic>-<partition>/`` directory (recovery uses the
per-dir ``recovery-point-offset-checkpoint``; compaction resumes from
``cleaner-offset-checkpoint``).  With several log dirs (Kafka's JBOD) a new
partition goes to the dir holding the fewest partitions, as Kafka's
``LogManager.nextLogDirs`` chooses (ties: the first in ``log.dirs``).  One asyncio task drives the schedule; every piece of
disk work (retention, compaction, checkpoints, fsync) runs in worker threads,
compaction in its own single thread so it never starves fsync rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from functools import partial
from pathlib import Path
from typing import NamedTuple

import structlog

from odradek.protocol.lean_dataclass import dataclass
from odradek.storage.checkpoint import (
    CLEANER_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    read_checkpoint,
    write_checkpoint,
)
from odradek.storage.config import COMPACT, LogConfig
from odradek.storage.errors import CleaningAborted
from odradek.storage.files import (
    DELETE_DIR_SUFFIX,
    delete_dir_name,
    fsync_dir,
    parse_partition_dir,
    partition_dir_name,
    remove_tree,
)
from odradek.storage.log import Clock, Log, wall_clock_ms
from odradek.storage.log_move import (
    MOVE_FILE,
    LogCopier,
    MoveCancelled,
    future_dir_name,
    future_dir_partition,
    is_future_dir,
    read_move_file,
    resolve_duplicates,
    write_move_file,
)

logger = structlog.get_logger("odradek.storage")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
_CREATE_THREADS = 16  # partitions opened at once by create_many (their waits are on the disk)
SHARE_STATE_TOPIC = "__share_group_state"
COMPACTED_INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)  # Kafka fixes compaction for both
TopicPartition = tuple[str, int]


class _DirCheckpoints(NamedTuple):
    directory: Path
    recovery_points: tuple[tuple[TopicPartition, int], ...]
    cleaner_offsets: tuple[tuple[TopicPartition, int], ...]
    log_starts: tuple[tuple[TopicPartition, int], ...]


@dataclass
class Move:
    """A partition on its way to another log dir (Kafka's future replica)."""

    dest: Path
    future: Path
    copied_offset: int = 0  # the log end offset the copy had reached (DescribeLogDirs' lag)
    switching: bool = False  # appends held, the dirs being swapped: too late to call off
    then: Path | None = None  # asked for another dir while switching: moved there next
    keep_future: bool = False  # stopped by a shutdown: the next start resumes it
    renamed: bool = False  # the copy is in the partition's place: the old log must stay held
    cancelled: threading.Event = field(default_factory=threading.Event)
    copier: LogCopier | None = None
    task: asyncio.Task[None] | None = None

    @property
    def copied_bytes(self) -> int:
        return 0 if self.copier is None else self.copier.copied_bytes


_SMALL_DELTA = 1 << 20  # bytes left to copy once appends are held


class CheckpointSnapshot(NamedTuple):
    """The checkpoint files' contents at one moment, for a worker thread to write."""

    seq: int
    dirs: tuple[_DirCheckpoints, ...]


def offsets_topic_config(base: LogConfig) -> LogConfig:
    """Kafka's fixed settings for ``__consumer_offsets`` (compact, 100 MiB segments)."""
    return base.with_topic_config({"cleanup.policy": COMPACT, "segment.bytes": 100 * 1024 * 1024})


def share_state_topic_config(base: LogConfig) -> LogConfig:
    """Kafka's fixed settings for ``__share_group_state`` (``ShareCoordinatorService.shareGroupStateTopicConfigs``):
    delete, never by time, 100 MiB segments -- the share coordinator prunes it itself."""
    return base.with_topic_config({"cleanup.policy": "delete", "retention.ms": -1, "segment.bytes": 100 * 1024 * 1024})


class LogManager:
    """Owns the Log objects of one broker."""

    def __init__(self, log_dirs: Iterable[str | os.PathLike[str]], default_config: LogConfig | None = None, *,
                 topic_config: Callable[[str], LogConfig | None] | None = None, clock: Clock | None = None,
                 retention_check_interval_ms: int = 300_000, cleaner_backoff_ms: int = 15_000,
                 flush_check_interval_ms: int = 1_000, checkpoint_interval_ms: int = 60_000) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("invalid value for log.dirs: empty")
        self.default_config = default_config or LogConfig()
        self._topic_config = topic_config
        self.clock = clock or wall_clock_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._moves: dict[TopicPartition, Move] = {}
        self._resume: dict[TopicPartition, Path] = {}  # moves a crash or shutdown cut short
        self._preferred: dict[TopicPartition, Path] = {}  # LogManager.preferredLogDirs
        self._task: asyncio.Task[None] | None = None
        self._cleaner_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="odradek-cleaner")
        self._create_pool = ThreadPoolExecutor(max_workers=_CREATE_THREADS, thread_name_prefix="odradek-create")
        self._opened = False
        self.compactions = 0  # runs that rewrote a log (metrics)
        self._checkpoint_lock = threading.Lock()
        self._snapshot_seq = self._written_seq = 0  # checkpoint snapshots taken / last written
        self._background: set[asyncio.Task[None]] = set()
        self._rounds = asyncio.Lock()  # the scheduler's rounds and a test's catch_up, one at a time
        self._next_retention: int | None = None  # when each round is next due (clock ms)
        self._next_clean = self._next_checkpoint = 0
        # the last stable offset of a log the cleaner is about to compact (the data plane's,
        # which knows the open transactions); None = no bound
        self.stable_offset: Callable[[Log], Awaitable[int | None]] | None = None
        self.before_close: Callable[[], Awaitable[None]] | None = None  # last writes (producer snapshots)
        # after a pass compacted [log start, end offset): the data plane drops what it keeps in
        # memory of the cleaned range that the cleaner removed (aborted transactions)
        self.after_clean: Callable[[Log, int], Awaitable[None]] | None = None

    # --- configuration ---------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        cfg = self._topic_config(topic) if self._topic_config else None
        if cfg is not None:
            return cfg
        if topic in COMPACTED_INTERNAL_TOPICS:
            return offsets_topic_config(self.default_config)
        if topic == SHARE_STATE_TOPIC:
            return share_state_topic_config(self.default_config)
        return self.default_config

    def update_config(self, topic: str, config: LogConfig) -> None:
        """New settings for every partition of ``topic`` (AlterConfigs); in force from the next append,
        retention pass or cleaning."""
        for (t, _p), log in self._logs.items():
            if t == topic:
                log.config = config

    def set_default_config(self, config: LogConfig) -> None:
        """New broker-level defaults (dynamic broker configs): every log re-reads its settings.

        ``__consumer_offsets`` keeps what is fixed for it (compaction, its own segment size).
        """
        self.default_config = config
        for (t, _p), log in self._logs.items():
            if t in COMPACTED_INTERNAL_TOPICS or t == SHARE_STATE_TOPIC:
                log.config = self.config_for(t).with_topic_config({"segment.bytes": log.config.segment_bytes})
            else:
                log.config = self.config_for(t)

    # --- open / create / delete ------------------------------------------------------------

    def open(self) -> None:
        """Recover and open every partition directory (blocking; start() runs it in a thread).

        With several dirs, what a move cut short left is settled first (``log_move``): an
        unfinished future dir goes (the move resumes after start), and of a partition found
        in two dirs the copy that was switched in stays.
        """
        found: dict[TopicPartition, Path] = {}
        futures: list[Path] = []
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            for entry in sorted(os.listdir(d)):
                path = d / entry
                if not path.is_dir():
                    continue
                if entry.endswith(DELETE_DIR_SUFFIX):
                    remove_tree(path, ignore_errors=True)
                    continue
                if is_future_dir(entry):
                    futures.append(path)
                    continue
                tp = parse_partition_dir(entry)
                if tp is None:
                    continue
                if tp in found:
                    keep, drop = resolve_duplicates(found[tp], path)
                    _remove_dir(drop, tp)
                    found[tp] = keep
                else:
                    found[tp] = path
        for path in futures:
            tp = future_dir_partition(path.name)
            if tp is not None and tp in found and found[tp].parent != path.parent:
                self._resume[tp] = path.parent
            remove_tree(path, ignore_errors=True)
        several = len(self.log_dirs) > 1
        for d in self.log_dirs:
            rp = read_checkpoint(d / RECOVERY_POINT_FILE)
            cleaned = read_checkpoint(d / CLEANER_FILE)
            starts = read_checkpoint(d / LOG_START_FILE)
            for tp, path in found.items():
                if path.parent != d:
                    continue
                start, cleaner = starts.get(tp, 0), cleaned.get(tp, 0)
                moved = read_move_file(path) if several else None
                if moved:  # switched in before this dir's checkpoints named it
                    start = max(start, int(moved.get("log_start", 0)))
                    cleaner = max(cleaner, int(moved.get("cleaner_checkpoint", 0)))
                # a log compacted once keeps its offset gaps below the cleaner checkpoint, even if
                # compaction was switched off since (AlterConfigs): recover it as a compacted one
                gapped = cleaner > start
                log = Log.open(path, self.config_for(tp[0]), recovery_point=rp.get(tp, 0),
                               log_start_offset=start, cleaner_checkpoint=cleaner,
                               clock=self.clock, gapped=gapped)
                log.on_truncate = self._after_truncate
                self._logs[tp] = log
            logger.info("log.manager.opened", dir=str(d), partitions=sum(1 for lg in self._logs.values()
                                                                      if lg.directory.parent == d))
        self._opened = True

    async def start(self) -> None:
        """Open the logs in a worker thread and start the maintenance task."""
        if not self._opened:
            await asyncio.to_thread(self.open)
        self._task = asyncio.create_task(self._scheduler(), name="odradek-log-maintenance")
        resume, self._resume = self._resume, {}
        for (topic, partition), dest in resume.items():
            if (topic, partition) in self._logs and dest in self.log_dirs:
                logger.info("log.move_resumed", topic=topic, partition=partition, dir=str(dest))
                await self.move(topic, partition, dest)

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def create(self, topic: str, partition: int, config: LogConfig | None = None, *,
               log_dir: str | os.PathLike[str] | None = None) -> Log:
        """The partition's log, created in ``log_dir`` (default: the first log dir) if new."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if log_dir is None and self._preferred:
            log_dir = self._preferred.pop((topic, partition), None)
        log = self.open_new(topic, partition, config, log_dir=log_dir)
        self._logs[(topic, partition)] = log
        return log

    def next_log_dirs(self, count: int = 1) -> list[Path]:
        """The dirs for ``count`` new partitions, each to the dir with the fewest partitions at
        that point (``LogManager.nextLogDirs``, counting those placed before it)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs * count
        held = dict.fromkeys(self.log_dirs, 0)
        for lg in self._logs.values():
            parent = lg.directory.parent
            if parent in held:
                held[parent] += 1
        out = []
        for _ in range(count):
            chosen = min(self.log_dirs, key=held.__getitem__)  # min keeps the first of equals
            held[chosen] += 1
            out.append(chosen)
        return out

    def open_new(self, topic: str, partition: int, config: LogConfig | None = None, *,
                 log_dir: str | os.PathLike[str] | None = None) -> Log:
        """Open (creating it if needed) a partition's log without registering it (blocking;
        any thread: ``create_many`` runs it in worker threads, then registers on the loop)."""
        parent = Path(log_dir) if log_dir is not None else self.next_log_dirs()[0]
        log = Log.open(parent / partition_dir_name(topic, partition), config or self.config_for(topic),
                       clock=self.clock)
        log.on_truncate = self._after_truncate
        return log

    async def create_many(self, wanted: Iterable[tuple[str, int, LogConfig]], *,
                          on_new: Callable[[Log], None] | None = None) -> dict[TopicPartition, Log | Exception]:
        """Each (topic, partition, config)'s log, the new ones opened in parallel worker threads
        and registered on the loop; a partition that could not be opened maps to its error.
        ``on_new(log)`` runs in the worker that opened a new log (its first files beside the
        segments); what it raises is that partition's error, the log registered all the same
        so that a rollback finds it.

        Creating a partition's files waits on the disk (a few ms each here), so a
        CreateTopics of 1,000 topics opened one at a time on the loop stalled it
        for seconds; threads overlap those waits.
        """
        out: dict[TopicPartition, Log | Exception] = {}
        new: list[tuple[str, int, LogConfig]] = []
        for topic, partition, config in wanted:
            found = self._logs.get((topic, partition))
            if found is not None:
                out[(topic, partition)] = found
            else:
                new.append((topic, partition, config))
        if not new:
            return out
        # placed on the loop, before any opens: the threads must not race for the emptiest dir
        todo = [(*item, self._preferred.pop(item[:2], d) if self._preferred else d)
                for item, d in zip(new, self.next_log_dirs(len(new)), strict=True)]
        loop = asyncio.get_running_loop()
        n = min(_CREATE_THREADS, len(todo))
        chunks = await asyncio.gather(*(loop.run_in_executor(self._create_pool, self._open_chunk, todo[i::n], on_new)
                                        for i in range(n)))
        for chunk in chunks:
            for key, opened, error in chunk:
                if opened is not None:
                    current = self._logs.get(key)
                    if current is not None:  # registered meanwhile: one Log per directory
                        opened.discard()
                        opened = current
                    self._logs[key] = opened
                out[key] = error if error is not None else opened  # type: ignore[assignment]
        return out

    def _open_chunk(self, chunk: list[tuple[str, int, LogConfig, Path]], on_new: Callable[[Log], None] | None
                    ) -> list[tuple[TopicPartition, Log | None, Exception | None]]:
        opened: list[tuple[TopicPartition, Log | None, Exception | None]] = []
        for topic, partition, config, log_dir in chunk:
            log = None
            try:
                log = self.open_new(topic, partition, config, log_dir=log_dir)
                if on_new is not None:
                    on_new(log)
            except Exception as exc:  # e.g. out of file descriptors: that partition's error
                opened.append(((topic, partition), log, exc))
            else:
                opened.append(((topic, partition), log, None))
        return opened

    def detach_all(self) -> list[Log]:
        """Forget every log at once (a test's reset): nothing finds them any more, none takes an
        append; the caller moves their directories away and closes them."""
        logs, self._logs = list(self._logs.values()), {}
        for m in self._moves.values():
            m.cancelled.set()
        for log in logs:
            log.closed = True
            log.stop_cleaning.set()
        return logs

    def track(self, task: asyncio.Task[None]) -> None:
        """Background work on these logs that ``close`` must wait for."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def maintenance(self) -> asyncio.Lock:
        """Held while a retention/cleaning/checkpoint round runs; hold it to keep rounds out."""
        return self._rounds

    async def delete(self, topic: str, partition: int) -> bool:
        """Remove a partition and its directory (topic deletion); a move of it is called off
        first (or, switching already, finishes first)."""
        m = self._moves.get((topic, partition))
        if m is not None and m.task is not None:
            m.cancelled.set()
            await asyncio.gather(m.task, return_exceptions=True)
        self._preferred.pop((topic, partition), None)
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        await log.delete()
        return True

    # --- moves between log dirs (AlterReplicaLogDirs) ----------------------------------------

    def moves(self) -> dict[TopicPartition, Move]:
        return dict(self._moves)

    def _moving(self, log: Log) -> bool:
        return (log.topic, log.partition) in self._moves

    def prefer(self, topic: str, partition: int, dest: Path) -> None:
        """A partition not hosted yet is created in ``dest`` (``maybeUpdatePreferredLogDir``)."""
        self._preferred[(topic, partition)] = dest

    async def move(self, topic: str, partition: int, dest: Path) -> None:
        """Move a hosted partition to the log dir ``dest`` in the background.

        As Kafka's ``alterReplicaLogDirs``: the current dir cancels a move in
        progress; the dir a move is already heading to changes nothing; another
        dir replaces the move (or, once switching, follows it).  The future dir
        exists when this returns (Kafka creates the future log before it
        answers), so a crash after the answer resumes the move at the next start.
        """
        tp = (topic, partition)
        log = self._logs[tp]
        current = self._moves.get(tp)
        if current is not None:
            if current.dest == dest:
                return
            if current.switching:
                current.then = dest
                return
            current.cancelled.set()
        if log.directory.parent == dest:
            return
        m = Move(dest, dest / future_dir_name(topic, partition, uuid.uuid4().hex))
        m.copier = LogCopier(log.directory, m.future, m.cancelled)
        previous = current.task if current is not None else None
        self._moves[tp] = m
        try:
            await asyncio.to_thread(m.copier.begin, topic, partition)
        except OSError:
            self._forget_move(tp, m)
            raise
        m.task = asyncio.create_task(self._run_move(tp, m, previous), name=f"odradek-move-{topic}-{partition}")

    async def _run_move(self, tp: TopicPartition, m: Move, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        log = self._logs.get(tp)
        if log is None or m.cancelled.is_set():
            self._forget_move(tp, m)
            return
        await asyncio.to_thread(log._maint.acquire)  # no retention, compaction or truncation meanwhile
        try:
            moved = await self._copy_and_switch(tp, log, m)
        except MoveCancelled:
            moved = None
        except Exception as exc:  # the partition stays where it is; the future copy goes
            logger.error("log.move_failed", topic=tp[0], partition=tp[1], dir=str(m.dest), error=repr(exc))
            moved = None
        finally:
            if not m.renamed:
                log.frozen = False
            log._maint.release()
        if moved is None and not m.keep_future:
            await asyncio.to_thread(remove_tree, m.future, True)
        self._forget_move(tp, m)
        if moved is not None:
            await self._after_switch(tp, log, moved, m)

    def _forget_move(self, tp: TopicPartition, m: Move) -> None:
        if self._moves.get(tp) is m:
            del self._moves[tp]

    async def _copy_and_switch(self, tp: TopicPartition, log: Log, m: Move) -> Log | None:
        copier = m.copier
        assert copier is not None
        copier.source = log.directory
        for _round in range(4):  # copy while appends go on, until little is left
            m.copied_offset = log.log_end_offset
            if await asyncio.to_thread(copier.sync_logs, _lengths(log)) < _SMALL_DELTA:
                break
        if self._logs.get(tp) is not log or log.closed:
            raise MoveCancelled(str(m.future))
        m.switching = True
        log.frozen = True  # appends answer NOT_LEADER_OR_FOLLOWER (retriable) until the switch
        await log.durability.drain()
        lengths, end = _lengths(log), log.log_end_offset
        start, cleaner = log.log_start_offset, log.cleaner_checkpoint
        final = m.dest / partition_dir_name(*tp)
        new = await asyncio.to_thread(self._switch_files, copier, log, lengths, final, end, start, cleaner, m)
        m.copied_offset = end
        if self._logs.get(tp) is not log:  # detached meanwhile (a reset): it goes with the rest
            new.discard()
            return None
        new.on_truncate = self._after_truncate
        new.config = log.config  # an AlterConfigs meanwhile
        self._logs[tp] = new
        log.closed = True  # a read or append that still holds it retries and finds the new one
        if log.log_start_offset > new.log_start_offset:  # a DeleteRecords meanwhile
            new.advance_start(log.log_start_offset)
        return new

    def _switch_files(self, copier: LogCopier, log: Log, lengths: dict[str, int], final: Path, end: int,
                      start: int, cleaner: int, m: Move) -> Log:
        """With appends held: the rest of the copy, the future dir switched in, the old dir
        marked for deletion, the new log opened (blocking; the order is what start-up relies on)."""
        copier.sync_all(lengths)
        write_move_file(copier.target, topic=log.topic, partition=log.partition, state="switched",
                        log_start=start, cleaner_checkpoint=cleaner)
        fsync_dir(copier.target)
        os.replace(copier.target, final)
        m.renamed = True  # from here a failure leaves the partition held (appends refused) until a
        fsync_dir(final.parent)  # restart opens it from its new place
        trash = log.directory.with_name(delete_dir_name(log.topic, log.partition, uuid.uuid4().hex))
        os.replace(log.directory, trash)
        fsync_dir(trash.parent)
        log.directory = trash
        return Log.open(final, log.config, recovery_point=end, log_start_offset=start,
                        cleaner_checkpoint=cleaner, clock=self.clock, gapped=cleaner > start)

    async def _after_switch(self, tp: TopicPartition, old: Log, new: Log, m: Move) -> None:
        """The old copy goes once its reads are done; the checkpoints name the partition in its
        new dir, then its move file goes; a dir asked for while switching comes next."""
        logger.info("log.moved", topic=tp[0], partition=tp[1], dir=str(new.directory.parent),
                    bytes=m.copied_bytes)
        await old.durability.drain()
        cleanup = asyncio.ensure_future(asyncio.to_thread(_discard, old))
        self.track(cleanup)
        await self.checkpoint()
        await asyncio.to_thread(_unlink_move_file, new.directory)
        if m.then is not None and tp in self._logs and m.then != new.directory.parent:
            await self.move(tp[0], tp[1], m.then)

    # --- checkpoints -----------------------------------------------------------------------

    def checkpoint_snapshot(self) -> CheckpointSnapshot:
        """What the three checkpoint files of each log dir will say, read now (on the loop).

        The loop creates and deletes logs while a worker thread writes the
        files: the thread gets this immutable copy, never ``_logs`` itself
        (iterating a dict another thread resizes fails mid-round).
        """
        self._snapshot_seq += 1
        logs = list(self._logs.items())  # one C-level copy: nothing runs between its items
        per_dir = []
        for d in self.log_dirs:
            mine = [(tp, lg) for tp, lg in logs if lg.directory.parent == d]
            per_dir.append(_DirCheckpoints(
                d,
                tuple((tp, lg.recovery_point) for tp, lg in mine),
                # kept for a log no longer compacted while cleaned segments remain: it marks the gaps
                tuple((tp, lg.cleaner_checkpoint) for tp, lg in mine
                      if lg.config.compact or lg.cleaner_checkpoint > lg.log_start_offset),
                tuple((tp, lg.log_start_offset) for tp, lg in mine)))
        return CheckpointSnapshot(self._snapshot_seq, tuple(per_dir))

    def write_snapshot(self, snapshot: CheckpointSnapshot) -> None:
        """Write a snapshot's files (blocking: a worker thread).  One writer at a time, and a
        snapshot older than one already written is skipped, so files never go back in time."""
        with self._checkpoint_lock:
            if snapshot.seq <= self._written_seq:
                return
            for c in snapshot.dirs:
                write_checkpoint(c.directory / RECOVERY_POINT_FILE, dict(c.recovery_points))
                write_checkpoint(c.directory / CLEANER_FILE, dict(c.cleaner_offsets))
                write_checkpoint(c.directory / LOG_START_FILE, dict(c.log_starts))
            self._written_seq = snapshot.seq

    def write_checkpoints(self) -> None:
        """Recovery points, cleaner checkpoints, log starts: one file each per log dir (blocking,
        for callers on the thread that owns the logs; the loop uses ``checkpoint``)."""
        self.write_snapshot(self.checkpoint_snapshot())

    async def checkpoint(self) -> None:
        """Snapshot on the loop, write in a worker thread."""
        await asyncio.to_thread(self.write_snapshot, self.checkpoint_snapshot())

    def _after_truncate(self, log: Log) -> None:
        # The recovery point went down: the file must not keep vouching for bytes past it.
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.write_checkpoints()
            return
        task = asyncio.ensure_future(self.checkpoint())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- maintenance -----------------------------------------------------------------------

    async def run_retention(self) -> int:
        freed = 0
        for log in list(self._logs.values()):
            if log.config.delete and not log.closed and not (self._moves and self._moving(log)):
                log.roll_if_past_retention()  # on the loop, where appends and rolls happen
                freed += await asyncio.to_thread(log.delete_old_segments)
        return freed

    async def run_cleaner(self, *, force: bool = False) -> int:
        """Compact every log whose dirty ratio calls for it (all compacted logs with ``force``)."""
        loop = asyncio.get_running_loop()
        cleaned = 0
        for log in list(self._logs.values()):
            if log.closed or not log.config.compact or not (force or log.needs_cleaning()) \
                    or (self._moves and self._moving(log)):
                continue
            try:
                stable = await self.stable_offset(log) if self.stable_offset is not None else None
                stats = await loop.run_in_executor(self._cleaner_pool, partial(log.clean, stable_offset=stable))
                if stats is not None:
                    cleaned += 1
                    self.compactions += 1
                    if self.after_clean is not None:
                        await self.after_clean(log, stats.end_offset)
                    # the checkpoint records where offsets may have gaps before compaction can be
                    # switched off (start-up recovers gapped logs leniently)
                    await self.checkpoint()
            except CleaningAborted:
                pass
        return cleaned

    async def run_flushes(self) -> None:
        now = self.clock()
        for log in list(self._logs.values()):
            if not log.closed:
                log.maybe_flush(now)

    async def maintenance_once(self) -> None:
        """One full round (the scheduler's work, for tests and the CLI)."""
        await self.run_flushes()
        await self.run_retention()
        await self.run_cleaner()
        await self.checkpoint()

    async def _scheduler(self) -> None:
        tick = max(self.flush_check_interval_ms, 10) / 1000
        now = self.clock()
        self._next_retention = now + self.retention_check_interval_ms
        self._next_clean = now + self.cleaner_backoff_ms
        self._next_checkpoint = now + self.checkpoint_interval_ms
        while True:
            await asyncio.sleep(tick)
            try:
                await self.run_flushes()
                await self.catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep the broker up; the next round retries
                logger.exception("log.manager.maintenance_failed", error=str(exc))

    async def catch_up(self) -> None:
        """Run the retention, cleaning and checkpoint rounds that are due by the clock.

        The scheduler calls it every tick; a test that moved the broker's
        clock forward calls it at once, so what the advance made due (time-based
        retention) is done when the advance returns.  Like Kafka's scheduled
        ``cleanupLogs``, a round runs when its interval has passed, however
        much further the clock went: one round, not one per missed interval.
        """
        if self._next_retention is None:
            return  # not started
        async with self._rounds:
            now = self.clock()
            if now >= self._next_retention:
                self._next_retention = now + self.retention_check_interval_ms
                await self.run_retention()
            if now >= self._next_clean:
                self._next_clean = now + self.cleaner_backoff_ms
                await self.run_cleaner()
            if now >= self._next_checkpoint:
                self._next_checkpoint = now + self.checkpoint_interval_ms
                await self.checkpoint()

    async def close(self) -> None:
        """Stop maintenance, fsync and close every log, write final checkpoints."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for m in self._moves.values():
            m.keep_future = True
            m.cancelled.set()
        moving = [m.task for m in self._moves.values() if m.task is not None]
        if moving:
            await asyncio.gather(*moving, return_exceptions=True)
        for log in self._logs.values():
            log.stop_cleaning.set()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self.before_close is not None:
            await self.before_close()
        await asyncio.gather(*(log.aclose() for log in self._logs.values()))
        await self.checkpoint()
        self._cleaner_pool.shutdown(wait=True)
        self._create_pool.shutdown(wait=True)

    def close_blocking(self) -> None:
        """close() for code without an event loop."""
        for log in self._logs.values():
            log.close()
        self.write_checkpoints()
        self._cleaner_pool.shutdown(wait=True)
        self._create_pool.shutdown(wait=True)


def _lengths(log: Log) -> dict[str, int]:
    """Segment file name -> the bytes appends have finished writing (read on the loop)."""
    return {seg.path.name: seg.size for seg in log.segments}


def _discard(log: Log) -> None:
    log.discard()
    remove_tree(log.directory, ignore_errors=True)


def _unlink_move_file(directory: Path) -> None:
    with contextlib.suppress(OSError):
        (directory / MOVE_FILE).unlink()


def _remove_dir(path: Path, tp: TopicPartition) -> None:
    """A partition dir that lost to its other copy (start-up): marked, then removed."""
    trash = path.with_name(delete_dir_name(tp[0], tp[1], uuid.uuid4().hex))
    os.replace(path, trash)
    remove_tree(trash, ignore_errors=True)
    logger.warning("log.duplicate_removed", dir=str(path))
