"""OffsetFetch (Kafka's GroupCoordinator.handleFetchOffsets): answers, and where each version puts a group-level error."""

from __future__ import annotations

import pytest

from odradek.broker.runtime.runtime import ShardStatus
from odradek.offsets.records import partition_for
from odradek.storage.config import FsyncMode

from .test_offsets_harness import E, OffsetsEnv, wait


@pytest.fixture
async def env(tmp_path):
    env = await OffsetsEnv(tmp_path, partitions=2).start()
    yield env
    await env.stop()


def groups_on_both_shards() -> tuple[str, str]:
    names = [f"group-{i}" for i in range(20)]
    first = next(n for n in names if partition_for(n, 2) == 0)
    second = next(n for n in names if partition_for(n, 2) == 1)
    return first, second


def fetch_body(version: int, group: str, topics: list[tuple[str, list[int]]] | None,
               require_stable: bool = False, more: list | None = None) -> dict:
    wire_topics = None if topics is None else [{"name": n, "partition_indexes": ps} for n, ps in topics]
    if version >= 8:
        groups = [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": wire_topics}]
        for g, ts in more or []:
            groups.append({"group_id": g, "member_id": None, "member_epoch": -1,
                           "topics": None if ts is None else
                           [{"name": n, "partition_indexes": ps} for n, ps in ts]})
        return {"groups": groups, "require_stable": require_stable}
    return {"group_id": group, "topics": wire_topics, "require_stable": require_stable}


def partitions_of(topics) -> dict[tuple[str, int], tuple]:
    return {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                          p.error_code)
            for t in topics for p in t.partitions}


# --- answers ---------------------------------------------------------------------------------------

async def test_committed_unknown_partition_and_unknown_group(env):
    env.commit_now("g", [("t", 0, 5, "m", 2)])
    error, parts = env.fetch("g", [("t", [0, 1]), ("nope", [3])])
    assert error is E.NONE
    assert [(f.topic, f.partition, f.offset, f.leader_epoch, f.metadata, f.error) for f in parts] == [
        ("t", 0, 5, 2, "m", E.NONE), ("t", 1, -1, -1, "", E.NONE), ("nope", 3, -1, -1, "", E.NONE)]
    error, parts = env.fetch("absent", [("t", [0])])
    assert error is E.NONE and parts[0].offset == -1 and parts[0].metadata == ""


async def test_all_partitions_form_lists_only_committed(env):
    env.commit_now("g", [("u", 1, 3), ("t", 2, 1), ("t", 0, 5)])
    error, parts = env.fetch("g")
    assert [(f.topic, f.partition, f.offset) for f in parts] == [("t", 0, 5), ("t", 2, 1), ("u", 1, 3)]
    assert env.fetch("absent") == (E.NONE, [])


async def test_group_state_does_not_matter(env):
    env.commit_now("g", [("t", 0, 5)])
    env.consumer_group("g", {"m1": ["t"]})
    assert env.committed("g") == {("t", 0): 5}


async def test_loading_shard_is_a_group_level_error(env):
    env.shard("g").status = ShardStatus.LOADING
    assert env.fetch("g", [("t", [0])]) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])


async def test_require_stable_sees_a_pending_commit(tmp_path):
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS).start()
    assert await wait(env.commit("g", [("t", 0, 1)])) == [E.NONE]
    promise = env.commit("g", [("t", 0, 2)])
    _, parts = env.fetch("g", [("t", [0, 1])], require_stable=True)
    assert [(f.offset, f.error) for f in parts] == [(-1, E.UNSTABLE_OFFSET_COMMIT), (-1, E.NONE)]
    _, parts = env.fetch("g", [("t", [0])])
    assert parts[0].offset == 1  # without require_stable: the last committed value
    await wait(promise)
    _, parts = env.fetch("g", [("t", [0])], require_stable=True)
    assert (parts[0].offset, parts[0].error) == (2, E.NONE)
    await env.stop()


# --- versions on the wire -------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(10))
async def test_every_version_reads_back(env, version):
    env.commit_now("g", [("t", 0, 5, "meta", 3)])
    response = await env.wire(9, version, fetch_body(version, "g", [("t", [0, 1])]))
    topics = response.groups[0].topics if version >= 8 else response.topics
    epoch = 3 if version >= 5 else -1
    assert partitions_of(topics) == {("t", 0): (5, epoch, "meta", 0), ("t", 1): (-1, -1, "", 0)}


@pytest.mark.parametrize("version", range(2, 10))
async def test_null_topics_means_every_committed_partition(env, version):
    env.commit_now("g", [("t", 0, 5), ("u", 1, 6)])
    response = await env.wire(9, version, fetch_body(version, "g", None))
    topics = response.groups[0].topics if version >= 8 else response.topics
    assert {k: v[0] for k, v in partitions_of(topics).items()} == {("t", 0): 5, ("u", 1): 6}


@pytest.mark.parametrize("version", [0, 1])
async def test_v0_v1_put_group_errors_on_every_partition(env, version):
    env.shard("g").status = ShardStatus.LOADING
    response = await env.wire(9, version, fetch_body(version, "g", [("t", [0, 1]), ("u", [0])]))
    assert partitions_of(response.topics) == {
        tp: (-1, -1, "", E.COORDINATOR_LOAD_IN_PROGRESS) for tp in [("t", 0), ("t", 1), ("u", 0)]}


@pytest.mark.parametrize("version", range(2, 8))
async def test_v2_to_v7_put_group_errors_at_the_top(env, version):
    env.shard("g").status = ShardStatus.FAILED
    response = await env.wire(9, version, fetch_body(version, "g", [("t", [0, 1])]))
    assert response.error_code == E.NOT_COORDINATOR and response.topics == []


@pytest.mark.parametrize("version", [8, 9])
async def test_v8_plus_route_each_group_and_error_per_group(env, version):
    first, second = groups_on_both_shards()
    env.commit_now(first, [("t", 0, 10)])
    env.commit_now(second, [("t", 0, 20)])
    body = fetch_body(version, first, [("t", [0])], more=[(second, None), ("", [("t", [0])])])
    response = await env.wire(9, version, body)
    answers = {g.group_id: (g.error_code, partitions_of(g.topics)) for g in response.groups}
    assert answers[first] == (0, {("t", 0): (10, -1, "", 0)})
    assert answers[second] == (0, {("t", 0): (20, -1, "", 0)})
    assert answers[""] == (0, {("t", 0): (-1, -1, "", 0)})
    env.shard(second).status = ShardStatus.LOADING
    response = await env.wire(9, version, body)
    answers = {g.group_id: (g.error_code, partitions_of(g.topics)) for g in response.groups}
    assert answers[second] == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
    assert answers[first][0] == 0


@pytest.mark.parametrize("version", [7, 8, 9])
async def test_require_stable_on_the_wire(tmp_path, version):
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS).start()
    promise = env.commit("g", [("t", 0, 2)])
    response = await env.wire(9, version, fetch_body(version, "g", [("t", [0])], require_stable=True))
    topics = response.groups[0].topics if version >= 8 else response.topics
    assert partitions_of(topics)[("t", 0)] == (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT)
    await wait(promise)
    await env.stop()
