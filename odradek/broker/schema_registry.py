"""The schema registry's store: its state kept in the ``_schemas`` topic, through the data plane.

The topic (``kafkastore.topic``, compacted, one partition, as Confluent creates it) is
replayed at start into a :class:`RegistryState`; a write computes its records with the
registry's operations, appends them through the data plane, waits until they are durable
(an ``acks=-1`` produce's durability) and then applies them by reading the log on from where
replay stopped, the one path for both.  Writes run one at a time; reads answer from the
state (after catching up with records others appended: a client may produce to
``_schemas``, as a Confluent registry sharing the topic would).  A reset or a deleted topic
(a new log object) starts the state over from the new log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

from ..protocol.errors import ErrorCode
from ..protocol.records import decode_batch
from ..registry import errors
from ..registry.operations import Registry, Write
from ..registry.records import Key
from ..registry.state import RegistryState, decode
from ..storage.errors import LogClosedError, RecordBatchTooLargeError
from ..storage.log import Log
from .dataplane import DataPlane, TopicRegistry
from .dataplane.topics import TopicError

log = structlog.get_logger("odradek.registry")

READ_BYTES = 1 << 20
BIG_BACKLOG = 64  # a catch-up further behind than this many offsets reads in a worker thread
TOPIC_CONFIGS = {"cleanup.policy": "compact"}

T = TypeVar("T")


class SchemaStore:
    """The registry's state and its one writer: the operations of ``registry.operations`` over ``_schemas``."""

    def __init__(self, topics: TopicRegistry, dataplane: DataPlane, clock: Callable[[], int], *,
                 topic: str = "_schemas", default_compatibility: str = "BACKWARD"):
        self.topics = topics
        self.dataplane = dataplane
        self.clock = clock
        self.topic = topic
        self.state = RegistryState(default_compatibility)
        self.registry = Registry(self.state)
        self._lock = asyncio.Lock()
        self._log: Log | None = None  # the log replayed so far (another object: start over)
        self._offset = 0  # next offset to apply

    async def start(self) -> None:
        """Replay ``_schemas`` as it is on disk (nothing is created until the first write)."""
        await self._catch_up()
        log.info("registry.replayed", topic=self.topic, records=self.state.applied,
                 subjects=len(self.state.subjects), max_id=self.state.max_id)

    def forget(self) -> None:
        """The topic went (a test's reset): empty state; the next write creates the topic again."""
        self.state.clear()
        self._log, self._offset = None, 0

    async def read(self, fn: Callable[[Registry], T], heavy: bool = False) -> T:
        """``fn(registry)`` on the state, caught up with the log first; ``heavy`` (a big schema to
        parse) runs it in a worker thread, so the loop keeps serving."""
        current = self.topics.log(self.topic, 0)
        if current is not self._log or current is not None and current.log_end_offset > self._offset:
            async with self._lock:
                await self._catch_up()
        return await asyncio.to_thread(fn, self.registry) if heavy else fn(self.registry)

    async def write(self, fn: Callable[[Registry], Write], heavy: bool = False) -> Any:
        """Compute a write on the current state (in a worker thread if ``heavy``), append its
        records, wait until they are durable, apply them; its answer.  One at a time: a second
        registration of a schema sees the first."""
        async with self._lock:
            await self._catch_up()
            write = await asyncio.to_thread(fn, self.registry) if heavy else fn(self.registry)
            if write.records:
                lg = await self._topic_log()
                try:
                    await self.dataplane.append_pairs(lg, list(write.records), self.clock())
                except RecordBatchTooLargeError:
                    raise errors.schema_too_large() from None
                except (LogClosedError, OSError) as exc:
                    raise errors.store_error(f"Register operation failed while writing to the Kafka store: "
                                             f"{exc}") from None
                await self._catch_up()
            return write.answer

    async def _topic_log(self) -> Log:
        lg = self.topics.log(self.topic, 0)
        if lg is not None:
            return lg
        try:
            await self.topics.create(self.topic, 1, TOPIC_CONFIGS)
        except TopicError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise errors.store_error(f"Cannot create the {self.topic} topic: {exc}") from None
            await self.topics.ensure(self.topic)  # being created right now: wait for it
        lg = self.topics.log(self.topic, 0)
        if lg is None:
            raise errors.store_error(f"The {self.topic} topic has no partition 0")
        return lg

    async def _catch_up(self) -> None:
        """Apply every record past the last one applied (all of them for a new log)."""
        lg = self.topics.log(self.topic, 0)
        if lg is not self._log:
            if self._log is not None:
                self.state.clear()
            self._log, self._offset = lg, 0
        if lg is None or lg.log_end_offset <= self._offset:
            return
        start = max(self._offset, lg.log_start_offset)
        if lg.log_end_offset - start > BIG_BACKLOG:  # read and decode off the loop; apply on it
            records, end = await asyncio.to_thread(_read_records, lg, start)
        else:
            records, end = _read_records(lg, start)
        for key, value in records:
            self.state.apply(key, value)
        self._offset = end


def _read_records(lg: Log, offset: int) -> tuple[list[tuple[Key, dict | None]], int]:
    """Every data record from ``offset`` to the log end, decoded (the ones Confluent would skip
    left out), and the offset after them."""
    end = lg.log_end_offset
    pairs: list[tuple[Key, dict | None]] = []
    while offset < end:
        chunk = lg.read(offset, READ_BYTES)
        if not chunk:
            return pairs, end
        pos, last = 0, offset
        while pos < len(chunk):
            header, records = decode_batch(chunk, pos)
            pos += header.size
            last = header.last_offset
            if not header.is_control:
                pairs += [d for r in records if r.offset >= offset and (d := decode(r.key, r.value)) is not None]
        offset = last + 1
    return pairs, offset
