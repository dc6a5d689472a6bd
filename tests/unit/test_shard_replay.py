"""Replay keeps the live groups in step with the records: one rule on the live path and at load.

A simple group (offsets only) is created by replaying its first offset and
removed with its last; a group that has a record or offsets after a reload
exists live too.  Nothing changes before the records are durable, so a write
that fails leaves state as it was.
"""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.admin import delete_groups
from odradek.storage.config import FsyncMode

from .test_offsets_harness import E, OffsetsEnv, wait


@pytest.fixture
async def env(tmp_path):
    env = await OffsetsEnv(tmp_path).start()
    yield env
    await env.stop()


async def test_a_simple_group_lives_exactly_while_it_has_offsets(env):
    assert env.commit_now("g", [("t", 0, 1), ("t", 1, 1)]) == [E.NONE, E.NONE]
    group = env.shard().groups["g"]
    assert group.protocol_type is None and group.generation == 0  # a simple group
    assert env.delete("g", [("t", [0])])[0] is E.NONE
    assert env.shard().groups["g"] is group  # one offset left: still there
    assert env.delete("g", [("t", [1])])[0] is E.NONE
    assert "g" not in env.shard().groups  # its last tombstone removed it
    await env.restart()
    assert "g" not in env.shard().groups and env.shard().persisted_view() == ({}, {})


async def test_with_fsync_always_a_group_appears_and_goes_when_its_records_are_durable(tmp_path):
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS).start()
    try:
        first = env.commit("g", [("t", 0, 1)])
        assert not first.done and "g" not in env.shard().groups  # not yet durable: not yet there
        assert await wait(first) == [E.NONE]
        assert "g" in env.shard().groups
        deleted = delete_groups(env.coordinator, ["g"])
        assert "g" in env.shard().groups  # the tombstone is not durable yet
        assert await wait(deleted) == {"g": E.NONE}
        assert "g" not in env.shard().groups
    finally:
        await env.stop()


async def test_with_fsync_always_a_deletion_also_tombstones_a_commit_not_yet_durable(tmp_path):
    """A commit written just before DeleteGroups, its fsync round still running, is earlier in
    the log than the tombstones: left out of them, it came back after the acknowledged deletion
    (live and after a reload)."""
    env = await OffsetsEnv(tmp_path, fsync=FsyncMode.ALWAYS).start()
    try:
        assert await wait(env.commit("g", [("t", 0, 1)])) == [E.NONE]
        pending = env.commit("g", [("t", 1, 5)])
        assert not pending.done
        deleted = delete_groups(env.coordinator, ["g"])
        assert await wait(pending) == [E.NONE]
        assert await wait(deleted) == {"g": E.NONE}
        assert "g" not in env.shard().groups and env.shard().persisted_view() == ({}, {})
        await env.restart()
        assert "g" not in env.shard().groups and env.shard().persisted_view() == ({}, {})
    finally:
        await env.stop()


async def test_a_failed_tombstone_write_leaves_the_group_and_its_offsets(env, monkeypatch):
    assert env.commit_now("g", [("t", 0, 1)]) == [E.NONE]
    shard = env.shard()
    group = shard.groups["g"]
    monkeypatch.setattr(shard.log, "append_records", _broken)
    assert env.delete("g", [("t", [0])]) == (E.NOT_COORDINATOR, [])  # storage error, as Kafka maps it
    assert shard.groups["g"] is group and env.committed("g") == {("t", 0): 1}


def _broken(*args, **kwargs):
    raise OSError("disk gone")
