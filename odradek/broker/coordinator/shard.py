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
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog

from ...protocol.records import decode_batch
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
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorRuntime, EncodedRecord, ShardStatus
from .config import CoordinatorConfig
from .group import ClassicGroup
from .state import GroupState

log = structlog.get_logger("odradek.coordinator")

TopicPartition = tuple[str, int]
Record = tuple[OffsetKey | GroupKey, OffsetValue | GroupValue | None]

def encode_records(records: list[Record]) -> list[EncodedRecord]:
    """The offsets topic's records as (key, value) bytes; raises RecordEncodeError."""
    return [(encode_key(k), encode_value(v)) for k, v in records]


class Shard:
    """The group coordinator's shard; its writes go through the coordinator runtime.

    ``await_fsync``: ``log.fsync.mode=always`` -- a write is applied and
    answered only once the fsync round covering it has completed.
    """

    def __init__(self, partition: int, log_, clock: Clock, *, runtime: CoordinatorRuntime | None = None,
                 await_fsync: bool = False, config: CoordinatorConfig | None = None):
        self.partition = partition
        self.log = log_
        self.clock = clock
        self.config = config if config is not None else CoordinatorConfig()
        self.status = ShardStatus.LOADING
        # live state
        self.groups: dict[str, ClassicGroup] = {}
        self.stats: Counter[str] = Counter()  # events for metrics: rebalances, offset_commits
        # persisted view (what replay builds; what a reload must reproduce)
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.group_records: dict[str, GroupValue] = {}
        runtime = runtime if runtime is not None else CoordinatorRuntime()
        self.writer = runtime.writer(self, log_, encode_records, clock.now_ms, await_fsync=await_fsync)
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

    # --- writing: through the coordinator runtime ----------------------------------------

    def write(self, records: list[Record], now: int | None = None) -> Promise:
        """Append ``records`` as one batch; the promise yields None or an ErrorCode.

        The runtime stages, appends, waits for fsync if asked and replays
        (``runtime/runtime.py``); on success the records have been replayed
        before the promise completes.
        """
        promise = self.writer.write(records, now)
        if not promise.done or promise.result() is None:  # accepted: count it for the metrics
            commits = 0
            for key, value in records:
                if value is not None and type(key) is OffsetKey:
                    commits += 1
            self.stats["offset_commits"] += commits
        return promise

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with a commit written but not yet durable."""
        pending = set()
        for key, _value in self.writer.pending_records():
            if type(key) is OffsetKey and key.group == group_id:
                pending.add((key.topic, key.partition))
        return pending

    def has_pending_writes(self) -> bool:
        return self.writer.has_pending_writes()

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
