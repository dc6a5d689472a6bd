"""The coordinator runtime with a second kind of shard: nothing in it is specific to groups.

A key/value shard (what a transaction coordinator's ``__transaction_state``
shard would be, reduced to its bones) writes through the same runtime as the
group coordinator: staged in a turn, appended whole, answered after the
append (and after fsync when asked), applied only by replay, failed on a
failed append.  Reloading its log through the same replay gives its state.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.broker.runtime.promise import Promise
from odradek.broker.runtime.runtime import (
    CoordinatorResult,
    CoordinatorRuntime,
    ShardStatus,
    StagedWriteFailed,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import iter_batches
from odradek.storage.config import FsyncMode, LogConfig
from odradek.storage.log import Log


class KeyValueShard:
    """Only what the runtime asks of a shard: a partition, a status and ``replay``."""

    def __init__(self, runtime: CoordinatorRuntime, log: Log, *, await_fsync: bool = False) -> None:
        self.partition = 0
        self.status = ShardStatus.ACTIVE
        self.state: dict[str, str] = {}
        self.writer = runtime.writer(self, log, encode, lambda: 0, await_fsync=await_fsync)

    def replay(self, key: str, value: str | None) -> None:
        if value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value

    def put(self, **items: str) -> Promise:
        """An operation: records and an answer, no state change of its own."""
        result = CoordinatorResult(list(items.items()), "ok", lambda _answer, error: error.name)
        return result.answer_when(self.writer.write(result.records))


def encode(records: list[tuple[str, Any]]) -> list[tuple[bytes | None, bytes | None]]:
    return [(k.encode(), None if v is None else v.encode()) for k, v in records]


def reload(log: Log) -> dict[str, str]:
    """The state a restart rebuilds: the log replayed through the shard's own ``replay``."""
    shard = KeyValueShard(CoordinatorRuntime(), log)
    for _header, records in iter_batches(log.read(0, 1 << 20)):
        for r in records:
            shard.replay(r.key.decode(), None if r.value is None else r.value.decode())
    return shard.state


def batches(log: Log) -> list[int]:
    return [len(records) for _h, records in iter_batches(log.read(0, 1 << 20))]


@pytest.fixture
async def log(tmp_path):
    log = Log.open(tmp_path / "kv-0", LogConfig(fsync=FsyncMode.NEVER))
    yield log
    await log.aclose()


async def test_a_turn_appends_each_request_whole_and_answers_after_the_append(log):
    runtime = CoordinatorRuntime()
    shard = KeyValueShard(runtime, log)
    runtime.begin()
    first, second = shard.put(a="1", b="1"), shard.put(a="2")
    assert first.result() == "ok" and second.result() == "ok"
    assert shard.state == {"a": "2", "b": "1"} and log.log_end_offset == 0  # applied, staged
    runtime.end()
    assert batches(log) == [3]  # both requests, whole, in one batch
    assert reload(log) == shard.state


async def test_with_fsync_always_the_answer_and_the_replay_wait_for_the_fsync(tmp_path):
    log = Log.open(tmp_path / "kv-0", LogConfig(fsync=FsyncMode.ALWAYS))
    try:
        runtime = CoordinatorRuntime()
        shard = KeyValueShard(runtime, log, await_fsync=True)
        runtime.begin()
        answer = shard.put(a="1")
        runtime.end()
        assert not answer.done and shard.state == {}  # appended, not yet durable
        for _ in range(400):
            if answer.done:
                break
            await asyncio.sleep(0.005)
        assert answer.result() == "ok" and shard.state == {"a": "1"} == reload(log)
    finally:
        await log.aclose()


async def test_a_failed_append_fails_the_shard_and_the_held_answers(log, monkeypatch):
    runtime = CoordinatorRuntime()
    shard = KeyValueShard(runtime, log)
    failures: list[tuple[Exception, list]] = []
    runtime.on_writes_failed = lambda exc, held: failures.append((exc, held))

    def broken(*args, **kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(log, "append_records", broken)
    runtime.begin()
    shard.put(a="1")
    with pytest.raises(StagedWriteFailed):
        runtime.end()
    assert shard.status is ShardStatus.FAILED
    assert shard.put(b="1").result() == ErrorCode.NOT_COORDINATOR.name  # answers nothing more

    class Holder:
        sent = False

        def send_held(self) -> None:
            self.sent = True

    shard.status = ShardStatus.ACTIVE  # as after a reload; the disk is still gone
    holder = Holder()
    runtime.open_turn()
    shard.put(c="1")
    runtime.hold(holder)
    await asyncio.sleep(0)  # the turn ends
    assert not holder.sent and failures and failures[0][1] == [holder]
