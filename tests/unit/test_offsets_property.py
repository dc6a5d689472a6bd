"""Property: any sequence of commits, transactional commits and their markers, deletions and
expiry sweeps reloads to the same state.

Records are the only way state survives, so after every random history the
shards' persisted views, the live groups' kinds and every OffsetFetch
answer must come back identical from the log alone.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_offsets_harness import MINUTE, OffsetsEnv

GROUPS = ["a", "b", "c", "d"]
TPS = [("t", 0), ("t", 1), ("t", 3), ("u", 0), ("u", 1), ("v", 0)]

commit = st.tuples(st.just("commit"), st.sampled_from(GROUPS),
                   st.lists(st.tuples(st.sampled_from(TPS), st.integers(0, 1000)), min_size=1, max_size=4),
                   st.sampled_from([-1, 2 * MINUTE, 30 * MINUTE]))
delete = st.tuples(st.just("delete"), st.sampled_from(GROUPS), st.lists(st.sampled_from(TPS), max_size=3),
                   st.just(0))
advance = st.tuples(st.just("advance"), st.just(""), st.just([]), st.integers(0, 20 * MINUTE))
topic_gone = st.tuples(st.just("drop-topic"), st.sampled_from(["t", "u", "v"]), st.just([]), st.just(0))
txn = st.tuples(st.just("txn"), st.sampled_from(GROUPS),
                st.lists(st.tuples(st.sampled_from(TPS), st.integers(0, 1000)), min_size=1, max_size=3),
                st.sampled_from([1000, 2000]))
marker = st.tuples(st.just("marker"), st.sampled_from(GROUPS), st.just([]),
                   st.sampled_from([1000, 2000, -1000, -2000]))  # negative: ABORT
ops = st.lists(st.one_of(commit, commit, delete, advance, topic_gone, txn, txn, marker), max_size=25)


def answers(env) -> dict:
    stable = {}
    for g in GROUPS:
        error, parts = env.fetch(g, [(t, [p]) for t, p in TPS], require_stable=True)
        stable[g] = (error, [(f.topic, f.partition, f.offset, f.error) for f in parts])
    return {g: env.committed(g) for g in GROUPS}, stable


async def play(root: Path, history) -> None:
    env = await OffsetsEnv(root, partitions=2, offsets_retention_ms=10 * MINUTE,
                           offsets_retention_check_interval_ms=MINUTE).start()
    try:
        for op, group, items, n in history:
            if op == "commit":
                env.commit_now(group, [(t, p, o) for (t, p), o in items], version=2 if n != -1 else 8,
                               retention=n)
            elif op == "delete":
                by_topic: dict[str, list[int]] = {}
                for t, p in items:
                    by_topic.setdefault(t, []).append(p)
                env.delete(group, list(by_topic.items()))
            elif op == "advance":
                env.clock.advance(n)
            elif op == "txn":
                env.txn_commit_now(group, [(t, p, o) for (t, p), o in items], producer=n)
            elif op == "marker":
                env.marker_now(group, producer=abs(n), commit=n > 0)
            else:
                env.coordinator.on_topics_deleted([group])
        env.coordinator.expiry.sweep()  # a restart sweeps each shard as it loads: start level
        views = [(s.persisted_view(), s.txn_view()) for s in env.coordinator.shards]
        kinds = {g: (grp.state, grp.protocol_type) for s in env.coordinator.shards
                 for g, grp in s.groups.items()}
        before = answers(env)
        await env.restart()
        assert [(s.persisted_view(), s.txn_view()) for s in env.coordinator.shards] == views
        assert {g: (grp.state, grp.protocol_type) for s in env.coordinator.shards
                for g, grp in s.groups.items()} == kinds
        assert answers(env) == before
    finally:
        await env.stop()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_reload_reproduces_state(history):
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(play(Path(d), history))
