"""The split-local aggregation in one process (no Spark): what a task keeps, against a plain replay.

``latest_offsets`` keeps each commit key's highest-offset row and, per
data-topic partition, the rows holding its lowest offset, highest batch end
and newest timestamp, and passes everything else through.  It picks winners
on a few columns and copies only them whole, compacting every
``compact_rows`` rows; the rows it keeps must not depend on where the
compactions fall, nor on whether a split's offsets arrive in order.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

import pyarrow as pa  # noqa: E402

from odradek.pipeline.decode import (  # noqa: E402
    CONTROL,
    DATA,
    OFFSET_COMMIT,
    OFFSETS_TOPIC,
    decode_segment_file,
    find_segments,
)
from odradek.pipeline.partial import latest_offsets  # noqa: E402

COMMIT_KEY = ("source_dir", "group_id", "commit_topic", "commit_partition")
LOG_KEY = ("source_dir", "topic", "partition")


def _rows(batches) -> list[dict]:
    return [r for b in batches for r in pa.Table.from_batches([b]).to_pylist()]


def _canon(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows)


def _replayed(rows: list[dict]) -> list[dict]:
    """What latest_offsets must keep, the slow way: a pass over every row in order."""
    commits: dict[tuple, dict] = {}
    logs: dict[tuple, dict[str, dict]] = {}
    rest = []
    for r in rows:
        if r["record_type"] == OFFSET_COMMIT and r["decode_error"] is None and r["is_transactional"] is False:
            k = tuple(r[c] for c in COMMIT_KEY)
            if k not in commits or r["offset"] >= commits[k]["offset"]:  # ties: the later row
                commits[k] = r
        elif r["record_type"] in (DATA, CONTROL) and r["topic"] != OFFSETS_TOPIC:
            best = logs.setdefault(tuple(r[c] for c in LOG_KEY), {})
            if "first" not in best or r["offset"] < best["first"]["offset"]:
                best["first"] = r
            for name, col in (("end", "batch_last_offset"), ("newest", "timestamp")):
                if name not in best or r[col] >= best[name][col]:
                    best[name] = r
        else:
            rest.append(r)
    kept = {id(r): r for b in logs.values() for r in b.values()}
    return rest + list(commits.values()) + list(kept.values())


@pytest.mark.parametrize("compact_rows", [1, 7, 1 << 18])
@pytest.mark.parametrize("order", ["log", "partitions reversed"])
def test_latest_offsets_keeps_the_winners_wherever_the_compactions_fall(scenario, compact_rows, order):
    refs = find_segments([str(scenario.parent)])
    if order != "log":  # a split whose offsets do not arrive in order (several partitions, newest first)
        refs = sorted(refs, key=lambda r: (r.source_dir, r.topic, -r.partition, r.base_offset))
    batches = [b for ref in refs for b in decode_segment_file(ref, max_rows=5)]
    every = _rows(batches)
    kept = _rows(latest_offsets(iter(batches), compact_rows=compact_rows))
    assert len(kept) < len(every)
    assert _canon(kept) == _canon(_replayed(every))
