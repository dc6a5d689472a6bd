"""The share-partition manager on the partition leader (Kafka's ``SharePartitionManager``).

One :class:`~odradek.shares.partition.SharePartition` per (share group, topic id,
partition) this broker leads, created on the first ShareFetch for it and loaded from
the share coordinator (ReadShareGroupState); the manager does the I/O around the
sans-I/O state machine:

- **acquire**: read the log from the partition's fetch offset (under read_committed up
  to the last stable offset, archiving aborted transactions and control batches at once),
  hand the log batches to ``acquire`` and answer the batches covering what was acquired;
- **acknowledge / release / lock expiry**: every state change but acquisition is written
  through the share coordinator (WriteShareGroupState) *before* anyone sees it: the
  partition's lock is held across the write, and a failed write drops the partition, so
  the next fetch reloads it from its durable state (Kafka rolls back instead; the outcome
  for the client is the same error and the durable state wins);
- **timers**: one broker-clock timer per partition at its earliest acquisition-lock
  deadline (``clock.call_at``; a test fast-forwards it), which expires the locks due;
- waiting ShareFetches are woken through the data plane's append waiters after every
  change that makes records available again.

Settings come from ``GroupConfigs.effective(group)`` on every operation (lock duration,
delivery count limit, max record locks, ``share.auto.offset.reset``, isolation level).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ...protocol.records import iter_batch_headers
from ...shares.partition import (
    AckBatch,
    AcquiredRecords,
    LogBatch,
    ShareAckError,
    ShareConfig,
    SharePartition,
    initial_start_offset,
    parse_duration_ms,
)
from ...shares.state import StateWrite
from ...storage.errors import LogClosedError, OffsetOutOfRangeError
from .coordinator import wait

if TYPE_CHECKING:
    from ...storage.log import Log
    from ..clock import Clock
    from ..coordinator.group_configs import GroupConfig, GroupConfigs
    from ..dataplane import DataPlane, TopicRegistry
    from .coordinator import ShareCoordinator

log = structlog.get_logger("odradek.share")

E = ErrorCode
LEADER_EPOCH = 0  # this node always leads at epoch 0
Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


class ShareManagerServices(Protocol):
    """What the manager uses of the broker (``BrokerApp`` wires it)."""

    clock: Clock
    topics: TopicRegistry
    dataplane: DataPlane
    group_configs: GroupConfigs
    share_coordinator: ShareCoordinator | None


class SharePartitionError(Exception):
    """A share-partition that cannot be served now; ``code`` goes into the partition's answer."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


def persister_error(code: ErrorCode) -> ErrorCode:
    """A share coordinator error as the data path reports it (``SharePartition.fetchPersisterError``)."""
    if code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.GROUP_ID_NOT_FOUND, E.UNKNOWN_TOPIC_OR_PARTITION, E.FENCED_STATE_EPOCH):
        return code
    if code is E.FENCED_LEADER_EPOCH:
        return E.NOT_LEADER_OR_FOLLOWER
    return E.UNKNOWN_SERVER_ERROR


def share_config(config: GroupConfig) -> ShareConfig:
    return ShareConfig(delivery_count_limit=config.share_delivery_count_limit,
                       record_lock_duration_ms=config.share_record_lock_duration_ms,
                       max_record_locks=config.share_partition_max_record_locks)


@dataclass(slots=True)
class PartitionFetch:
    """What one share-partition gave a ShareFetch: the log batches and the acquired ranges."""

    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(a.last_offset - a.first_offset + 1 for a in self.acquired)


@dataclass(slots=True, eq=False)
class _Entry:
    """A share-partition on this leader: its state machine once loaded, its lock and timer."""

    key: Key
    topic: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    sp: SharePartition | None = None
    timer: Any = None
    deadline: int | None = None


class SharePartitionManager:
    """Every share-partition this broker serves, loaded on demand."""

    def __init__(self, app: ShareManagerServices) -> None:
        self.app = app
        self.entries: dict[Key, _Entry] = {}
        self._tasks: set[asyncio.Task] = set()

    # --- lookup and load ---------------------------------------------------------------------

    def _log(self, topic: str, partition: int) -> Log:
        lg = self.app.topics.log(topic, partition)
        if lg is None:
            raise SharePartitionError(E.UNKNOWN_TOPIC_OR_PARTITION)
        return lg

    async def _loaded(self, group: str, topic_id: uuid.UUID, partition: int, topic: str) -> tuple[_Entry, Log]:
        """The entry, its lock held by the caller afterwards; loaded from the coordinator if new."""
        key = (group, topic_id, partition)
        entry = self.entries.get(key)
        if entry is None or entry.topic != topic:
            if entry is not None:  # the id now names another topic: the old state machine goes
                self._drop(entry)
            entry = self.entries[key] = _Entry(key, topic)
        return entry, self._log(topic, partition)

    async def _ensure(self, entry: _Entry, lg: Log, config: GroupConfig) -> SharePartition:
        """Load the share-partition from its durable state (the caller holds its lock)."""
        if entry.sp is not None:
            entry.sp.config = share_config(config)
            return entry.sp
        coordinator = self.app.share_coordinator
        if coordinator is None:
            raise SharePartitionError(E.COORDINATOR_NOT_AVAILABLE)
        error, state = await wait(coordinator.read(entry.key, LEADER_EPOCH))
        if error is not E.NONE or state is None:
            log.info("share.load_failed", group=entry.key[0], topic=entry.topic, partition=entry.key[2],
                     error=ErrorCode(error).name)
            raise SharePartitionError(persister_error(ErrorCode(error)))
        reset_start = None
        if state.start_offset == -1:
            reset_start = await self._reset_start(lg, config.share_auto_offset_reset)
        entry.sp = SharePartition.from_persisted(share_config(config), state, leader_epoch=LEADER_EPOCH,
                                                 reset_start=reset_start)
        log.info("share.partition_loaded", group=entry.key[0], topic=entry.topic, partition=entry.key[2],
                 start_offset=entry.sp.start_offset, in_flight=len(entry.sp.records))
        return entry.sp

    async def _reset_start(self, lg: Log, reset: str) -> int:
        """Where a share-partition without a start offset begins (``share.auto.offset.reset``)."""
        now = self.app.clock.now_ms()
        found: int | None = None
        if reset.startswith("by_duration:"):
            at = await asyncio.to_thread(lg.offset_for_timestamp, now - parse_duration_ms(reset.partition(":")[2]))
            found = None if at is None else at[0]
        return initial_start_offset(reset, log_start=lg.log_start_offset, log_end=lg.log_end_offset, now=now,
                                    offset_for_timestamp=lambda _ts: found)

    # --- writes, timers, wake-ups ---------------------------------------------------------------

    async def _persist(self, entry: _Entry, write: StateWrite | None) -> ErrorCode:
        """Write a state change through the share coordinator before anyone sees it (lock held).

        A failed write drops the share-partition: the next fetch reloads the durable state.
        """
        if write is None:
            return E.NONE
        coordinator = self.app.share_coordinator
        error = E.COORDINATOR_NOT_AVAILABLE if coordinator is None else ErrorCode(
            await wait(coordinator.write(entry.key, write)))
        if error is not E.NONE:
            log.warning("share.write_failed", group=entry.key[0], topic=entry.topic, partition=entry.key[2],
                        error=error.name)
            self._drop(entry)
            return persister_error(error)
        self.app.dataplane.waiters.notify(entry.topic, entry.key[2])
        return E.NONE

    def _drop(self, entry: _Entry) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
        entry.timer = entry.deadline = entry.sp = None
        if self.entries.get(entry.key) is entry:
            del self.entries[entry.key]

    def _arm(self, entry: _Entry) -> None:
        """One broker-clock timer at the partition's earliest acquisition-lock deadline."""
        deadline = None if entry.sp is None else entry.sp.next_deadline()
        if deadline == entry.deadline:
            return
        if entry.timer is not None:
            entry.timer.cancel()
        entry.deadline, entry.timer = deadline, None
        if deadline is not None:
            entry.timer = self.app.clock.call_at(deadline, lambda: self._spawn(self._expire(entry)))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expire(self, entry: _Entry) -> None:
        """Acquisition locks due: the records go back (AVAILABLE, or ARCHIVED at the delivery limit)."""
        async with entry.lock:
            entry.timer = entry.deadline = None
            if entry.sp is None or self.entries.get(entry.key) is not entry:
                return
            write = entry.sp.expire(self.app.clock.now_ms())
            if write is not None:
                log.info("share.locks_expired", group=entry.key[0], topic=entry.topic, partition=entry.key[2])
            await self._persist(entry, write)
            self._arm(entry)

    # --- the data path's operations ------------------------------------------------------------

    async def acquire(self, group: str, member: str, topic_id: uuid.UUID, partition: int, topic: str, *,
                      max_records: int, batch_size: int, max_bytes: int, record_limit: bool = False) -> PartitionFetch:
        """Acquire up to about ``max_records`` records for ``member`` (exactly that many at most with
        ``record_limit``); raises SharePartitionError."""
        config = self.app.group_configs.effective(group)
        entry, lg = await self._loaded(group, topic_id, partition, topic)
        async with entry.lock:
            sp = await self._ensure(entry, lg, config)
            if lg.log_start_offset > sp.start_offset:  # retention or DeleteRecords moved past it
                error = await self._persist(entry, sp.move_log_start(lg.log_start_offset))
                if error is not E.NONE:
                    raise SharePartitionError(error)
            try:
                fetched = await self._acquire(entry, sp, lg, member, config, max_records, batch_size, max_bytes,
                                              record_limit)
            except (OffsetOutOfRangeError, LogClosedError):
                raise SharePartitionError(E.UNKNOWN_TOPIC_OR_PARTITION) from None
            self._arm(entry)
            return fetched

    async def _acquire(self, entry: _Entry, sp: SharePartition, lg: Log, member: str, config: GroupConfig,
                       max_records: int, batch_size: int, max_bytes: int, record_limit: bool) -> PartitionFetch:
        dp = self.app.dataplane
        committed = config.share_isolation_level == "read_committed"
        if committed and not dp.loaded(lg):
            await dp.ensure_loaded(lg)
        upper = dp.last_stable_offset(lg) if committed else lg.log_end_offset
        offset = max(sp.fetch_offset(), lg.log_start_offset)
        if offset >= upper or max_records <= 0:
            return PartitionFetch()
        data = await dp.read(lg, offset, max(max_bytes, 0), max_offset=upper if committed else None)
        headers = [h for _pos, h in iter_batch_headers(data)]
        aborted = _dead_ranges(dp, lg, headers, offset) if committed else []
        acquired, write = sp.acquire(member, [LogBatch(h.base_offset, h.last_offset) for h in headers],
                                     max_records=max_records, batch_size=max(batch_size, 1),
                                     now=self.app.clock.now_ms(), aborted=aborted, record_limit=record_limit)
        error = await self._persist(entry, write)  # aborted records archived
        if error is not E.NONE:
            raise SharePartitionError(error)
        if not acquired:
            return PartitionFetch()
        return PartitionFetch(await self._covering(lg, data, acquired, max_bytes, upper if committed else None),
                              acquired)

    async def _covering(self, lg: Log, data: bytes, acquired: list[AcquiredRecords], max_bytes: int,
                        max_offset: int | None) -> bytes:
        """The log batches that hold the acquired offsets (reading on when a re-acquired range lies
        past the first read), and only those."""
        last_wanted = max(a.last_offset for a in acquired)
        chunks = [data]
        read_to = max((h.last_offset for _p, h in iter_batch_headers(data)), default=-1)
        while read_to < last_wanted:
            more = await self.app.dataplane.read(lg, read_to + 1, max(max_bytes, 0), max_offset=max_offset)
            ends = [h.last_offset for _p, h in iter_batch_headers(more)]
            if not ends:
                break
            chunks.append(more)
            read_to = ends[-1]
        ranges = sorted((a.first_offset, a.last_offset) for a in acquired)
        out = []
        for chunk in chunks:
            view = memoryview(chunk)
            for pos, h in iter_batch_headers(chunk):
                if any(lo <= h.last_offset and h.base_offset <= hi for lo, hi in ranges):
                    out.append(view[pos:pos + h.size])
        return b"".join(out)

    async def acknowledge(self, group: str, member: str, topic_id: uuid.UUID, partition: int,
                          batches: list[AckBatch]) -> ErrorCode:
        """Apply a member's acknowledgements to one share-partition; the partition's ack error."""
        entry = self.entries.get((group, topic_id, partition))
        if entry is None:  # Kafka: no SharePartition on this broker
            return E.UNKNOWN_TOPIC_OR_PARTITION
        async with entry.lock:
            sp = entry.sp
            if sp is None:
                return E.UNKNOWN_TOPIC_OR_PARTITION
            sp.config = share_config(self.app.group_configs.effective(group))
            try:
                write = sp.acknowledge(member, batches, self.app.clock.now_ms())
            except ShareAckError as exc:
                log.info("share.ack_refused", group=group, member=member, topic=entry.topic, partition=partition,
                         error=ErrorCode(exc.code).name, reason=str(exc))
                return ErrorCode(exc.code)
            error = await self._persist(entry, write)
            self._arm(entry)
            return error

    async def release(self, group: str, member: str, keys: Iterable[tuple[uuid.UUID, int]]) -> None:
        """A member's share session ended: its acquired records go back on these partitions."""
        for topic_id, partition in keys:
            entry = self.entries.get((group, topic_id, partition))
            if entry is None:
                continue
            async with entry.lock:
                if entry.sp is None:
                    continue
                write = entry.sp.release_member(member)
                if write is not None:
                    log.info("share.member_released", group=group, member=member, topic=entry.topic,
                             partition=partition)
                await self._persist(entry, write)
                self._arm(entry)

    def release_later(self, group: str, member: str, keys: Iterable[tuple[uuid.UUID, int]]) -> None:
        """``release`` in a task of its own (a connection closed: nobody awaits it)."""
        self._spawn(self.release(group, member, list(keys)))

    def busy(self) -> bool:
        """Whether a lock expiry or a connection's release is still being written (tests wait)."""
        return bool(self._tasks)

    def live(self, group: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The loaded state machine of a share-partition, if this broker has it (tests, admin)."""
        entry = self.entries.get((group, topic_id, partition))
        return None if entry is None else entry.sp

    def forget(self, keys: Iterable[Key]) -> None:
        """Drop share-partitions whose durable state was replaced (alter or delete offsets)."""
        for key in list(keys):
            entry = self.entries.get(key)
            if entry is not None:
                self._drop(entry)

    def clear(self) -> None:
        """Forget every share-partition (a reset; a replaced share coordinator)."""
        for entry in list(self.entries.values()):
            self._drop(entry)

    async def stop(self) -> None:
        self.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _dead_ranges(dp: DataPlane, lg: Log, headers: list, offset: int) -> list[tuple[int, int]]:
    """read_committed: the batches of aborted transactions and control batches, archived at once."""
    if not headers:
        return []
    aborted = dp.aborted_txns(lg, offset, headers[-1].last_offset + 1)
    dead = []
    for h in headers:
        if h.is_control:
            dead.append((h.base_offset, h.last_offset))
        elif h.is_transactional and any(a.producer_id == h.producer_id and a.first_offset <= h.base_offset
                                        <= a.last_offset for a in aborted):
            dead.append((h.base_offset, h.last_offset))
    return dead
