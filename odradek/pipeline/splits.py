"""Input splits of the ``odradek-log`` data source: runs of segment files sized for the cluster.

One task per segment file is right for a few big segments and wrong for a
production ``__consumer_offsets`` of 50 partitions with thousands of small
rolled segments (task overhead dominates), and for a split-local
aggregation (:mod:`odradek.pipeline.partial`), which prunes more the more of
one partition's log a task sees.  So segments are packed, in log order, into
splits of at most about ``split_bytes`` (Spark's ``spark.sql.files.maxPartitionBytes``
plays the same role for file sources): consecutive segments of one partition
stay together, and small partitions share a split.  Segments are never cut,
so a split may pass its size by half a segment at either end (a task's memory is
bounded by the decoder's 4 MiB reads and one Arrow batch, not by the segment).  Given the
cluster's parallelism (the data source's ``parallelism`` option, which
``read_logs`` fills from ``defaultParallelism``), a split is also no larger
than about a third of each core's share, so every core gets work on small inputs.
The splits are balanced runs of about the same bytes, as many as a whole
number of waves over the cores: no short last task running alone on one core
while the other idles (the 1 M-record ``odradek-report all`` had six splits
of ~11 MiB and a seventh of 4).
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
    caps a split at about total / (3 × parallelism) bytes and makes the
    number of splits a multiple of it.  Each segment joins the run its middle
    byte falls in, so a split exceeds its share by at most half a segment at
    either end.
    """
    ordered = sorted(refs, key=lambda r: (r.source_dir, r.topic, r.partition, r.base_offset))
    if split_bytes <= 0:
        return [[r] for r in ordered]
    sizes = [_size(r) for r in ordered]
    total = sum(sizes)
    if parallelism > 0:
        split_bytes = min(split_bytes, max(1, -(-total // (3 * parallelism))))
    count = max(1, -(-total // split_bytes))
    if parallelism > 0:  # whole waves: no last task running alone on one core
        count = -(-count // parallelism) * parallelism
    share = max(total / count, 1.0)
    splits: list[list[SegmentRef]] = []
    current: list[SegmentRef] = []
    index = 0  # the share the current split fills
    done = 0
    for ref, size in zip(ordered, sizes, strict=True):
        # a segment goes to the share its middle falls in: runs of about total / count each
        at = min(count - 1, int((done + size / 2) // share))
        if current and at > index:
            splits.append(current)
            current = []
        index = max(index, at)
        current.append(ref)
        done += size
    if current:
        splits.append(current)
    return splits
