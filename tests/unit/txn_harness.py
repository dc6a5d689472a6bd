"""A transaction coordinator over real ``__transaction_state`` logs, a manual clock and fake
marker targets: what the coordinator's unit tests drive (no sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.broker.clock import ManualClock
from odradek.broker.txn import TransactionCoordinator, TxnConfig
from odradek.broker.txn.coordinator import NEED_PRODUCER_ID, wait_promise
from odradek.broker.txn_contracts import TxnMarker
from odradek.protocol.errors import ErrorCode
from odradek.storage.config import FsyncMode, LogConfig
from odradek.storage.log import Log

E = ErrorCode
TOPIC = "orders"


class FakeMarkers:
    """``MarkerTarget``: records each marker; scripted errors first; an optional gate holds them."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int, TxnMarker]] = []
        self.errors: dict[tuple[str, int], list[ErrorCode]] = {}
        self.attempts = 0
        self.gate: asyncio.Event | None = None

    async def write_txn_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        self.attempts += 1
        scripted = self.errors.get((topic, partition))
        if scripted:
            return scripted.pop(0)
        if self.gate is not None:
            await self.gate.wait()
        self.written.append((topic, partition, marker))
        return E.NONE

    def hold(self) -> None:
        self.gate = asyncio.Event()

    def release(self) -> None:
        if self.gate is not None:
            self.gate.set()
        self.gate = None


class Harness:
    def __init__(self, directory: Path, *, partitions: int = 1, config: TxnConfig | None = None,
                 fsync: FsyncMode = FsyncMode.NEVER) -> None:
        self.directory = directory
        self.clock = ManualClock()
        self.config = config or TxnConfig(num_partitions=partitions)
        self.fsync = fsync
        self.logs = [Log.open(directory / f"__transaction_state-{p}", LogConfig(fsync=fsync))
                     for p in range(self.config.num_partitions)]
        self.markers = FakeMarkers()
        self.next_pid = 1000
        self.coord = self._coordinator()

    def _coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.clock, self.config, self.logs, markers=self.markers,
                                      group_partition=lambda group: 0,
                                      await_fsync=self.fsync is FsyncMode.ALWAYS)

    async def start(self) -> Harness:
        await self.coord.load()
        return self

    async def close(self) -> None:
        await self.coord.stop()
        for log in self.logs:
            await log.aclose()

    async def reload(self) -> TransactionCoordinator:
        """A restart: a new coordinator on the same logs, replayed from them."""
        await self.coord.stop()
        self.coord = self._coordinator()
        await self.coord.load()
        return self.coord

    async def reopen(self) -> TransactionCoordinator:
        """A restart with the logs reopened from disk (recovery included)."""
        await self.coord.stop()
        for log in self.logs:
            await log.aclose()
        self.logs = [Log.open(self.directory / f"__transaction_state-{p}", LogConfig(fsync=self.fsync))
                     for p in range(self.config.num_partitions)]
        return await self.reload()

    # --- requests (canonical codes; the handlers map them per version) ------------------------

    async def init(self, tid: str, timeout: int = 60000, pid: int = -1, epoch: int = -1):
        answer = self.coord.init_producer_id(tid, timeout, pid, epoch)
        if answer is NEED_PRODUCER_ID:
            self.next_pid += 1
            answer = self.coord.init_producer_id(tid, timeout, pid, epoch, fresh_pid=self.next_pid - 1)
        return await _result(answer)

    async def add(self, tid: str, pid: int, epoch: int, *partitions: int, topic: str = TOPIC) -> ErrorCode:
        return await _result(self.coord.add_partitions(tid, pid, epoch, [(topic, p) for p in partitions]))

    async def offsets(self, tid: str, pid: int, epoch: int, group: str = "g") -> ErrorCode:
        return await _result(self.coord.add_offsets(tid, pid, epoch, group))

    async def end(self, tid: str, pid: int, epoch: int, commit: bool) -> ErrorCode:
        return await _result(self.coord.end_txn(tid, pid, epoch, commit))

    async def settle(self) -> None:
        """Let every completion (markers, then the Complete record) finish."""
        for _ in range(3):
            await asyncio.sleep(0)
        await self.coord.idle()

    async def tick(self, ms: int) -> None:
        """Move the clock (firing its timers), then let the woken tasks run."""
        self.clock.advance(ms)
        for _ in range(10):
            await asyncio.sleep(0)

    def meta(self, tid: str):
        return self.coord.shard_for(tid).txns.get(tid)

    def state(self, tid: str) -> str | None:
        meta = self.meta(tid)
        return None if meta is None else meta.state.kafka_name

    def persisted(self) -> dict:
        view = {}
        for shard in self.coord.shards:
            view.update(shard.persisted_view())
        return view


async def _result(answer):
    return answer.result() if answer.done else await wait_promise(answer)
