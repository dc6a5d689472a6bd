"""Split-local aggregation for the ``odradek-log`` data source: Spark merges keys, not records.

Decoding costs about 1 µs a record in Python; handing every record to Spark
costs about 1.8 µs more (Arrow into the JVM, then the hash aggregate).  The
latest committed offsets, the expiry audit and consumer lag only need, per
key, the record that wins, so each task keeps just those from what it
decoded and Spark's own aggregation then runs over keys:

``latest-offsets``
    a non-transactional, decodable offset commit (or its tombstone) is kept
    only if it has the highest offset of its (data dir, group, topic,
    partition) in the split -- the same winner ``reports.latest_offsets``
    picks with ``max_by``, since a record outdone in its split is outdone
    everywhere.  Data-topic records (and their control markers) shrink to
    the ones holding their partition's lowest offset, highest batch end and
    newest timestamp, all ``reports.log_end_offsets`` reads.  Everything
    else -- group records, transactional commits and the markers that
    decide them, undecodable rows, unknown keys -- passes through, so the
    reports over the result give the same rows as over every record.

The rows keep the data source's schema; only reports that read winners may
use them (``overview``, ``commit-rates`` and the group timeline count every
record, so they read the full-record path).  Memory: the kept rows of one
split, bounded by its keys, compacted every ``compact_rows`` input rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.decode import CONTROL, DATA, OFFSET_COMMIT, OFFSETS_TOPIC

LATEST_OFFSETS = "latest-offsets"
AGGREGATIONS = (LATEST_OFFSETS,)

_COMMIT_KEYS = ["source_dir", "group_id", "commit_topic", "commit_partition"]
_LOG_KEYS = ["source_dir", "topic", "partition"]
_ROW = "__row"


def _winners(table: pa.Table, keys: list[str], order: str, agg: str) -> pa.Array:
    """Row indices of ``table`` holding the max (``agg="max"``) or min of ``order`` per ``keys``.

    Sorted stably by ``order`` first, so the highest (lowest) row index of a
    key is its highest (lowest) value; ties keep the later row, as the log
    would.
    """
    ordered = pc.sort_indices(table, sort_keys=[(order, "ascending")])
    sorted_keys = table.select(keys).take(ordered).append_column(_ROW, pa.array(range(len(ordered)), pa.int64()))
    picked = sorted_keys.group_by(keys, use_threads=False).aggregate([(_ROW, agg)])[f"{_ROW}_{agg}"]
    return ordered.take(picked.combine_chunks())


def _compact_commits(table: pa.Table) -> pa.Table:
    return table.take(_winners(table, _COMMIT_KEYS, "offset", "max"))


def _compact_log(table: pa.Table) -> pa.Table:
    """The rows log_end_offsets reads: lowest offset, highest batch end, newest timestamp per partition."""
    picks = pa.concat_arrays([_winners(table, _LOG_KEYS, "offset", "min"),
                              _winners(table, _LOG_KEYS, "batch_last_offset", "max"),
                              _winners(table, _LOG_KEYS, "timestamp", "max")])
    return table.take(pc.unique(picks))


class _Kept:
    """Rows of one kind kept so far, compacted whenever enough new ones arrive."""

    def __init__(self, compact: Callable[[pa.Table], pa.Table], compact_rows: int) -> None:
        self.compact = compact
        self.compact_rows = compact_rows
        self.pieces: list[pa.RecordBatch] = []
        self.fresh = 0
        self.kept: pa.Table | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.pieces.append(batch)
            self.fresh += batch.num_rows
            if self.fresh >= self.compact_rows:
                self._fold()

    def _fold(self) -> None:
        tables = ([self.kept] if self.kept is not None else []) + [pa.Table.from_batches(self.pieces)]
        self.kept = self.compact(pa.concat_tables(tables))
        self.pieces, self.fresh = [], 0

    def result(self) -> Iterator[pa.RecordBatch]:
        if self.pieces:
            self._fold()
        if self.kept is not None:
            yield from self.kept.combine_chunks().to_batches(max_chunksize=1 << 16)


def latest_offsets(batches: Iterator[pa.RecordBatch], compact_rows: int = 1 << 18) -> Iterator[pa.RecordBatch]:
    """The ``latest-offsets`` aggregation over one split's decoded batches (see the module doc)."""
    commits = _Kept(_compact_commits, compact_rows)
    logs = _Kept(_compact_log, compact_rows)
    for batch in batches:
        rtype = batch.column("record_type")
        is_commit = pc.and_(pc.and_(pc.equal(rtype, OFFSET_COMMIT), pc.is_null(batch.column("decode_error"))),
                            pc.invert(batch.column("is_transactional")))
        is_commit = pc.fill_null(is_commit, False)
        is_log = pc.fill_null(pc.and_(pc.is_in(rtype, pa.array([DATA, CONTROL])),
                                      pc.not_equal(batch.column("topic"), OFFSETS_TOPIC)), False)
        commits.add(batch.filter(is_commit))
        logs.add(batch.filter(is_log))
        rest = batch.filter(pc.invert(pc.or_(is_commit, is_log)))
        if rest.num_rows:
            yield rest
    yield from commits.result()
    yield from logs.result()


def aggregator(name: str | None) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]] | None:
    """The split-local aggregation called ``name`` (None: every record)."""
    if name is None or name == "" or name == "none":
        return None
    if name == LATEST_OFFSETS:
        return latest_offsets
    raise ValueError(f"option aggregate must be one of {', '.join(('none', *AGGREGATIONS))}, got {name!r}")
