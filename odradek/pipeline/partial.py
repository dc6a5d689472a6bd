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

``reports``
    what every report of :mod:`odradek.pipeline.reports` reads: the
    ``latest-offsets`` rows (group records -- the timeline and snapshot
    need each one, and they are about 1 % of a log -- transactional commits
    and markers pass through), plus **partial aggregates** of what the
    counting reports count over every record: ``overview`` rows per (data
    dir, topic, record type, partition, segment) and ``commit-rate`` rows
    per (data dir, group, topic, window) of the plain commits, with the
    commit count, the OffsetCommit batches (a batch lies in one segment, so
    in one split: per-split counts add up) and the distinct partitions.
    Those rows have :data:`REPORTS_SCHEMA` (the record schema plus
    :data:`PARTIAL_FIELDS`; ``partial`` is NULL on a record row) and the
    reports merge them (``reports.overview``/``commit_rates`` take either
    input and give the same rows).

The ``latest-offsets`` rows keep the data source's schema; only reports that
read winners may use them.  Memory: the kept rows and partials of one split,
bounded by its keys, compacted every ``compact_rows`` input rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.decode import ARROW_SCHEMA, CONTROL, DATA, OFFSET_COMMIT, OFFSETS_TOPIC

LATEST_OFFSETS = "latest-offsets"
REPORTS = "reports"
AGGREGATIONS = (LATEST_OFFSETS, REPORTS)

# partial-aggregate rows (aggregate=reports): the record schema plus these, NULL on record rows
PARTIAL = "partial"  # NULL: a record; OVERVIEW_PARTIAL or RATE_PARTIAL
OVERVIEW_PARTIAL = "overview"
RATE_PARTIAL = "commit-rate"
PARTIAL_FIELDS = [
    pa.field(PARTIAL, pa.string()),
    pa.field("records", pa.int64()),  # records (overview) or commits (commit-rate) of the key in the split
    pa.field("tombstones", pa.int64()),
    pa.field("decode_errors", pa.int64()),
    pa.field("first_timestamp", pa.int64()),
    pa.field("last_timestamp", pa.int64()),
    pa.field("window_start", pa.int64()),  # epoch ms, a multiple of window_ms
    pa.field("window_ms", pa.int64()),
    pa.field("requests", pa.int64()),  # OffsetCommit batches
    pa.field("commit_partitions", pa.list_(pa.field("element", pa.int32()))),  # distinct
]
PARTIAL_COLUMNS = tuple(f.name for f in PARTIAL_FIELDS)
REPORTS_SCHEMA = pa.schema([*ARROW_SCHEMA, *PARTIAL_FIELDS])
OVERVIEW_KEYS = ["source_dir", "topic", "record_type", "partition", "segment"]
RATE_KEYS = ["source_dir", "group_id", "commit_topic", "window_start"]
DEFAULT_WINDOW_MS = 60_000

_UNITS_MS = {"week": 7 * 86_400_000, "day": 86_400_000, "hour": 3_600_000, "minute": 60_000, "second": 1000,
             "millisecond": 1}
_INTERVAL_PART = re.compile(r"\s*(\d+)\s*(week|day|hour|minute|second|millisecond)s?\s*", re.I)

_COMMIT_KEYS = ["source_dir", "group_id", "commit_topic", "commit_partition"]
_LOG_KEYS = ["source_dir", "topic", "partition"]
_ROW = "__row"


def _winners(table: pa.Table, keys: list[str], order: str, agg: str) -> pa.Array:
    """Row indices of ``table`` holding the max (``agg="max"``) or min of ``order`` per ``keys``.

    Sorted stably by ``order`` first, so the highest (lowest) row index of a
    key is its highest (lowest) value; ties keep the later row, as the log
    would.
    """
    values = table.column(order).to_numpy()
    rows = pa.array(np.arange(len(values), dtype=np.int64))
    if table.column(order).null_count == 0 and bool(np.all(values[1:] >= values[:-1])):
        # already in order (a split of one partition's log): no sort, no copy of the keys
        return table.select(keys).append_column(_ROW, rows).group_by(keys, use_threads=False).aggregate(
            [(_ROW, agg)])[f"{_ROW}_{agg}"].combine_chunks()
    ordered = pc.sort_indices(table, sort_keys=[(order, "ascending")])
    sorted_keys = table.select(keys).take(ordered).append_column(_ROW, rows)
    picked = sorted_keys.group_by(keys, use_threads=False).aggregate([(_ROW, agg)])[f"{_ROW}_{agg}"]
    return ordered.take(picked.combine_chunks())


def _commit_picks(narrow: pa.Table) -> pa.Array:
    return _winners(narrow, _COMMIT_KEYS, "offset", "max")


def _log_picks(narrow: pa.Table) -> pa.Array:
    """The rows log_end_offsets reads: lowest offset, highest batch end, newest timestamp per partition."""
    return pc.unique(pa.concat_arrays([_winners(narrow, _LOG_KEYS, "offset", "min"),
                                       _winners(narrow, _LOG_KEYS, "batch_last_offset", "max"),
                                       _winners(narrow, _LOG_KEYS, "timestamp", "max")]))


class _Kept:
    """Rows of one kind kept so far, compacted whenever enough new ones arrive.

    A batch is kept as it came, with the indices of its rows of this kind;
    a compaction picks the winners on the few columns that decide them
    (``columns``) and copies only the winners' rows whole -- a decoded batch
    has some forty columns, and filtering every batch whole cost more than
    decoding it.
    """

    def __init__(self, columns: list[str], picks: Callable[[pa.Table], pa.Array], compact_rows: int) -> None:
        self.columns = columns
        self.picks = picks
        self.compact_rows = compact_rows
        self.pieces: list[tuple[pa.RecordBatch, pa.Array | None]] = []  # (batch, its rows of this kind; None: all)
        self.fresh = 0

    def add(self, batch: pa.RecordBatch, mask: pa.BooleanArray) -> None:
        selected = mask.true_count
        if selected:
            self.pieces.append((batch, None if selected == batch.num_rows else pc.indices_nonzero(mask)))
            self.fresh += selected
            if self.fresh >= self.compact_rows:
                self._fold()

    def _fold(self) -> None:
        narrow = [batch.select(self.columns) if rows is None else batch.select(self.columns).take(rows)
                  for batch, rows in self.pieces]
        picked = np.sort(self.picks(pa.Table.from_batches(narrow)).to_numpy(zero_copy_only=False))
        bounds = np.cumsum([0, *(len(n) for n in narrow)])
        winners = []
        for (batch, rows), lo, hi in zip(self.pieces, bounds[:-1], bounds[1:], strict=True):
            first, last = np.searchsorted(picked, [lo, hi])
            if last > first:
                local = pa.array(picked[first:last] - lo, pa.int64())
                winners.append(batch.take(local if rows is None else rows.take(local)))
        kept = pa.Table.from_batches(winners, schema=self.pieces[0][0].schema).combine_chunks()
        self.pieces = [(b, None) for b in kept.to_batches() if b.num_rows]
        self.fresh = 0

    def result(self) -> Iterator[pa.RecordBatch]:
        if self.fresh:
            self._fold()
        for batch, _ in self.pieces:
            yield from pa.Table.from_batches([batch]).to_batches(max_chunksize=1 << 16)


def latest_offsets(batches: Iterator[pa.RecordBatch], compact_rows: int = 1 << 18) -> Iterator[pa.RecordBatch]:
    """The ``latest-offsets`` aggregation over one split's decoded batches (see the module doc)."""
    commits = _Kept([*_COMMIT_KEYS, "offset"], _commit_picks, compact_rows)
    logs = _Kept([*_LOG_KEYS, "offset", "batch_last_offset", "timestamp"], _log_picks, compact_rows)
    for batch in batches:
        rtype = batch.column("record_type")
        is_commit = pc.and_(pc.and_(pc.equal(rtype, OFFSET_COMMIT), pc.is_null(batch.column("decode_error"))),
                            pc.invert(batch.column("is_transactional")))
        is_commit = pc.fill_null(is_commit, False)
        is_log = pc.fill_null(pc.and_(pc.is_in(rtype, pa.array([DATA, CONTROL])),
                                      pc.not_equal(batch.column("topic"), OFFSETS_TOPIC)), False)
        commits.add(batch, is_commit)
        logs.add(batch, is_log)
        rest = pc.invert(pc.or_(is_commit, is_log))
        if rest.true_count == batch.num_rows:
            yield batch
        elif rest.true_count:
            yield batch.filter(rest)
    yield from commits.result()
    yield from logs.result()


def window_ms(window: str) -> int:
    """A tumbling window as Spark's ``window()`` takes it (``"1 minute"``, ``"1 hour 30 minutes"``), in ms.

    Spark's interval units from weeks to milliseconds (``window()`` refuses
    months and years); the data source buckets commits with it, in the
    executors, where there is no Spark to ask.
    """
    text = window.strip().lower().removeprefix("interval").strip()
    total, pos = 0, 0
    while pos < len(text):
        m = _INTERVAL_PART.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"window must be like '1 minute' or '10 minutes' (weeks to milliseconds), got {window!r}")
        total += int(m.group(1)) * _UNITS_MS[m.group(2)]
        pos = m.end()
    if total <= 0:
        raise ValueError(f"window must be longer than 0, got {window!r}")
    return total


class _Partials:
    """Partial aggregates of one split, re-aggregated by their keys whenever enough new rows arrive."""

    def __init__(self, keys: list[str], aggs: list[tuple], refold: list[tuple], compact_rows: int) -> None:
        self.keys, self.aggs, self.refold, self.compact_rows = keys, aggs, refold, compact_rows
        self.pieces: list[pa.Table] = []
        self.fresh = 0

    def add(self, table: pa.Table) -> None:
        if table.num_rows:
            self.pieces.append(table.group_by(self.keys, use_threads=False).aggregate(self.aggs))
            self.fresh += table.num_rows
            if self.fresh >= self.compact_rows and len(self.pieces) > 1:
                self.pieces, self.fresh = [self.table()], 0

    def table(self) -> pa.Table | None:
        """The split's partials: the pieces merged by key (names as the pieces have them)."""
        if not self.pieces:
            return None
        merged = pa.concat_tables(self.pieces).group_by(self.keys, use_threads=False).aggregate(self.refold)
        return merged.rename_columns(_refold_names(merged.column_names, self.refold))


def _refold_names(names: list[str], refold: list[tuple]) -> list[str]:
    """``x_sum_sum`` -> ``x_sum``: a refold keeps the names of the first aggregation."""
    out = []
    for name in names:
        for col, how, *_ in refold:
            if name == f"{col}_{how}":
                name = col
        out.append(name)
    return out


_ALL = pc.CountOptions(mode="all")
_OVERVIEW_AGGS = [("offset", "count", _ALL), ("tombstone", "sum"), ("error", "sum"), ("timestamp", "min"),
                  ("timestamp", "max")]
_OVERVIEW_REFOLD = [("offset_count", "sum"), ("tombstone_sum", "sum"), ("error_sum", "sum"),
                    ("timestamp_min", "min"), ("timestamp_max", "max")]


def _overview_input(batch: pa.RecordBatch) -> pa.Table:
    cols = {k: batch.column(k) for k in OVERVIEW_KEYS}
    cols.update(offset=batch.column("offset"), timestamp=batch.column("timestamp"),
                tombstone=pc.cast(batch.column("is_tombstone"), pa.int64()),
                error=pc.cast(pc.is_valid(batch.column("decode_error")), pa.int64()))
    return pa.table(cols)


def _plain_commits(batch: pa.RecordBatch) -> pa.Array:
    """The records ``reports.commit_rates`` counts without a marker: decodable, plain, not a tombstone."""
    mask = pc.and_(pc.and_(pc.equal(batch.column("record_type"), OFFSET_COMMIT),
                           pc.is_null(batch.column("decode_error"))),
                   pc.invert(pc.or_(batch.column("is_transactional"), batch.column("is_tombstone"))))
    return pc.fill_null(mask, False)


def _rate_input(batch: pa.RecordBatch, width: int) -> pa.Table:
    commits = batch.filter(_plain_commits(batch))
    ts = commits.column("timestamp").to_numpy(zero_copy_only=False)
    return pa.table({"source_dir": commits.column("source_dir"), "group_id": commits.column("group_id"),
                     "commit_topic": commits.column("commit_topic"),
                     "window_start": pa.array(ts - np.mod(ts, width), pa.int64()),
                     "partition": commits.column("partition"), "batch_base_offset": commits.column("batch_base_offset"),
                     "commit_partition": commits.column("commit_partition"),
                     "one": pa.array(np.ones(len(commits), np.int64))})


def _partial_rows(kind: str, table: pa.Table, columns: Mapping[str, pa.Array], window: int | None) -> pa.RecordBatch:
    """Partial rows in :data:`REPORTS_SCHEMA`: ``columns`` filled, the rest NULL."""
    n = table.num_rows
    filled = {PARTIAL: pa.array([kind] * n, pa.string()), **columns}
    if window is not None:
        filled["window_ms"] = pa.array(np.full(n, window, np.int64))
    arrays = [filled[f.name].cast(f.type) if f.name in filled else pa.nulls(n, f.type) for f in REPORTS_SCHEMA]
    return pa.RecordBatch.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                                      schema=REPORTS_SCHEMA)


def _with_partial_columns(batch: pa.RecordBatch) -> pa.RecordBatch:
    n = batch.num_rows
    return pa.RecordBatch.from_arrays([*batch.columns, *(pa.nulls(n, f.type) for f in PARTIAL_FIELDS)],
                                      schema=REPORTS_SCHEMA)


def for_reports(batches: Iterator[pa.RecordBatch], window: int = DEFAULT_WINDOW_MS,
                compact_rows: int = 1 << 18) -> Iterator[pa.RecordBatch]:
    """The ``reports`` aggregation over one split's decoded batches (see the module doc)."""
    overview = _Partials(OVERVIEW_KEYS, _OVERVIEW_AGGS, _OVERVIEW_REFOLD, compact_rows)
    batches_per_key = _Partials([*RATE_KEYS, "partition", "batch_base_offset"], [("one", "sum")],
                                [("one_sum", "sum")], compact_rows)
    partitions = _Partials([*RATE_KEYS, "commit_partition"], [], [], compact_rows)

    def tapped() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            overview.add(_overview_input(batch))
            rates = _rate_input(batch, window)
            batches_per_key.add(rates)
            partitions.add(rates.select([*RATE_KEYS, "commit_partition"]))
            yield batch

    for kept in latest_offsets(tapped(), compact_rows):
        yield _with_partial_columns(kept)
    ov = overview.table()
    if ov is not None:
        yield _partial_rows(OVERVIEW_PARTIAL, ov, {
            **{k: ov[k] for k in OVERVIEW_KEYS}, "records": ov["offset_count"], "tombstones": ov["tombstone_sum"],
            "decode_errors": ov["error_sum"], "first_timestamp": ov["timestamp_min"],
            "last_timestamp": ov["timestamp_max"]}, None)
    per_batch = batches_per_key.table()
    if per_batch is not None:
        rates = per_batch.group_by(RATE_KEYS, use_threads=False).aggregate([("one_sum", "sum"),
                                                                            ("partition", "count", _ALL)])
        parts = partitions.table().group_by(RATE_KEYS, use_threads=False).aggregate([("commit_partition", "list")])
        # the same keys on both sides (Acero's join takes no list columns): sorted alike, they line up
        order = [(k, "ascending") for k in RATE_KEYS]
        rates, parts = rates.sort_by(order), parts.sort_by(order)
        joined = rates.append_column("commit_partition_list", parts["commit_partition_list"])
        yield _partial_rows(RATE_PARTIAL, joined, {
            **{k: joined[k] for k in RATE_KEYS}, "records": joined["one_sum_sum"],
            "requests": joined["partition_count"], "commit_partitions": joined["commit_partition_list"]}, window)


def aggregator(name: str | None, options: Mapping[str, str] | None = None
               ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]] | None:
    """The split-local aggregation called ``name`` (None: every record); ``windowMs`` for ``reports``."""
    if name is None or name == "" or name == "none":
        return None
    if name == LATEST_OFFSETS:
        return latest_offsets
    if name == REPORTS:
        width = int((options or {}).get("windowMs", DEFAULT_WINDOW_MS))
        if width <= 0:
            raise ValueError("option windowMs must be > 0")
        return lambda batches: for_reports(batches, width)
    raise ValueError(f"option aggregate must be one of {', '.join(('none', *AGGREGATIONS))}, got {name!r}")
