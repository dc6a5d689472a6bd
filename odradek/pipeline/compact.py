"""Offline compaction of a data dir: every compacted partition, rewritten and swapped in atomically.

Why offline: a broker compacts only closed segments, when the dirty ratio
calls for it, in the background; an operator shrinking a big
``__consumer_offsets`` before a migration or a backup wants every partition
compacted now, while no broker runs.

What it does per partition (``__consumer_offsets-*`` always; other topics
when their config -- the broker's ``topics.json``, or given -- says
``cleanup.policy=compact``):

1. copy the partition directory to ``<data dir>/.<name>.compacting`` (a name
   the broker ignores: ``parse_partition_dir`` rejects it);
2. open the copy with the broker's own :class:`odradek.storage.log.Log`
   (recovery validates every batch), roll it so every segment is closed, and
   run the broker's own cleaner (:mod:`odradek.storage.cleaner`): newest
   record per key, tombstones kept until ``delete.retention.ms`` after the
   pass that first keeps them (KIP-534 delete horizon), offsets preserved,
   changed batches re-encoded with ``protocol.records.encode_batch``.  The
   empty segment left by the roll keeps the log end offset, so the broker
   never reuses an offset even when the last records were removed;
3. check the copy: same log end offset as the original (a recovery that cut
   a corrupt tail aborts the partition instead of silently dropping data),
   and optionally (``verify``) that every key's newest value is unchanged;
4. swap the copy and the original in **one** ``renameat2(RENAME_EXCHANGE)``
   and fsync the data dir: a crash leaves either the old partition or the
   new one in place, never neither, and the leftover ``.compacting`` dir is
   removed by the next run.  Without RENAME_EXCHANGE (not Linux, or a
   filesystem without it) the partition is compacted in place instead,
   through the cleaner's own crash-safe swap protocol (recovery completes or
   undoes it), which is safe but atomic per segment group, not per partition.

The data dir's ``.lock`` is held for the whole run, so a broker cannot start
on it meanwhile and the job refuses to run under a live broker.  With a
SparkSession the partitions are compacted in parallel, one task each
(executors must see the data dir: local mode, or a shared filesystem).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.protocol.records import (
    ControlRecordType,
    CorruptRecordError,
    crc_ok,
    iter_batches,
    parse_control_key,
)
from odradek.storage.cleaner import first_unstable_offset
from odradek.storage.config import LogConfig
from odradek.storage.files import LOG_SUFFIX, fsync_dir, parse_base_offset, parse_partition_dir
from odradek.storage.log import Log
from odradek.storage.log_manager import OFFSETS_TOPIC, offsets_topic_config
from odradek.storage.segment import ScanError, iter_file_batches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TEMP_SUFFIX = ".compacting"
LOCK_FILE = ".lock"  # the broker's data dir lock (odradek.broker.datadir.DirLock): flock on this file
TOPIC_REGISTRY = "topics.json"  # the broker's topic registry (odradek.broker.dataplane.topics)

Progress = Callable[[str], None]


class CompactionError(RuntimeError):
    """A partition could not be compacted safely; the original is left untouched."""


@dataclass
class PartitionResult:
    """What happened to one partition (one row of the job's output)."""

    directory: str
    topic: str
    partition: int
    status: str  # compacted | unchanged | failed
    bytes_before: int = 0
    bytes_after: int = 0
    segments_before: int = 0
    segments_after: int = 0
    records_in: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    log_end_offset: int = 0
    seconds: float = 0.0
    swap: str = ""  # exchange | in-place
    error: str = ""


# --- which partitions, with which config ---------------------------------------------------------

def partition_config(topic: str, base: LogConfig, topic_configs: Mapping[str, Mapping[str, str]]) -> LogConfig:
    """The log config a broker would use: the offsets topic's fixed one, else base + topic overrides."""
    overrides = topic_configs.get(topic, {})
    if topic == OFFSETS_TOPIC:
        return offsets_topic_config(base).with_topic_config(overrides)
    return base.with_topic_config(overrides)


def registered_topic_configs(data_dir: Path) -> dict[str, dict[str, str]]:
    """Topic config overrides the broker persisted in ``<data dir>/topics.json`` (its topic registry).

    Read as a file format, like the segments: the registry's code lives in
    the broker, which the pipeline does not import.  A missing or unreadable
    registry means "no overrides known".
    """
    try:
        data = json.loads((data_dir / TOPIC_REGISTRY).read_text(encoding="utf-8"))
        return {str(t["name"]): {str(k): str(v) for k, v in (t.get("configs") or {}).items()}
                for t in data.get("topics", [])}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        print(f"odradek-report: ignoring unreadable {data_dir / TOPIC_REGISTRY}: {exc}", file=sys.stderr)
        return {}


def compaction_targets(data_dir: Path, base: LogConfig,
                       topic_configs: Mapping[str, Mapping[str, str]]) -> list[tuple[Path, LogConfig]]:
    """Partition directories of ``data_dir`` whose topic is compacted."""
    out = []
    for entry in sorted(os.listdir(data_dir)):
        path = data_dir / entry
        parsed = parse_partition_dir(entry)
        if parsed is None or not path.is_dir():
            continue
        config = partition_config(parsed[0], base, topic_configs)
        if config.compact:
            out.append((path, config))
    return out


# --- locking and swapping ------------------------------------------------------------------------

@contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold the flock a broker holds while it runs (refuse if one does)."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CompactionError(f"data directory {data_dir} is in use (a broker holds {LOCK_FILE}); "
                                  "stop it before compacting offline") from None
        yield
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2() -> Callable[..., int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    fn = getattr(ctypes.CDLL(name, use_errno=True), "renameat2", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL (fs without it), ENOSYS, EOPNOTSUPP
        return False
    raise OSError(err, os.strerror(err), str(a))


# --- reading a partition for the checks ------------------------------------------------------

def _segments(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir()
                  if p.name.endswith(LOG_SUFFIX) and parse_base_offset(p.name) is not None)


def scan_log_end(directory: Path) -> int:
    """Last offset + 1 (0 when empty), checking every batch's length, magic and CRC first.

    A partition that recovery would cut (torn tail, corrupt batch) is refused
    before anything is touched: start the broker once to recover it, or
    repair it, then compact.
    """
    end = 0
    for seg in _segments(directory):
        end = max(end, parse_base_offset(seg.name) or 0)
        fd = os.open(seg, os.O_RDONLY)
        try:
            for pos, buf, off, h in iter_file_batches(fd, 0, os.fstat(fd).st_size):
                if not crc_ok(buf, off, h):
                    raise CompactionError(f"{seg}: CRC mismatch in the batch at byte {pos}; left untouched")
                end = max(end, h.base_offset + h.last_offset_delta + 1)
        except ScanError as exc:
            raise CompactionError(f"{seg}: {exc}; left untouched") from None
        finally:
            os.close(fd)
    return end


def latest_by_key(directory: Path) -> dict[bytes, tuple[int, bytes | None]]:
    """{key: (offset, value)} of the newest record per key (tombstones included) that counts.

    Transactional records count once their COMMIT marker is read and are dropped by an ABORT,
    as the group coordinator's replay and the cleaner treat them; a transaction with no marker
    yet counts (the cleaner leaves it alone).  "Newest" is by offset, so a plain commit written
    after a transaction's record wins even if the transaction commits later.
    """
    out: dict[bytes, tuple[int, bytes | None]] = {}
    open_txns: dict[int, list[tuple[bytes, int, bytes | None]]] = {}

    def keep(key: bytes, offset: int, value: bytes | None) -> None:
        if key not in out or out[key][0] < offset:
            out[key] = (offset, value)

    for seg in _segments(directory):
        for header, records in iter_batches(seg.read_bytes()):
            if header.is_control:
                pending = open_txns.pop(header.producer_id, [])
                if records and _is_commit(records[0].key):
                    for entry in pending:
                        keep(*entry)
                continue
            for r in records:
                if r.key is None:
                    continue
                if header.is_transactional:
                    open_txns.setdefault(header.producer_id, []).append((r.key, r.offset, r.value))
                else:
                    keep(r.key, r.offset, r.value)
    for pending in open_txns.values():
        for entry in pending:
            keep(*entry)
    return out


def _is_commit(control_key: bytes | None) -> bool:
    try:
        return parse_control_key(control_key).type == ControlRecordType.COMMIT
    except CorruptRecordError:
        return False


def verify_same_state(before: Path, after: Path) -> None:
    """Every key's newest value survives; a key may vanish only if its newest record was a tombstone."""
    old = latest_by_key(before)
    new = latest_by_key(after)
    for key, (offset, value) in old.items():
        got = new.get(key)
        if got is None:
            if value is not None:
                raise CompactionError(f"key {key!r} (offset {offset}) lost by compaction")
        elif got != (offset, value):
            raise CompactionError(f"key {key!r}: newest was offset {offset}, after compaction {got[0]}")
    extra = new.keys() - old.keys()
    if extra:
        raise CompactionError(f"{len(extra)} keys appeared during compaction")


# --- one partition -------------------------------------------------------------------------------

def _size(directory: Path) -> tuple[int, int]:
    segs = _segments(directory)
    return sum(p.stat().st_size for p in segs), len(segs)


def _copy_partition(src: Path, dst: Path) -> None:
    dst.mkdir()
    for p in src.iterdir():
        if p.is_file():
            shutil.copy2(p, dst / p.name)
    for p in dst.iterdir():
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(dst)


def _clean(directory: Path, config: LogConfig, now_ms: int, result: PartitionResult) -> bool:
    """Roll and clean with the broker's Log; False when the cleaner had nothing to change."""
    log = Log.open(directory, config, clock=lambda: now_ms)
    try:
        if log.log_end_offset != result.log_end_offset:
            raise CompactionError(
                f"{directory.name}: recovery cut the log at {log.log_end_offset}, but its batches end at "
                f"{result.log_end_offset} (a corrupt batch?); left untouched")
        log.roll()
        # never past an undecided transaction (Kafka's uncleanable boundary at the LSO)
        stats = log.clean(now_ms, stable_offset=first_unstable_offset(log))
    finally:
        log.close()
    if stats is None or stats.segments_out == 0:
        return False
    result.records_in = stats.records_in
    result.records_kept = stats.records_kept
    result.tombstones_dropped = stats.tombstones_dropped
    return True


def compact_partition(directory: str | os.PathLike[str], config: LogConfig, now_ms: int, *,
                      verify: bool = False, use_exchange: bool = True) -> PartitionResult:
    """Compact one partition directory (the data dir's lock must be held by the caller)."""
    started = time.perf_counter()
    pdir = Path(directory)
    parsed = parse_partition_dir(pdir.name)
    if parsed is None:
        raise ValueError(f"{pdir} is not a partition directory")
    result = PartitionResult(str(pdir), parsed[0], parsed[1], "unchanged")
    result.bytes_before, result.segments_before = _size(pdir)
    tmp = pdir.with_name(f".{pdir.name}{TEMP_SUFFIX}")
    try:
        result.log_end_offset = scan_log_end(pdir)
        if tmp.exists():  # a previous run's leftover: either copy is disposable (see module docstring)
            shutil.rmtree(tmp)
        if use_exchange and _renameat2() is not None:
            _copy_partition(pdir, tmp)
            if _clean(tmp, config, now_ms, result):
                if verify:
                    verify_same_state(pdir, tmp)
                fsync_dir(tmp)
                if exchange(tmp, pdir):
                    fsync_dir(pdir.parent)
                    result.status, result.swap = "compacted", "exchange"
                else:
                    shutil.rmtree(tmp)
                    return compact_partition(directory, config, now_ms, verify=verify, use_exchange=False)
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            if verify:
                _copy_partition(pdir, tmp)  # the reference for the check
            if _clean(pdir, config, now_ms, result):
                result.status, result.swap = "compacted", "in-place"
                if verify:
                    verify_same_state(tmp, pdir)
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception as exc:
        result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"
        if result.swap != "in-place":
            shutil.rmtree(tmp, ignore_errors=True)
    result.bytes_after, result.segments_after = _size(pdir)
    result.seconds = time.perf_counter() - started
    return result


# --- the job -----------------------------------------------------------------------------------------

def compact_data_dir(data_dir: str | os.PathLike[str], *, now_ms: int | None = None,
                     base_config: LogConfig | None = None,
                     topic_configs: Mapping[str, Mapping[str, str]] | None = None,
                     verify: bool = False, spark: SparkSession | None = None,
                     progress: Progress | None = None) -> list[PartitionResult]:
    """Compact every compacted partition of ``data_dir``; one Spark task per partition when given a session.

    Topic settings come from the broker's registry (``topics.json``) and
    then ``topic_configs`` (``{"orders": {"cleanup.policy": "compact"}}``,
    which wins); ``__consumer_offsets`` is always compacted, with Kafka's
    fixed settings plus any overrides given for it (e.g.
    ``delete.retention.ms``).
    """
    root = Path(data_dir).resolve()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    base = base_config or LogConfig()
    configs = registered_topic_configs(root)
    for topic, overrides in (topic_configs or {}).items():
        configs[topic] = {**configs.get(topic, {}), **overrides}
    with data_dir_lock(root):
        targets = compaction_targets(root, base, configs)
        for leftover in root.glob(f".*{TEMP_SUFFIX}"):
            shutil.rmtree(leftover, ignore_errors=True)
        if progress:
            progress(f"compacting {len(targets)} partitions of {root}")
        jobs = [(str(p), cfg, now, verify) for p, cfg in targets]
        if spark is not None and jobs:
            rows = (spark.sparkContext.parallelize(jobs, len(jobs))
                    .map(lambda j: asdict(compact_partition(j[0], j[1], j[2], verify=j[3])))
                    .collect())
            results = [PartitionResult(**r) for r in rows]
        else:
            results = [compact_partition(p, cfg, n, verify=v) for p, cfg, n, v in jobs]
    if progress:
        for r in results:
            progress(f"{Path(r.directory).name}: {r.status} {r.bytes_before} -> {r.bytes_after} bytes, "
                     f"{r.records_in} -> {r.records_kept} records" + (f" ({r.error})" if r.error else ""))
    return results
