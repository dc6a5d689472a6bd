"""Input splits of the ``odradek-log`` data source: runs of segment files sized for the cluster.

One task per segment file is right for a few big segments and wrong for a
production ``__consumer_offsets`` of 50 partitions with thousands of small
rolled segments (task overhead dominates), and for a split-local
aggregation (:mod:`odradek.pipeline.partial`), which prunes more the more of
one partition's log a task sees.  So segments are packed, in log order, into
splits of about ``split_bytes`` (Spark's ``spark.sql.files.maxPartitionBytes``
plays the same role for file sources): consecutive segments of one partition
stay together, and small partitions share a split.  A segment bigger than
``split_bytes`` is a split of its own (a task's memory is bounded by the
decoder's 4 MiB reads and one Arrow batch, not by the segment).  Given the
cluster's parallelism (the data source's ``parallelism`` option, which
``read_logs`` fills from ``defaultParallelism``), the splits come in whole
waves: their count is the smallest multiple of the parallelism that keeps
them within ``split_bytes``, and the log is cut where each is closest to an
equal share of the bytes.  Every core then gets work and finishes with the
others; each task costs tens of milliseconds of its own on top of its
segments, so a core's share is cut no finer than the split size asks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from odradek.pipeline.decode import SegmentRef

DEFAULT_SPLIT_BYTES = 128 << 20


def _size(ref: SegmentRef) -> int:
    try:
        return os.path.getsize(ref.path)
    except OSError:
        return 0


def plan_splits(refs: Sequence[SegmentRef], split_bytes: int = DEFAULT_SPLIT_BYTES,
                parallelism: int = 0) -> list[list[SegmentRef]]:
    """``refs`` in log order (data dir, topic, partition, base offset), cut into runs of ~``split_bytes``.

    ``split_bytes`` <= 0 keeps one split per segment; ``parallelism`` > 0
    cuts the log into whole waves of about equal splits (:func:`_even_cuts`).
    """
    ordered = sorted(refs, key=lambda r: (r.source_dir, r.topic, r.partition, r.base_offset))
    if split_bytes <= 0:
        return [[r] for r in ordered]
    sizes = [_size(r) for r in ordered]
    if parallelism > 0 and ordered:
        waves = max(1, -(-sum(sizes) // (parallelism * split_bytes)))
        cuts = _even_cuts(sizes, waves * parallelism)
        return [ordered[a:b] for a, b in zip([0, *cuts], [*cuts, len(ordered)], strict=True)]
    splits: list[list[SegmentRef]] = []
    current: list[SegmentRef] = []
    filled = 0
    for ref, size in zip(ordered, sizes, strict=True):
        if current and filled + size > split_bytes:
            splits.append(current)
            current, filled = [], 0
        current.append(ref)
        filled += size
    if current:
        splits.append(current)
    return splits


def _even_cuts(sizes: Sequence[int], count: int) -> list[int]:
    """Where to cut ``sizes`` into at most ``count`` non-empty runs of about equal sums.

    Cut k falls at the segment boundary whose running total is nearest to
    k/count of the whole (a later boundary than cut k-1; a cut with none
    left is dropped, so tiny inputs get fewer runs).
    """
    total = sum(sizes)
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    cuts: list[int] = []
    at = 0
    for k in range(1, count):
        goal = total * k / count
        best = at + 1
        if best >= len(sizes):
            break
        while best + 1 < len(sizes) and abs(prefix[best + 1] - goal) <= abs(prefix[best] - goal):
            best += 1
        cuts.append(best)
        at = best
    return cuts
