"""TxnOffsetCommit over TCP, ended by the transaction coordinator's marker (``Coordinator.write_txn_marker``).

Raw frames against the in-process broker, with fsync ``always`` and
``never``: the offsets stay invisible (UNSTABLE_OFFSET_COMMIT under
``require_stable``) until the COMMIT marker, an ABORT drops them, and both
survive a restart exactly as they were live.
"""

from __future__ import annotations

import pytest

from odradek.broker.runtime.runtime import ShardStatus
from odradek.broker.txn_contracts import TxnMarker
from odradek.broker.wire_client import AsyncClient
from odradek.protocol.errors import ErrorCode
from odradek.testing import Broker

pytestmark = pytest.mark.integration

E = ErrorCode
PID = 4242


def txn_commit_body(group: str, topic: str, offsets: dict[int, int], *, epoch: int = 0, generation: int = -1,
                    member: str = "") -> dict:
    return {"transactional_id": "tx", "group_id": group, "producer_id": PID, "producer_epoch": epoch,
            "generation_id": generation, "member_id": member, "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 1,
                 "committed_metadata": f"m{o}"} for p, o in offsets.items()]}]}


async def txn_commit(c: AsyncClient, version: int, group: str, topic: str, offsets: dict[int, int], **kw
                     ) -> list[int]:
    r = await c.request(28, version, txn_commit_body(group, topic, offsets, **kw))
    return [p.error_code for t in r.topics for p in t.partitions]


async def fetch(c: AsyncClient, group: str, topic: str, *, require_stable: bool = True, version: int = 7
                ) -> list[tuple[int, int]]:
    r = await c.request(9, version, {"group_id": group, "require_stable": require_stable,
                                     "topics": [{"name": topic, "partition_indexes": [0, 1]}]})
    return [(p.committed_offset, p.error_code) for p in r.topics[0].partitions]


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


async def marker(b: Broker, group: str, commit: bool, epoch: int = 0) -> ErrorCode:
    coordinator = b.app.coordinator
    return await coordinator.write_txn_marker("__consumer_offsets", coordinator.partition_for(group),
                                              TxnMarker(PID, epoch, 0, commit))


@pytest.mark.parametrize("fsync", ["always", "never"])
async def test_commit_and_abort_over_tcp_survive_a_restart(tmp_path, fsync):
    async with Broker(tmp_path, overrides={"log.fsync.mode": fsync}) as b:
        c = await AsyncClient.connect("127.0.0.1", b.port)
        await create_topic(c, "in")
        await commit(c, "g", "in", 5)
        assert await txn_commit(c, 3, "g", "in", {0: 9, 1: 4}) == [0, 0]
        unstable = E.UNSTABLE_OFFSET_COMMIT
        assert await fetch(c, "g", "in") == [(-1, unstable), (-1, unstable)]
        assert await fetch(c, "g", "in", require_stable=False) == [(5, 0), (-1, 0)]
        assert await fetch(c, "g", "in", version=6) == [(5, 0), (-1, 0)]  # no require_stable before v7
        assert await marker(b, "g", commit=True) is E.NONE
        assert await fetch(c, "g", "in") == [(9, 0), (4, 0)]

        assert await txn_commit(c, 3, "g", "in", {0: 20}) == [0]
        assert await marker(b, "g", commit=False) is E.NONE
        assert await fetch(c, "g", "in") == [(9, 0), (4, 0)]

        assert await txn_commit(c, 3, "g", "in", {1: 30}) == [0]  # open across the restart
        await c.close()
        await b.restart()
        c = await AsyncClient.connect("127.0.0.1", b.port)
        assert await fetch(c, "g", "in") == [(9, 0), (-1, unstable)]
        assert await marker(b, "g", commit=True) is E.NONE
        assert await fetch(c, "g", "in") == [(9, 0), (30, 0)]
        await c.close()


async def test_every_served_version_and_its_error_mapping(tmp_path):
    async with Broker(tmp_path) as b:
        c = await AsyncClient.connect("127.0.0.1", b.port)
        r = await c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}[28] == (0, 3)
        await create_topic(c, "in")
        for v in range(4):
            group = f"g{v}"
            assert await txn_commit(c, v, group, "in", {0: 10 + v}) == [0]
            assert await txn_commit(c, v, group, "nope", {0: 1}) == [E.UNKNOWN_TOPIC_OR_PARTITION]
            assert await marker(b, group, commit=True) is E.NONE
            r = await c.request(9, 5, {"group_id": group, "topics": [{"name": "in", "partition_indexes": [0]}]})
            p = r.topics[0].partitions[0]
            assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (10 + v, 1 if v >= 2 else -1,
                                                                                  f"m{10 + v}")
        # v3's KIP-447 fields: an unknown group with a generation is refused
        assert await txn_commit(c, 3, "fresh", "in", {0: 1}, generation=2, member="m") == [
            E.ILLEGAL_GENERATION]
        # an older producer epoch than the partition saw is fenced
        assert await txn_commit(c, 3, "g3", "in", {0: 1}, epoch=5) == [0]
        assert await txn_commit(c, 3, "g3", "in", {0: 1}, epoch=4) == [E.INVALID_PRODUCER_EPOCH]
        assert await marker(b, "g3", commit=False, epoch=4) is E.INVALID_PRODUCER_EPOCH
        # while the offsets partition loads: 14, which v0-v1 answer as 15
        shard = b.app.coordinator.shard_for("g0")
        shard.status = ShardStatus.LOADING
        try:
            assert await txn_commit(c, 1, "g0", "in", {0: 1}) == [E.COORDINATOR_NOT_AVAILABLE]
            assert await txn_commit(c, 2, "g0", "in", {0: 1}) == [E.COORDINATOR_LOAD_IN_PROGRESS]
            assert await marker(b, "g0", commit=True) is E.NOT_LEADER_OR_FOLLOWER
        finally:
            shard.status = ShardStatus.ACTIVE
        await c.close()


async def test_a_group_with_only_pending_offsets_is_listed_and_deletable(tmp_path):
    async with Broker(tmp_path) as b:
        c = await AsyncClient.connect("127.0.0.1", b.port)
        await create_topic(c, "in")
        assert await txn_commit(c, 3, "s", "in", {0: 7}) == [0]
        r = await c.request(16, 4, {"states_filter": []})
        assert [(g.group_id, g.protocol_type, g.group_state) for g in r.groups] == [("s", "", "Empty")]
        r = await c.request(42, 2, {"groups_names": ["s"]})
        assert r.results[0].error_code == 0
        assert await marker(b, "s", commit=True) is E.NONE
        assert await fetch(c, "s", "in") == [(-1, 0), (-1, 0)]
        r = await c.request(15, 5, {"groups": ["s"], "include_authorized_operations": False})
        assert r.groups[0].group_state == "Dead"
        await c.close()
