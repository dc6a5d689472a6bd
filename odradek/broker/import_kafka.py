"""``odradek import``: bring a real Kafka ``__consumer_offsets`` into our data dir.

Every record is routed to ``partition_for(group, n)`` of *our* partition
count, so a Kafka cluster with 50 offsets partitions imports into a dev
broker with 1 (or any n).  Records of one group all live in one source
partition, so per-group order -- all that replay needs -- is preserved.
Transactional offset commits are imported only if their transaction
committed, where its marker stands and only over older values (as Kafka's
loader applies them, ``offsets/replay.py``); KIP-848 consumer-group records
(key types 3-8, 16) are imported like the others; records of other key types
(share and streams groups) are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..offsets.records import GroupKey, OffsetKey, RecordDecodeError, partition_for
from ..offsets.replay import OffsetsReplay
from ..protocol.records import Record, decode_batch, encode_batch
from ..storage.config import LogConfig
from ..storage.files import LOG_SUFFIX, parse_partition_dir, partition_dir_name
from ..storage.log import Log
from ..storage.log_manager import OFFSETS_TOPIC, offsets_topic_config

BATCH_RECORDS = 500


class ImportError_(RuntimeError):
    """The import cannot proceed (nothing to import, or the target already has offsets)."""


@dataclass
class ImportStats:
    source_partitions: int = 0
    target_partitions: int = 0
    records: int = 0
    skipped_unknown: int = 0
    aborted_txn_records: int = 0
    groups: set[str] = field(default_factory=set)


def source_partitions(kafka_dir: Path) -> list[Path]:
    found = []
    for child in kafka_dir.iterdir():
        parsed = parse_partition_dir(child.name)
        if child.is_dir() and parsed is not None and parsed[0] == OFFSETS_TOPIC:
            found.append((parsed[1], child))
    return [p for _, p in sorted(found)]


def _records_in_order(partition_dir: Path, stats: ImportStats):
    """Yield, in log order, (key, record) for the records that take effect (``OffsetsReplay``).

    A transactional commit is yielded where its COMMIT marker stands, and
    only if nothing later replaced it first; aborted ones, and those of
    transactions still open at the end, are counted and left out.
    """
    applied: list[tuple[OffsetKey | GroupKey, Record]] = []
    replay = OffsetsReplay(lambda key, _value, record: applied.append((key, record)))
    for segment in sorted(partition_dir.glob(f"*{LOG_SUFFIX}")):
        data = segment.read_bytes()
        pos = 0
        while pos < len(data):
            header, records = decode_batch(data, pos)
            pos += header.size
            for record in records:
                try:
                    if not replay.feed(header, record) and not header.is_control:
                        stats.skipped_unknown += 1
                except RecordDecodeError as exc:
                    raise ImportError_(f"{segment} offset {record.offset}: {exc}") from None
            yield from applied
            applied.clear()
    replay.finish()
    stats.aborted_txn_records += replay.dropped


def _home(dirs: list[Path], name: str) -> Path:
    """The partition dir ``name`` where it already is, else in the first log dir."""
    return next((d / name for d in dirs if (d / name).is_dir()), dirs[0] / name)


def import_offsets(kafka_dir: str | Path, data_dir: str | Path, num_partitions: int,
                   other_dirs: Sequence[str | Path] = ()) -> ImportStats:
    """Copy and re-partition; the target's ``__consumer_offsets`` must be absent or empty.

    With several log dirs (``other_dirs`` after the first), a partition already in one of
    them is written there: the broker finds each partition in exactly one dir."""
    kafka_dir, data_dir = Path(kafka_dir), Path(data_dir)
    dirs = [data_dir, *map(Path, other_dirs)]
    sources = source_partitions(kafka_dir)
    if not sources:
        raise ImportError_(f"no {OFFSETS_TOPIC}-N directories under {kafka_dir}")
    stats = ImportStats(source_partitions=len(sources), target_partitions=num_partitions)
    config = offsets_topic_config(LogConfig())
    logs = [Log.open(_home(dirs, partition_dir_name(OFFSETS_TOPIC, p)), config) for p in range(num_partitions)]
    try:
        if any(lg.log_end_offset > 0 for lg in logs):
            raise ImportError_(f"{data_dir} already holds committed offsets; import into an empty data dir")
        buffers: list[list[Record]] = [[] for _ in range(num_partitions)]
        for source in sources:
            for key, record in _records_in_order(source, stats):
                target = partition_for(key.group, num_partitions)
                buffers[target].append(record)
                stats.records += 1
                stats.groups.add(key.group)
                if len(buffers[target]) >= BATCH_RECORDS:
                    _flush(logs[target], buffers[target])
        for log, buffer in zip(logs, buffers, strict=True):
            _flush(log, buffer)
    finally:
        for log in logs:
            log.close()
    return stats


def _flush(log: Log, records: list[Record]) -> None:
    if not records:
        return
    # new consecutive offsets (our log's own), original commit times
    renumbered = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    log.append(encode_batch(renumbered))
    records.clear()
