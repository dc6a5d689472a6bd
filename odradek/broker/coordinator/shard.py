"""One offsets-topic partition: its log, the groups and offsets that hash to it.

Records are the only way state survives.  A handler validates against the
in-memory state and asks ``write()`` to append records as **one batch**; once
the batch is durable, the same ``replay()`` that rebuilds state at load time
applies the records, and only then is the handler's continuation run (which
answers the client).  Live path and load path share ``replay()``, so "reload
from disk gives the same state" holds by construction; ``persisted_view()``
is what a reload must reproduce.

The shard is *Loading* until its log has been replayed, then *Active*.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog

from ...protocol.errors import ErrorCode
from ...protocol.records import HEADER_SIZE, decode_batch, pairs_batch_size_bound
from ...storage.errors import RecordBatchTooLargeError, StorageError
from ...storage.offsets_records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    RecordDecodeError,
    encode_key,
    encode_value,
)
from ...storage.offsets_replay import OffsetsReplay
from ..clock import Clock
from .group import ClassicGroup, Promise
from .state import GroupState

if TYPE_CHECKING:
    from .burst import WriteBurst
    from .service import CoordinatorConfig

log = structlog.get_logger("odradek.coordinator")


def _default_config() -> CoordinatorConfig:
    from .service import CoordinatorConfig  # service imports this module

    return CoordinatorConfig()

TopicPartition = tuple[str, int]
Record = tuple[OffsetKey | GroupKey, OffsetValue | GroupValue | None]


_WRITTEN = Promise.resolved(None)  # what every durable-at-once write answers (completed: immutable)


class ShardStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


class _Write:
    """A write waiting for its fsync round (``log.fsync.mode=always``); hashed by identity."""

    __slots__ = ("records", "promise")

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.promise = Promise()


class Shard:
    def __init__(self, partition: int, log_, clock: Clock, *, durable_on_write: bool = True,
                 config: CoordinatorConfig | None = None):
        self.partition = partition
        self.log = log_
        self.clock = clock
        self.config = config if config is not None else _default_config()
        self.status = ShardStatus.LOADING
        # live state
        self.groups: dict[str, ClassicGroup] = {}
        self.stats: Counter[str] = Counter()  # events for metrics: rebalances, offset_commits
        # persisted view (what replay builds; what a reload must reproduce)
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.group_records: dict[str, GroupValue] = {}
        self.durable_on_write = durable_on_write
        # writes staged or appended, not yet fsynced (log.fsync.mode=always), in write order
        self._in_flight: dict[_Write, None] = {}
        self.burst: WriteBurst | None = None  # the server's write burst, when it has one
        # staged requests of the open burst: (encoded records, timestamp, the write waiting for fsync)
        self._staged: list[tuple[list[tuple[bytes | None, bytes | None]], int, _Write | None]] = []
        self.load_time_ms: float = 0.0
        self.loaded_records = 0

    # --- replay: the one function that turns records into state ----------------

    def replay(self, key: OffsetKey | GroupKey | None, value: Any) -> None:
        if isinstance(key, OffsetKey):
            offsets = self.offsets.setdefault(key.group, {})
            tp = (key.topic, key.partition)
            if value is None:
                offsets.pop(tp, None)
                if not offsets:
                    del self.offsets[key.group]
            else:
                offsets[tp] = value
        elif isinstance(key, GroupKey):
            if value is None:
                self.group_records.pop(key.group, None)
            else:
                self.group_records[key.group] = value

    def replay_record(self, key: OffsetKey | GroupKey, value: Any, _record: Any) -> None:
        """``replay`` as an ``OffsetsReplay`` callback (it passes the record along too)."""
        self.replay(key, value)

    def adopt(self, group: ClassicGroup) -> ClassicGroup:
        """Every live group of this shard reports its events into the shard's counters."""
        group.stats = self.stats
        return group

    def persisted_view(self) -> tuple[dict, dict]:
        """(groups -> GroupValue, group -> {tp: OffsetValue}) as the log says."""
        return ({g: v for g, v in self.group_records.items()},
                {g: dict(o) for g, o in self.offsets.items() if o})

    # --- writing -------------------------------------------------------------------

    def write(self, records: list[Record], now: int | None = None) -> Promise:
        """Append ``records`` as one batch; the promise yields None or an ErrorCode.

        On success the records have been replayed before the promise completes.
        ``now`` is the caller's reading of the clock, if it took one.  While
        the server's write burst is open the request is staged instead and
        appended, with the burst's others, before any answer is sent
        (``burst.py``); with ``log.fsync.mode=always`` it then still waits for
        the fsync round that covers it.
        """
        if self.status is not ShardStatus.ACTIVE:
            return Promise.resolved(ErrorCode.NOT_COORDINATOR)
        if now is None:
            now = self.clock.now_ms()
        pairs = [(encode_key(k), encode_value(v)) for k, v in records]
        burst = self.burst
        if burst is not None and burst.open and self.log.writable:
            if pairs_batch_size_bound(pairs) <= self.log.config.max_message_bytes:
                return self._stage(burst, records, pairs, now)
            if self._staged and not self.flush_staged():  # the log keeps the order state saw
                burst.failed.append(self.partition)
                return Promise.resolved(ErrorCode.KAFKA_STORAGE_ERROR)
        try:
            # with fsync "always" the fsync round started below is the one for this write
            # (group commit), so the log need not start its own per append
            self.log.append_records(pairs, now, schedule=self.durable_on_write)
        except RecordBatchTooLargeError as exc:  # callers map it (OffsetCommit: 28)
            log.warning("coordinator.write_too_large", partition=self.partition, error=str(exc))
            return Promise.resolved(ErrorCode.MESSAGE_TOO_LARGE)
        except (OSError, StorageError) as exc:
            log.error("coordinator.write_failed", partition=self.partition, error=str(exc))
            return Promise.resolved(ErrorCode.KAFKA_STORAGE_ERROR)
        w = self._settle(records)
        if w is None:
            return _WRITTEN
        # group commit: one fsync round covers every write made before it started, and
        # the log calls back in write order, straight from the round's completion
        self.log.when_durable(partial(self._durable, w))
        return w.promise

    def _stage(self, burst: WriteBurst, records: list[Record], pairs: list, now: int) -> Promise:
        """Keep the request for the burst's append (it is in the page cache before any answer)."""
        if not self._staged:
            burst.stage(self)
        w = self._settle(records)
        self._staged.append((pairs, now, w))
        return _WRITTEN if w is None else w.promise

    def _settle(self, records: list[Record]) -> _Write | None:
        """Count a write; apply it now (None) if written means durable, else the write that waits.

        It waits for the fsync round that covers it (``_durable``) with fsync
        ``always``, and behind earlier writes still waiting, so state changes
        in log order.
        """
        self._count_commits(records)
        if self.durable_on_write and not self._in_flight:
            for key, value in records:
                self.replay(key, value)
            return None
        w = _Write(records)
        self._in_flight[w] = None
        return w

    def _count_commits(self, records: list[Record]) -> None:
        commits = 0
        for key, value in records:
            if value is not None and type(key) is OffsetKey:
                commits += 1
        self.stats["offset_commits"] += commits

    def flush_staged(self) -> bool:
        """Append the burst's staged writes, each kept whole in one batch; False if that failed.

        A failure -- any exception, so that no other shard of the burst is
        left unflushed -- fails the shard (as a failed fsync does): its state
        already holds the staged records, which the log does not, so it must
        stop answering until it is reloaded from the log.  Staged writes waiting
        for fsync then wait for the round that covers this append.
        """
        staged, self._staged = self._staged, []
        limit = self.log.config.max_message_bytes
        pairs: list[tuple[bytes | None, bytes | None]] = []
        stamps: list[int] = []
        waiting = [w for _pairs, _now, w in staged if w is not None]
        size = 0
        try:
            for request_pairs, now, _w in staged:
                # each request's bound fits (checked when staged); the header is counted once
                more = pairs_batch_size_bound(request_pairs) - HEADER_SIZE
                if pairs and size + more > limit:
                    self._append_staged(pairs, stamps)
                    pairs, stamps = [], []
                if not pairs:
                    size = HEADER_SIZE
                size += more
                pairs.extend(request_pairs)
                stamps.extend([now] * len(request_pairs))
            if pairs:
                self._append_staged(pairs, stamps)
        except Exception as exc:  # whatever it was, the state now holds records the log may not
            log.error("coordinator.write_failed", partition=self.partition, error=str(exc),
                      staged_requests=len(staged), exc_info=not isinstance(exc, (OSError, StorageError)))
            self.status = ShardStatus.FAILED
            for w in waiting:
                self._durable(w, exc)
            return False
        if waiting:
            self.log.when_durable(partial(self._all_durable, waiting))
        return True

    def _append_staged(self, pairs: list, stamps: list[int]) -> None:
        self.log.append_records(pairs, stamps[0], timestamps=stamps, schedule=self.durable_on_write)

    def _all_durable(self, writes: list[_Write], error: BaseException | None) -> None:
        for w in writes:
            self._durable(w, error)

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with a commit written but not yet durable.

        Why computed here rather than counted on every write: only OffsetFetch
        with ``require_stable``, the expiry sweep and a group's removal ask,
        and the writes in flight are the few of the current fsync rounds.
        """
        pending = set()
        for w in self._in_flight:
            for key, _value in w.records:
                if type(key) is OffsetKey and key.group == group_id:
                    pending.add((key.topic, key.partition))
        return pending

    def _durable(self, w: _Write, error: BaseException | None) -> None:
        """The write's fsync round ended: apply it, or fail it (and the shard) on a failed fsync."""
        del self._in_flight[w]
        if error is None:
            for key, value in w.records:
                self.replay(key, value)
            w.promise.set(None)
            return
        if self.status is not ShardStatus.FAILED:
            log.error("coordinator.sync_failed", partition=self.partition, error=str(error))
            self.status = ShardStatus.FAILED
        w.promise.set(ErrorCode.KAFKA_STORAGE_ERROR)

    def has_pending_writes(self) -> bool:
        return bool(self._in_flight)

    # --- loading -------------------------------------------------------------------

    async def load(self, on_loaded: Callable[[Shard], None] | None = None,
                   yield_every: int = 200) -> None:
        """Replay the whole log, yielding to the loop regularly, then go Active."""
        started = time.perf_counter()
        count = 0
        batches = 0
        replay = OffsetsReplay(self.replay_record)  # transactional commits (imported logs): §16.3
        for header, records in self._iter_log():
            for record in records:
                try:
                    if replay.feed(header, record):
                        count += 1
                except RecordDecodeError as exc:
                    log.error("coordinator.load_failed", partition=self.partition,
                              offset=record.offset, error=str(exc))
                    self.status = ShardStatus.FAILED
                    raise
            batches += 1
            if batches % yield_every == 0:
                await asyncio.sleep(0)
        replay.finish()
        if replay.dropped:
            log.info("coordinator.transactional_offsets_dropped", partition=self.partition,
                     offsets=replay.dropped)
        self.materialize()
        self.loaded_records = count
        self.load_time_ms = (time.perf_counter() - started) * 1000
        self.status = ShardStatus.ACTIVE
        log.info("coordinator.loaded", partition=self.partition, records=count,
                 groups=len(self.groups), ms=round(self.load_time_ms, 1))
        if on_loaded is not None:
            on_loaded(self)

    def _iter_log(self):
        offset = self.log.log_start_offset
        end = self.log.log_end_offset
        while offset < end:
            chunk = self.log.read(offset, 1 << 20)
            if not chunk:
                break
            pos = 0
            last = offset
            while pos < len(chunk):
                header, records = decode_batch(chunk, pos)
                pos += header.size
                last = header.last_offset
                if header.last_offset >= offset:
                    yield header, [r for r in records if r.offset >= offset]
            offset = last + 1

    def materialize(self) -> None:
        """Build live groups from the persisted view (§16.3)."""
        self.groups = {}
        for group_id, value in self.group_records.items():
            self.groups[group_id] = self.adopt(ClassicGroup.from_record(group_id, value))
        now = self.clock.now_ms()
        for group_id in self.offsets:
            if group_id not in self.groups:
                self.groups[group_id] = self.adopt(ClassicGroup(group_id, current_state_timestamp=now))

    # --- group lookup ----------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is not None and group.state is GroupState.DEAD:
            return None
        return group

    def get_or_create_group(self, group_id: str) -> ClassicGroup:
        group = self.group(group_id)
        if group is None:
            group = self.adopt(ClassicGroup(group_id, current_state_timestamp=self.clock.now_ms()))
            self.groups[group_id] = group
        return group

    def remove_group(self, group_id: str, *, unloading: bool = False) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None and group.state is not GroupState.DEAD:
            group.transition(GroupState.DEAD, self.clock.now_ms(), unloading=unloading)
