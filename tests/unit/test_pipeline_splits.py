"""The data source's split plan: runs of segments in log order, balanced into whole waves over the cores."""

from __future__ import annotations

from pathlib import Path

from odradek.pipeline.decode import SegmentRef
from odradek.pipeline.splits import plan_splits


def _segments(tmp_path: Path, sizes: list[int]) -> list[SegmentRef]:
    refs = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"p-{i}" / "00000000000000000000.log"
        path.parent.mkdir()
        path.write_bytes(b"x" * size)
        refs.append(SegmentRef(str(path), str(tmp_path), "__consumer_offsets", i, 0))
    return refs


def _bytes(splits: list[list[SegmentRef]]) -> list[int]:
    return [sum(Path(r.path).stat().st_size for r in s) for s in splits]


def test_splits_are_whole_waves_of_about_equal_bytes(tmp_path):
    # 50 partitions of 1,300 bytes on 2 cores: runs of at most a sixth each used to leave a
    # seventh, short split that ran alone on one core
    refs = _segments(tmp_path, [1300] * 50)
    splits = plan_splits(refs, 128 << 20, parallelism=2)
    assert len(splits) == 6
    assert max(_bytes(splits)) - min(_bytes(splits)) <= 1300
    assert [r for s in splits for r in s] == sorted(refs, key=lambda r: r.partition)  # log order, nothing lost


def test_split_bytes_bounds_a_split_up_to_half_a_segment_at_either_end(tmp_path):
    refs = _segments(tmp_path, [1000, 5000, 300, 300, 2500, 700, 4000, 100])
    for split_bytes in (1000, 2000, 4000):
        splits = plan_splits(refs, split_bytes, parallelism=0)
        assert [r for s in splits for r in s] == refs
        for run in splits:
            sizes = _bytes([[r] for r in run])
            assert sum(sizes) - sizes[0] / 2 - sizes[-1] / 2 <= split_bytes or len(run) == 1
    assert len(plan_splits(refs, 0)) == len(refs)
    assert len(plan_splits(refs, 128 << 20)) == 1


def test_empty_segments_make_one_split(tmp_path):
    refs = _segments(tmp_path, [0, 0, 0])
    assert plan_splits(refs, 128 << 20, parallelism=2) == [refs]
