"""A coordinator on real offsets-topic logs with a manual clock, shared by the offsets tests.

``OffsetsEnv`` opens ``__consumer_offsets-N`` logs with the storage engine in
a temporary directory, so every test writes and replays real batches; groups
in membership states are built with the group model directly (these tests
are about offsets, not about how a group got into its state).  ``wire()``
runs a request through the real handler *and* the codec of its version, so
version-specific error placement is checked on decoded bytes.  The tests at
the bottom check the harness itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from odradek.broker.clock import ManualClock
from odradek.broker.coordinator.group import ClassicGroup, Member
from odradek.broker.coordinator.offsets import (
    CommitRequest,
    PartitionCommit,
    commit_offsets,
    delete_offsets,
    fetch_offsets,
)
from odradek.broker.coordinator.service import Coordinator, CoordinatorConfig
from odradek.broker.coordinator.shard import Shard
from odradek.broker.coordinator.state import GroupState
from odradek.broker.coordinator.txn_offsets import TxnCommitRequest, commit_txn_offsets, write_marker
from odradek.broker.dispatch import RequestContext
from odradek.broker.handlers import offsets as handlers
from odradek.broker.txn_contracts import TxnMarker
from odradek.offsets.consumer_protocol import Subscription, encode_subscription
from odradek.offsets.records import GroupKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.registry import APIS
from odradek.storage.config import FsyncMode, LogConfig
from odradek.storage.log import Log
from odradek.storage.log_manager import offsets_topic_config

E = ErrorCode
MINUTE = 60_000
TOPICS = {"t": 4, "u": 2, "v": 1}
ALIVE_MS = 2**31 - 1  # ~24 days, the largest int32: outlives any test clock


class FakeTopics(dict):
    """The data plane's accessor, over a plain {topic: partition count} dict."""

    def partition_count(self, topic: str) -> int | None:
        return self.get(topic)


class OffsetsEnv:
    def __init__(self, root: Path, clock: ManualClock | None = None, *, partitions: int = 1,
                 fsync: FsyncMode = FsyncMode.NEVER, **config: Any):
        self.root = root
        self.clock = clock or ManualClock()
        self.fsync = fsync
        self.config = CoordinatorConfig(num_partitions=partitions, **config)
        self.topics = FakeTopics(TOPICS)  # what handlers reach as ``app.topics``
        self.logs: list[Log] = []
        self.coordinator: Coordinator | None = None

    # --- life cycle ---------------------------------------------------------------------

    async def start(self) -> OffsetsEnv:
        log_config = offsets_topic_config(LogConfig(fsync=self.fsync))
        self.logs = [Log.open(self.root / f"__consumer_offsets-{p}", log_config, clock=self.clock.now_ms)
                     for p in range(self.config.num_partitions)]
        self.coordinator = Coordinator(self.clock, self.config, self.logs,
                                       await_fsync=self.fsync is FsyncMode.ALWAYS)
        await self.coordinator.load()
        return self

    async def stop(self) -> None:
        if self.coordinator is not None:
            await self.coordinator.stop()
        for lg in self.logs:
            await lg.aclose()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    def shard(self, group_id: str = "g") -> Shard:
        return self.coordinator.shard_for(group_id)

    def partition_count(self, topic: str) -> int | None:
        return self.topics.partition_count(topic)

    # --- sans-I/O calls -------------------------------------------------------------------

    def commit(self, group: str | None, parts: list[tuple], *, generation: int = -1, member: str = "",
               instance: str | None = None, version: int = 8, retention: int = -1):
        """``parts``: (topic, partition, offset[, metadata[, leader_epoch[, commit_ts]]])."""
        request = CommitRequest(group, generation, member, instance, retention, version)
        partitions = [PartitionCommit(*_commit_fields(p)) for p in parts]
        return commit_offsets(self.coordinator, request, partitions, self.partition_count)

    def commit_now(self, group: str | None, parts: list[tuple], **kw) -> list[ErrorCode]:
        promise = self.commit(group, parts, **kw)
        assert promise.done, "fsync=never commits complete synchronously"
        return promise.result()

    def fetch(self, group: str | None, topics: list[tuple[str, list[int]]] | None = None,
              require_stable: bool = False):
        return fetch_offsets(self.coordinator, group, topics, require_stable)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        error, parts = self.fetch(group)
        assert error is E.NONE
        return {(f.topic, f.partition): f.offset for f in parts}

    def txn_commit(self, group: str | None, parts: list[tuple], *, producer: int = 1000, epoch: int = 0,
                   generation: int = -1, member: str = "", instance: str | None = None, version: int = 3,
                   verifier: Any = None):
        """A TxnOffsetCommit; ``parts``: (topic, partition, offset[, metadata[, leader_epoch]])."""
        request = TxnCommitRequest("txn", group, producer, epoch, generation, member, instance, version)
        partitions = [(t, p, o, rest[1] if len(rest) > 1 else -1, rest[0] if rest else "")
                      for t, p, o, *rest in parts]
        return commit_txn_offsets(self.coordinator, request, partitions, self.partition_count, verifier)

    def txn_commit_now(self, group: str | None, parts: list[tuple], **kw) -> list[ErrorCode]:
        promise = self.txn_commit(group, parts, **kw)
        assert promise.done, "fsync=never commits complete synchronously"
        return promise.result()

    def marker(self, group: str, *, producer: int = 1000, epoch: int = 0, commit: bool = True,
               coordinator_epoch: int = 0, topic: str = "__consumer_offsets"):
        """The transaction coordinator's marker for ``group``'s offsets partition (a promise of the error)."""
        return write_marker(self.coordinator, topic, self.coordinator.partition_for(group),
                            TxnMarker(producer, epoch, coordinator_epoch, commit))

    def marker_now(self, group: str, **kw) -> ErrorCode:
        promise = self.marker(group, **kw)
        assert promise.done, "fsync=never markers complete synchronously"
        return promise.result()

    def delete(self, group: str | None, topics: list[tuple[str, list[int]]]):
        promise = delete_offsets(self.coordinator, group, topics, self.partition_count)
        assert promise.done
        return promise.result()

    # --- groups in membership states ----------------------------------------------------------

    def consumer_group(self, group_id: str, subscriptions: dict[str, list[str]],
                       state: GroupState = GroupState.STABLE, instance_ids: dict[str, str] | None = None
                       ) -> ClassicGroup:
        """A ``consumer`` group whose members subscribe as given, one generation in, in ``state``.

        Members get a session timeout of years: they stand for consumers that
        keep heartbeating while a test moves the clock by days.
        """
        shard = self.shard(group_id)
        now = self.clock.now_ms()
        group = shard.groups.get(group_id) or ClassicGroup(group_id, current_state_timestamp=now)
        shard.groups[group_id] = group
        for member_id, topics in subscriptions.items():
            meta = encode_subscription(Subscription(topics=sorted(topics)))
            group.add_member(Member(member_id, (instance_ids or {}).get(member_id), "client", "/127.0.0.1",
                                    60_000, ALIVE_MS, "consumer", [("range", meta)]))
        if group.state is not GroupState.PREPARING_REBALANCE:
            group.transition(GroupState.PREPARING_REBALANCE, now)
        if state is GroupState.PREPARING_REBALANCE:
            return group
        group.generation += 1
        group.protocol_name = group.select_protocol()
        group.compute_subscribed_topics()
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        if state is GroupState.STABLE:
            group.transition(GroupState.STABLE, now)
        return group

    async def persist_group(self, group: ClassicGroup) -> None:
        """Write the group's GroupMetadata record, as SyncGroup / an emptied join phase does."""
        error = await _wait(self.shard(group.group_id).write([(GroupKey(group.group_id), group.to_value())]))
        assert error is None

    def empty_group(self, group: ClassicGroup) -> None:
        """Every member leaves: PreparingRebalance, then Empty with the generation bumped (onCompleteJoin)."""
        now = self.clock.now_ms()
        for member_id in list(group.members):
            group.remove_member(member_id)
        if group.state is not GroupState.PREPARING_REBALANCE:
            group.transition(GroupState.PREPARING_REBALANCE, now)
        group.generation += 1
        group.protocol_name = None
        group.compute_subscribed_topics()
        group.transition(GroupState.EMPTY, now)

    # --- the wire ----------------------------------------------------------------------------------

    async def wire(self, api_key: int, version: int, body: dict):
        """Encode ``body`` at ``version``, run the handler, encode and decode its response."""
        spec = APIS[api_key]
        request = spec.request.parse(spec.request.build(body, version), version)
        ctx = RequestContext(api_key, version, 1, "test", "/127.0.0.1", 1)
        fn = {8: handlers.offset_commit, 9: handlers.offset_fetch, 28: handlers.txn_offset_commit,
              47: handlers.offset_delete}[api_key]
        result = fn(self, ctx, request)
        if not isinstance(result, dict):
            result = await result
        return spec.response.parse(spec.response.build(result, version), version)


def _commit_fields(p: tuple) -> tuple:
    topic, partition, offset, *rest = p
    metadata = rest[0] if len(rest) > 0 else ""
    epoch = rest[1] if len(rest) > 1 else -1
    ts = rest[2] if len(rest) > 2 else -1
    return topic, partition, offset, epoch, metadata, ts


async def _wait(promise) -> Any:
    import asyncio

    while not promise.done:
        await asyncio.sleep(0.001)
    return promise.result()


wait = _wait


def commit_body(group: str, parts: list[tuple], *, generation: int = -1, member: str = "",
                instance: str | None = None, retention: int = -1) -> dict:
    """An OffsetCommit request body (any version) from (topic, partition, offset[, metadata, epoch, ts])."""
    topics: dict[str, list[dict]] = {}
    for p in parts:
        topic, partition, offset, epoch, metadata, ts = _commit_fields(p)
        topics.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": epoch,
            "commit_timestamp": ts, "committed_metadata": metadata})
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": instance, "retention_time_ms": retention,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


def commit_errors(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


# --- the harness itself --------------------------------------------------------------------------------

async def test_commit_then_restart_reads_the_same_offsets(tmp_path):
    env = await OffsetsEnv(tmp_path).start()
    assert env.commit_now("g", [("t", 0, 5), ("u", 1, 7, "meta", 3)]) == [E.NONE, E.NONE]
    before = env.shard().persisted_view()
    await env.restart()
    assert env.shard().persisted_view() == before
    assert env.committed("g") == {("t", 0): 5, ("u", 1): 7}
    await env.stop()


async def test_wire_round_trip_uses_the_handler(tmp_path):
    env = await OffsetsEnv(tmp_path).start()
    response = await env.wire(8, 8, commit_body("g", [("t", 1, 9)]))
    assert commit_errors(response) == {("t", 1): 0}
    assert env.committed("g") == {("t", 1): 9}
    await env.stop()
