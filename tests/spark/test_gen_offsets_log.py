"""scripts/gen_offsets_log.py writes a production-shaped __consumer_offsets the decoder reads whole."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

from odradek.offsets.records import partition_for  # noqa: E402
from odradek.pipeline.decode import decode_segment_file, find_segments  # noqa: E402

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_generated_log_has_every_pattern_and_decodes_cleanly(tmp_path):
    out = tmp_path / "data"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_offsets_log.py"), str(out), "--records", "60000",
                    "--groups", "300", "--workers", "1", "--segment-mb", "0.03"], check=True, timeout=300,
                   capture_output=True)
    summary = json.loads((out / "generated.json").read_text())
    refs = find_segments([str(out)])
    assert {r.partition for r in refs} == set(range(50))
    assert any(r.base_offset > 0 for r in refs), "--segment-mb should roll segments"
    kinds: collections.Counter = collections.Counter()
    placed = True
    for ref in refs:
        for batch in decode_segment_file(ref, strict=True):
            assert batch.column("decode_error").null_count == batch.num_rows
            for rtype, txn, tomb, ctype, group in zip(
                    *(batch.column(c).to_pylist() for c in ("record_type", "is_transactional", "is_tombstone",
                                                              "control_type", "group_id")), strict=True):
                kinds[(rtype, txn, tomb, ctype)] += 1
                placed &= group is None or partition_for(group, 50) == ref.partition
    assert placed, "every group's records sit in the partition Kafka's hash gives it"
    assert sum(kinds.values()) == summary["records"] >= 60000
    assert kinds[("offset_commit", False, False, None)] == summary["commits"] > 0
    assert kinds[("offset_commit", True, False, None)] == summary["txn_commits"] > 0
    assert kinds[("offset_commit", False, True, None)] == summary["tombstones"] > 0
    assert kinds[("group_metadata", False, True, None)] == summary["group_tombstones"] > 0
    assert kinds[("group_metadata", False, False, None)] == summary["group_records"] > 300  # rebalances
    assert kinds[("control", True, False, 1)] == summary["txn_committed"] > 0
    assert kinds[("control", True, False, 0)] == summary["txn_aborted"] > 0
    assert summary["txn_pending"] > 0

    # markers every few batches: the row path's batches are gathered per run of the column path
    # (one Arrow batch, sliced into place), and the rows stay exactly the row path's, in log order
    for ref in refs[:10]:
        columnar = pa.Table.from_batches(list(decode_segment_file(ref, max_rows=1000)))
        rows = pa.Table.from_batches(list(decode_segment_file(ref, columnar=False, max_rows=1000)))
        assert columnar.equals(rows), ref
