"""Input splits: runs of segments in log order, in whole waves of about equal bytes over the cores."""

from __future__ import annotations

from odradek.pipeline.decode import SegmentRef
from odradek.pipeline.splits import plan_splits


def _segments(tmp_path, sizes: list[int], partitions: int = 1) -> list[SegmentRef]:
    refs = []
    for i, size in enumerate(sizes):
        partition, base = i % partitions, i // partitions * 1000
        path = tmp_path / f"t-{partition}" / f"{base:020d}.log"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"\0" * size)
        refs.append(SegmentRef(str(path), str(tmp_path), "t", partition, base))
    return refs


def _bytes(splits: list[list[SegmentRef]]) -> list[int]:
    import os

    return [sum(os.path.getsize(r.path) for r in split) for split in splits]


def test_without_parallelism_segments_pack_up_to_the_split_size(tmp_path):
    refs = _segments(tmp_path, [40] * 10)
    assert _bytes(plan_splits(refs, split_bytes=100)) == [80, 80, 80, 80, 80]
    assert len(plan_splits(refs, split_bytes=0)) == 10


def test_a_small_log_is_one_split_per_core(tmp_path):
    refs = _segments(tmp_path, [12] * 24, partitions=8)
    splits = plan_splits(refs, split_bytes=1000, parallelism=2)
    assert _bytes(splits) == [144, 144]
    assert [r for s in splits for r in s] == sorted(refs, key=lambda r: (r.partition, r.base_offset))


def test_a_big_log_comes_in_whole_waves_within_the_split_size(tmp_path):
    refs = _segments(tmp_path, [12] * 24, partitions=8)
    splits = plan_splits(refs, split_bytes=100, parallelism=2)  # 288 bytes: 2 waves of 2 splits of 72
    assert _bytes(splits) == [72, 72, 72, 72]
    assert _bytes(plan_splits(refs, split_bytes=100, parallelism=1)) == [96, 96, 96]


def test_uneven_segments_are_cut_nearest_to_equal_shares(tmp_path):
    refs = _segments(tmp_path, [10, 300, 10, 5, 5])
    assert _bytes(plan_splits(refs, split_bytes=128, parallelism=2)) == [10, 300, 10, 10]


def test_fewer_segments_than_cores_give_a_split_each(tmp_path):
    refs = _segments(tmp_path, [50, 60])
    assert _bytes(plan_splits(refs, split_bytes=1000, parallelism=4)) == [50, 60]
    assert plan_splits([], split_bytes=1000, parallelism=4) == []
