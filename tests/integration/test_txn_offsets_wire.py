"""TxnOffsetCommit over TCP, ended by the transaction's markers on ``__consumer_offsets``.

Raw frames against the in-process broker, with fsync ``always`` and
``never``: a transactional producer (InitProducerId, AddOffsetsToTxn) commits
offsets that stay invisible (UNSTABLE_OFFSET_COMMIT under ``require_stable``)
until its EndTxn(commit) has the transaction coordinator write the COMMIT
marker (``Coordinator.write_txn_marker``); an abort drops them; both survive a
restart exactly as they were live.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.broker.runtime.runtime import ShardStatus
from odradek.broker.txn_contracts import TxnMarker
from odradek.broker.wire_client import AsyncClient
from odradek.protocol.errors import ErrorCode
from odradek.testing import Broker

pytestmark = pytest.mark.integration

E = ErrorCode
UNSTABLE = E.UNSTABLE_OFFSET_COMMIT


class Txn:
    """A transactional producer over raw frames: its id, producer id and epoch."""

    def __init__(self, c: AsyncClient, tid: str | None = None):
        self.c, self.tid = c, tid or f"tx-{uuid.uuid4().hex[:8]}"
        self.pid, self.epoch = -1, -1

    async def init(self) -> Txn:
        r = await self.c.request(22, 4, {"transactional_id": self.tid, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == 0
        self.pid, self.epoch = r.producer_id, r.producer_epoch
        return self

    async def add_offsets(self, group: str) -> None:
        """AddOffsetsToTxn, retried on CONCURRENT_TRANSACTIONS while the previous one completes (as clients do)."""
        for _ in range(500):
            r = await self.c.request(25, 3, {"transactional_id": self.tid, "producer_id": self.pid,
                                             "producer_epoch": self.epoch, "group_id": group})
            if r.error_code != E.CONCURRENT_TRANSACTIONS:
                break
            await asyncio.sleep(0.01)
        assert r.error_code == 0

    async def commit_offsets(self, version: int, group: str, topic: str, offsets: dict[int, int], *,
                             epoch: int | None = None, generation: int = -1, member: str = "") -> list[int]:
        body = {"transactional_id": self.tid, "group_id": group, "producer_id": self.pid,
                "producer_epoch": self.epoch if epoch is None else epoch,
                "generation_id": generation, "member_id": member, "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 1,
                     "committed_metadata": f"m{o}"} for p, o in offsets.items()]}]}
        r = await self.c.request(28, version, body)
        return [p.error_code for t in r.topics for p in t.partitions]

    async def end(self, commit: bool) -> None:
        r = await self.c.request(26, 3, {"transactional_id": self.tid, "producer_id": self.pid,
                                         "producer_epoch": self.epoch, "committed": commit})
        assert r.error_code == 0


async def fetch(c: AsyncClient, group: str, topic: str, *, require_stable: bool = True, version: int = 7,
                settled: bool = False) -> list[tuple[int, int]]:
    """(offset, error) of partitions 0 and 1, once the shard has loaded.

    ``settled``: also wait out UNSTABLE_OFFSET_COMMIT, as clients retry it -- EndTxn is answered
    once its Prepare record is durable; the markers follow (Kafka's order).
    """
    for _ in range(500):
        r = await c.request(9, version, {"group_id": group, "require_stable": require_stable,
                                         "topics": [{"name": topic, "partition_indexes": [0, 1]}]})
        if r.error_code == E.COORDINATOR_LOAD_IN_PROGRESS:
            await asyncio.sleep(0.01)
            continue
        parts = [(p.committed_offset, p.error_code) for p in r.topics[0].partitions]
        if not (settled and any(e == UNSTABLE for _o, e in parts)):
            return parts
        await asyncio.sleep(0.01)
    raise AssertionError(f"OffsetFetch did not settle: {r}")


async def create_topic(c: AsyncClient, name: str) -> None:
    r = await c.request(19, 5, {"topics": [{"name": name, "num_partitions": 2, "replication_factor": -1,
                                            "assignments": [], "configs": []}],
                                "timeout_ms": 5000, "validate_only": False})
    assert r.topics[0].error_code == 0


async def commit(c: AsyncClient, group: str, topic: str, offset: int) -> None:
    r = await c.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                               "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                   {"partition_index": 0, "committed_offset": offset,
                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    assert r.topics[0].partitions[0].error_code == 0


@pytest.mark.parametrize("fsync", ["always", "never"])
async def test_commit_and_abort_over_tcp_survive_a_restart(tmp_path, fsync):
    async with Broker(tmp_path, overrides={"log.fsync.mode": fsync}) as b:
        c = await AsyncClient.connect("127.0.0.1", b.port)
        await create_topic(c, "in")
        await commit(c, "g", "in", 5)
        txn = await Txn(c, "tx").init()
        await txn.add_offsets("g")
        assert await txn.commit_offsets(3, "g", "in", {0: 9, 1: 4}) == [0, 0]
        assert await fetch(c, "g", "in") == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert await fetch(c, "g", "in", require_stable=False) == [(5, 0), (-1, 0)]
        assert await fetch(c, "g", "in", version=6) == [(5, 0), (-1, 0)]  # no require_stable before v7
        await txn.end(commit=True)
        assert await fetch(c, "g", "in", settled=True) == [(9, 0), (4, 0)]

        await txn.add_offsets("g")
        assert await txn.commit_offsets(3, "g", "in", {0: 20}) == [0]
        await txn.end(commit=False)
        assert await fetch(c, "g", "in", settled=True) == [(9, 0), (4, 0)]

        await txn.add_offsets("g")
        assert await txn.commit_offsets(3, "g", "in", {1: 30}) == [0]  # open across the restart
        await c.close()
        await b.restart()
        c = await AsyncClient.connect("127.0.0.1", b.port)
        assert await fetch(c, "g", "in") == [(9, 0), (-1, UNSTABLE)]
        txn.c = c
        await txn.end(commit=True)
        assert await fetch(c, "g", "in", settled=True) == [(9, 0), (30, 0)]
        await c.close()


@pytest.mark.parametrize("fsync", ["always", "never"])
async def test_a_marker_written_through_the_marker_target_is_durable(tmp_path, fsync):
    """``Coordinator.write_txn_marker`` (what the transaction coordinator calls) on its own."""
    async with Broker(tmp_path, overrides={"log.fsync.mode": fsync}) as b:
        c = await AsyncClient.connect("127.0.0.1", b.port)
        await create_topic(c, "in")
        txn = await Txn(c).init()
        await txn.add_offsets("g")
        assert await txn.commit_offsets(3, "g", "in", {0: 7}) == [0]
        coordinator = b.app.coordinator
        partition = coordinator.partition_for("g")
        marker = TxnMarker(txn.pid, txn.epoch, 0, True)
        assert await coordinator.write_txn_marker("__consumer_offsets", partition, marker) is E.NONE
        assert await fetch(c, "g", "in") == [(7, 0), (-1, 0)]
        assert await coordinator.write_txn_marker("in", 0, marker) is E.UNKNOWN_TOPIC_OR_PARTITION
        older = TxnMarker(txn.pid, txn.epoch - 1, 0, False)
        assert await coordinator.write_txn_marker("__consumer_offsets", partition, older) is \
            E.INVALID_PRODUCER_EPOCH
        await c.close()
        await b.restart()
        c = await AsyncClient.connect("127.0.0.1", b.port)
        assert await fetch(c, "g", "in") == [(7, 0), (-1, 0)]
        await c.close()


async def test_every_served_version_and_its_error_mapping(tmp_path):
    async with Broker(tmp_path) as b:
        c = await AsyncClient.connect("127.0.0.1", b.port)
        r = await c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}[28] == (0, 5)
        await create_topic(c, "in")
        for v in range(6):
            group = f"g{v}"
            txn = await Txn(c).init()
            if v < 5:  # v5 (transactions v2) adds the offsets partition itself
                await txn.add_offsets(group)
            assert await txn.commit_offsets(v, group, "in", {0: 10 + v}) == [0]
            assert await txn.commit_offsets(v, group, "nope", {0: 1}) == [E.UNKNOWN_TOPIC_OR_PARTITION]
            await txn.end(commit=True)
            await fetch(c, group, "in", settled=True)
            r = await c.request(9, 5, {"group_id": group, "topics": [{"name": "in", "partition_indexes": [0]}]})
            p = r.topics[0].partitions[0]
            assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (10 + v, 1 if v >= 2 else -1,
                                                                                  f"m{10 + v}")
        txn = await Txn(c).init()
        # KIP-890: the offsets partition must be in the transaction (AddOffsetsToTxn)
        assert await txn.commit_offsets(3, "fresh", "in", {0: 1}) == [E.INVALID_TXN_STATE]
        assert await txn.commit_offsets(4, "fresh", "in", {0: 1}) == [E.TRANSACTION_ABORTABLE]
        await txn.add_offsets("fresh")
        # v3's KIP-447 fields: an unknown group with a generation is refused
        assert await txn.commit_offsets(3, "fresh", "in", {0: 1}, generation=2, member="m") == [
            E.ILLEGAL_GENERATION]
        # an older producer epoch is fenced
        assert await txn.commit_offsets(3, "fresh", "in", {0: 1}, epoch=txn.epoch - 1) == [
            E.INVALID_PRODUCER_EPOCH]
        # while the offsets partition loads: 14, which v0-v1 answer as 15
        shard = b.app.coordinator.shard_for("fresh")
        shard.status = ShardStatus.LOADING
        try:
            assert await txn.commit_offsets(1, "fresh", "in", {0: 1}) == [E.COORDINATOR_NOT_AVAILABLE]
            assert await txn.commit_offsets(2, "fresh", "in", {0: 1}) == [E.COORDINATOR_LOAD_IN_PROGRESS]
        finally:
            shard.status = ShardStatus.ACTIVE
        await c.close()


async def test_a_group_with_only_pending_offsets_is_listed_and_deletable(tmp_path):
    async with Broker(tmp_path) as b:
        c = await AsyncClient.connect("127.0.0.1", b.port)
        await create_topic(c, "in")
        txn = await Txn(c).init()
        await txn.add_offsets("s")
        assert await txn.commit_offsets(3, "s", "in", {0: 7}) == [0]
        r = await c.request(16, 4, {"states_filter": []})
        assert [(g.group_id, g.protocol_type, g.group_state) for g in r.groups] == [("s", "", "Empty")]
        r = await c.request(42, 2, {"groups_names": ["s"]})
        assert r.results[0].error_code == 0
        await txn.end(commit=True)
        assert await fetch(c, "s", "in", settled=True) == [(-1, 0), (-1, 0)]
        r = await c.request(15, 5, {"groups": ["s"], "include_authorized_operations": False})
        assert r.groups[0].group_state == "Dead"
        await c.close()
