"""Staged coordinator writes (runtime/runtime.py): whole requests per batch, in order, nothing staged outside."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.broker.runtime import runtime as runtime_module
from odradek.broker.runtime.runtime import ShardStatus, StagedWriteFailed
from odradek.protocol.records import iter_batches
from odradek.storage.config import FsyncMode

from .test_offsets_harness import E, OffsetsEnv, wait


@pytest.fixture
async def env(tmp_path):
    env = await OffsetsEnv(tmp_path).start()
    yield env
    await env.stop()


def batches(env) -> list[list[int]]:
    log = env.shard().log
    return [[r.offset for r in records] for _h, records in iter_batches(log.read(0, 1 << 22))]


async def test_staged_requests_share_a_batch_until_it_would_be_too_large(env):
    log = env.shard().log
    log.config = dataclasses.replace(log.config, max_message_bytes=1000)
    runtime = env.coordinator.runtime
    runtime.begin()
    for i in range(6):  # each request: 2 partitions, ~330 bytes of records
        assert env.commit_now("g", [("t", 0, i, "m" * 120), ("t", 1, i, "m" * 120)]) == [E.NONE, E.NONE]
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 5}  # applied at once, for the read's next request
    assert log.log_end_offset == 0  # ... but not yet appended
    runtime.end()
    got = batches(env)
    assert [o for b in got for o in b] == list(range(12))
    assert all(len(b) % 2 == 0 for b in got) and 1 < len(got) < 6  # requests whole, several per batch
    await env.restart()
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 5}


async def test_writes_outside_a_turn_go_straight_to_the_log(env):
    assert env.commit_now("g", [("t", 0, 1)]) == [E.NONE]
    assert env.shard().log.log_end_offset == 1
    runtime = env.coordinator.runtime
    runtime.begin()
    runtime.end()
    assert env.commit_now("g", [("t", 0, 2)]) == [E.NONE]
    assert batches(env) == [[0], [1]]


async def test_a_request_too_large_alone_is_refused_not_staged(env):
    log = env.shard().log
    log.config = dataclasses.replace(log.config, max_message_bytes=300)
    runtime = env.coordinator.runtime
    runtime.begin()
    assert env.commit_now("g", [("t", p, 1, "m" * 100) for p in range(4)]) == [E.INVALID_COMMIT_OFFSET_SIZE] * 4
    runtime.end()
    assert log.log_end_offset == 0 and env.committed("g") == {}


async def test_a_request_too_large_to_stage_goes_after_the_staged_ones(env, monkeypatch):
    """Log order must be the order state saw, or a reload would bring back an older offset."""
    real_bound = runtime_module.pairs_batch_size_bound
    monkeypatch.setattr(runtime_module, "pairs_batch_size_bound",  # a bound above the limit, an actual size below
                        lambda pairs: 1 << 30 if len(pairs) > 1 else real_bound(pairs))
    runtime = env.coordinator.runtime
    runtime.begin()
    assert env.commit_now("g", [("t", 0, 1)]) == [E.NONE]  # staged
    assert env.commit_now("g", [("t", 0, 2), ("t", 1, 2)]) == [E.NONE, E.NONE]  # straight to the log
    runtime.end()
    assert batches(env) == [[0], [1, 2]]
    await env.restart()
    assert env.committed("g") == {("t", 0): 2, ("t", 1): 2}


async def test_fsync_always_requests_share_a_batch_and_wait_for_its_round(tmp_path):
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS).start()
    try:
        runtime = env.coordinator.runtime
        runtime.begin()
        first, second = env.commit("g", [("t", 0, 1)]), env.commit("h", [("t", 0, 2)])
        assert not first.done and not second.done
        assert env.shard().log.log_end_offset == 0  # staged
        error, parts = env.fetch("g", [("t", [0])], require_stable=True)
        assert parts[0].error is E.UNSTABLE_OFFSET_COMMIT
        runtime.end()
        assert batches(env) == [[0, 1]]
        assert not first.done  # appended, not yet fsynced
        assert await wait(first) == [E.NONE] and await wait(second) == [E.NONE]
        assert env.shard().log.durability.recovery_point >= 2
        assert env.committed("g") == {("t", 0): 1} and env.committed("h") == {("t", 0): 2}
    finally:
        await env.stop()


async def test_an_unexpected_error_in_one_shard_fails_it_and_still_flushes_the_others(tmp_path, monkeypatch):
    env = await OffsetsEnv(tmp_path, partitions=2).start()
    try:
        groups: dict[int, str] = {}
        i = 0
        while len(groups) < 2:  # one group per shard
            groups.setdefault(env.coordinator.partition_for(f"g{i}"), f"g{i}")
            i += 1
        first, second = env.coordinator.shards

        def broken(*args, **kwargs):
            raise ValueError("not an I/O error")

        monkeypatch.setattr(first.log, "append_records", broken)
        runtime = env.coordinator.runtime
        runtime.begin()
        assert env.commit_now(groups[first.partition], [("t", 0, 1)]) == [E.NONE]
        assert env.commit_now(groups[second.partition], [("t", 0, 1)]) == [E.NONE]
        with pytest.raises(StagedWriteFailed):  # the server closes the waiting connections unanswered
            runtime.end()
        assert first.status is ShardStatus.FAILED  # its state holds a record the log lacks
        for offset in (2, 3):  # the other shard's later commits still reach its log
            runtime.begin()
            assert env.commit_now(groups[second.partition], [("t", 0, offset)]) == [E.NONE]
            runtime.end()
        assert second.log.log_end_offset == 3
    finally:
        await env.stop()


@pytest.mark.parametrize("fsync", [FsyncMode.NEVER, FsyncMode.ALWAYS])
async def test_a_transactional_write_gets_a_batch_of_its_own_in_its_place(tmp_path, fsync):
    env = await OffsetsEnv(tmp_path, fsync=fsync).start()
    try:
        runtime = env.coordinator.runtime
        runtime.begin()
        writes = [env.commit("g", [("t", 0, 1)]), env.commit("g", [("t", 1, 1)]),
                  env.txn_commit("g", [("t", 0, 2), ("t", 1, 2)], producer=7),
                  env.commit("g", [("t", 2, 1)]), env.marker("g", producer=7, commit=True),
                  env.commit("g", [("t", 3, 1)])]
        runtime.end()
        for w in writes:
            assert await wait(w) in ([E.NONE], [E.NONE, E.NONE], E.NONE)
        log = env.shard().log
        got = [(h.is_transactional, h.is_control, [r.offset for r in records])
               for h, records in iter_batches(log.read(0, 1 << 22))]
        assert got == [(False, False, [0, 1]), (True, False, [2, 3]), (False, False, [4]),
                       (True, True, [5]), (False, False, [6])]
        assert env.committed("g") == {("t", 0): 2, ("t", 1): 2, ("t", 2): 1, ("t", 3): 1}
        await env.restart()
        assert env.committed("g") == {("t", 0): 2, ("t", 1): 2, ("t", 2): 1, ("t", 3): 1}
    finally:
        await env.stop()


async def test_staged_requests_keep_each_its_own_timestamp_in_their_batch(env):
    """Requests staged at one clock reading write their batch without per-record deltas; at
    several, each record keeps its request's time (the batch's base is the first's)."""
    runtime = env.coordinator.runtime
    start = env.clock.now_ms()
    runtime.begin()
    env.commit_now("g", [("t", 0, 1), ("t", 1, 1)])
    env.commit_now("g", [("t", 0, 2)])
    runtime.end()
    runtime.begin()
    env.commit_now("g", [("t", 0, 3)])
    env.clock.advance(7)
    env.commit_now("g", [("t", 1, 4)])
    runtime.end()
    got = [(h.base_timestamp, h.max_timestamp, [r.timestamp for r in records])
           for h, records in iter_batches(env.shard().log.read(0, 1 << 22))]
    assert got == [(start, start, [start] * 3), (start, start + 7, [start, start + 7])]
