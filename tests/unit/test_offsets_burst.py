"""Staged coordinator writes (coordinator/burst.py): whole requests per batch, nothing staged outside."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.protocol.records import iter_batches

from .test_offsets_harness import E, OffsetsEnv


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
    burst = env.coordinator.burst
    burst.begin()
    for i in range(6):  # each request: 2 partitions, ~330 bytes of records
        assert env.commit_now("g", [("t", 0, i, "m" * 120), ("t", 1, i, "m" * 120)]) == [E.NONE, E.NONE]
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 5}  # applied at once, for the read's next request
    assert log.log_end_offset == 0  # ... but not yet appended
    burst.end()
    got = batches(env)
    assert [o for b in got for o in b] == list(range(12))
    assert all(len(b) % 2 == 0 for b in got) and 1 < len(got) < 6  # requests whole, several per batch
    await env.restart()
    assert env.committed("g") == {("t", 0): 5, ("t", 1): 5}


async def test_writes_outside_a_burst_go_straight_to_the_log(env):
    assert env.commit_now("g", [("t", 0, 1)]) == [E.NONE]
    assert env.shard().log.log_end_offset == 1
    burst = env.coordinator.burst
    burst.begin()
    burst.end()
    assert env.commit_now("g", [("t", 0, 2)]) == [E.NONE]
    assert batches(env) == [[0], [1]]


async def test_a_request_too_large_alone_is_refused_not_staged(env):
    log = env.shard().log
    log.config = dataclasses.replace(log.config, max_message_bytes=300)
    burst = env.coordinator.burst
    burst.begin()
    assert env.commit_now("g", [("t", p, 1, "m" * 100) for p in range(4)]) == [E.INVALID_COMMIT_OFFSET_SIZE] * 4
    burst.end()
    assert log.log_end_offset == 0 and env.committed("g") == {}
