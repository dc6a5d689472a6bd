"""Every advertised version of the group APIs, raw over TCP: request shapes and answers per version."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.broker.wire_client import AsyncClient
from odradek.offsets.consumer_protocol import Subscription, encode_subscription
from odradek.protocol.errors import ErrorCode as E

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

META = encode_subscription(Subscription(version=0, topics=["t"]))


def join_body(group: str, member_id: str = "", instance: str | None = None, **kw) -> dict:
    body = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": META}], "reason": None}
    body.update(kw)
    return body


def sync_body(group: str, generation: int, member_id: str, assignments=(), **kw) -> dict:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}
    body.update(kw)
    return body


@pytest.fixture
async def client(abroker):
    await abroker.app.wait_loaded()
    c = await AsyncClient.connect("127.0.0.1", abroker.port)
    yield c
    await c.close()


async def form(client: AsyncClient, group: str, join_v: int, sync_v: int) -> tuple[str, int]:
    """A one-member Stable group joined and synced with the given versions."""
    r = await client.request(11, join_v, join_body(group))
    if join_v >= 4:
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.generation_id == -1
        r = await client.request(11, join_v, join_body(group, r.member_id))
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    s = await client.request(14, sync_v, sync_body(group, 1, r.member_id, [(r.member_id, b"A")]))
    assert s.error_code == 0 and s.assignment == b"A"
    return r.member_id, r.generation_id


@pytest.mark.parametrize("version", range(10))
async def test_join_group_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    r = await client.request(11, version, join_body(group))
    if version >= 4:
        assert r.error_code == E.MEMBER_ID_REQUIRED
        assert r.protocol_name == ("" if version < 7 else None)  # null vs ""
        if version >= 7:
            assert r.protocol_type is None
        r = await client.request(11, version, join_body(group, r.member_id))
    assert r.error_code == 0 and r.generation_id == 1
    assert r.protocol_name == "range"
    if version >= 7:
        assert r.protocol_type == "consumer"
    [member] = r.members
    assert member.member_id == r.member_id and member.metadata == META
    bad = await client.request(11, version, join_body(group, "nobody"))
    assert bad.error_code == E.UNKNOWN_MEMBER_ID and bad.member_id == "nobody"
    invalid = await client.request(11, version, join_body(group, session_timeout_ms=10))
    assert invalid.error_code == E.INVALID_SESSION_TIMEOUT


async def test_join_v0_uses_session_timeout_as_rebalance_timeout(client, abroker):
    group = f"g-{uuid.uuid4().hex[:6]}"
    await form(client, group, 0, 0)
    g = abroker.app.coordinator.shard_for(group).groups[group]
    assert [m.rebalance_timeout_ms for m in g.members.values()] == [10000]


@pytest.mark.parametrize("version", range(5, 10))
async def test_static_join_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    r = await client.request(11, version, join_body(group, instance="i-1"))
    assert r.error_code == 0 and r.member_id.startswith("i-1-")
    assert r.members[0].group_instance_id == "i-1"
    s = await client.request(14, 5, sync_body(group, 1, r.member_id, [(r.member_id, b"A")],
                                              group_instance_id="i-1"))
    assert s.error_code == 0
    again = await client.request(11, version, join_body(group, instance="i-1"))
    assert again.error_code == 0 and again.generation_id == 1 and again.member_id != r.member_id
    assert again.skip_assignment == (version >= 9)
    fenced = await client.request(12, 3, {"group_id": group, "generation_id": 1,
                                          "member_id": r.member_id, "group_instance_id": "i-1"})
    assert fenced.error_code == E.FENCED_INSTANCE_ID


@pytest.mark.parametrize("version", range(6))
async def test_sync_group_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, generation = await form(client, group, 5, version)
    s = await client.request(14, version, sync_body(group, generation, member))
    assert s.error_code == 0 and s.assignment == b"A"
    if version >= 5:
        assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
        missing = await client.request(14, version, sync_body(group, generation, member,
                                                             protocol_name=None))
        assert missing.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert missing.protocol_type is None and missing.protocol_name is None
    wrong = await client.request(14, version, sync_body(group, generation + 1, member))
    assert wrong.error_code == E.ILLEGAL_GENERATION


@pytest.mark.parametrize("version", range(5))
async def test_heartbeat_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, generation = await form(client, group, 5, 3)
    body = {"group_id": group, "generation_id": generation, "member_id": member,
            "group_instance_id": None}
    assert (await client.request(12, version, body)).error_code == 0
    assert (await client.request(12, version, {**body, "generation_id": 9})).error_code \
        == E.ILLEGAL_GENERATION
    assert (await client.request(12, version, {**body, "member_id": "x"})).error_code \
        == E.UNKNOWN_MEMBER_ID
    assert (await client.request(12, version, {**body, "group_id": ""})).error_code \
        == E.INVALID_GROUP_ID


@pytest.mark.parametrize("version", range(6))
async def test_leave_group_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, _ = await form(client, group, 5, 3)
    if version < 3:
        unknown = await client.request(13, version, {"group_id": group, "member_id": "x"})
        assert unknown.error_code == E.UNKNOWN_MEMBER_ID  # the member's error, down-converted
        left = await client.request(13, version, {"group_id": group, "member_id": member})
        assert left.error_code == 0
    else:
        left = await client.request(13, version, {"group_id": group, "members": [
            {"member_id": member, "group_instance_id": None, "reason": "done"},
            {"member_id": "x", "group_instance_id": None, "reason": None}]})
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [
            (member, 0), ("x", E.UNKNOWN_MEMBER_ID)]
    d = await client.request(15, 0, {"groups": [group]})
    assert d.groups[0].group_state == "Empty"


@pytest.mark.parametrize("version", range(6))
async def test_describe_groups_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, _ = await form(client, group, 5, 3)
    d = await client.request(15, version, {"groups": [group, "nope"],
                                           "include_authorized_operations": True})
    stable, dead = d.groups
    assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == \
        (0, "Stable", "consumer", "range")
    [m] = stable.members
    assert (m.member_id, m.member_metadata, m.member_assignment) == (member, META, b"A")
    assert (dead.group_state, dead.protocol_type, dead.members) == ("Dead", "", [])
    if version >= 3:
        assert stable.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)


@pytest.mark.parametrize("version", range(6))
async def test_list_groups_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    await form(client, group, 5, 3)
    body = {"states_filter": [], "types_filter": []}
    r = await client.request(16, version, body)
    mine = [g for g in r.groups if g.group_id == group]
    assert r.error_code == 0 and mine and mine[0].protocol_type == "consumer"
    if version >= 4:
        assert mine[0].group_state == "Stable"
        r = await client.request(16, version, {**body, "states_filter": ["Empty"]})
        assert group not in {g.group_id for g in r.groups}
    if version >= 5:
        assert mine[0].group_type == "classic"
        r = await client.request(16, version, {**body, "types_filter": ["consumer"]})
        assert r.groups == []


async def test_list_groups_filters_as_kafka(client):
    """ListGroups v5 filters as Kafka 4's GroupMetadataManager.listGroups reads them.

    States: lower-cased and trimmed; unknown names match nothing.  Types:
    lower-cased, not trimmed; unknown types match nothing; an empty list does
    not filter; both filters must hold.
    """
    stable = f"g-{uuid.uuid4().hex[:6]}"
    await form(client, stable, 5, 3)
    empty = f"g-{uuid.uuid4().hex[:6]}"
    member, _ = await form(client, empty, 5, 3)
    await client.request(13, 1, {"group_id": empty, "member_id": member})

    async def listed(states=(), types=()) -> set[str]:
        r = await client.request(16, 5, {"states_filter": list(states),
                                         "types_filter": list(types)})
        assert r.error_code == 0
        return {g.group_id for g in r.groups} & {stable, empty}

    assert await listed() == {stable, empty}
    assert await listed(["stable"]) == {stable}
    assert await listed(["STABLE", " Empty\t"]) == {stable, empty}
    assert await listed(["Dead"]) == set()
    assert await listed(["nonsense"]) == set()
    assert await listed(["nonsense", "empty"]) == {empty}
    assert await listed(types=["CLASSIC"]) == {stable, empty}
    assert await listed(types=[" classic"]) == set()
    assert await listed(types=["consumer", "share"]) == set()
    assert await listed(types=["unknown"]) == set()
    assert await listed(types=["consumer", "Classic"]) == {stable, empty}
    assert await listed(["empty"], ["classic"]) == {empty}
    assert await listed(["empty"], ["consumer"]) == set()


async def test_zero_rebalance_timeout_expires_the_pending_sync_at_once(client):
    """JoinGroup v1+ with rebalance_timeout_ms 0: the member is gone before its SyncGroup.

    Kafka does the same: the pending-sync timer (GroupMetadataManager.schedulePendingSync,
    and DelayedSync in 3.9's GroupCoordinator) runs for the group's rebalance
    timeout, the largest of its members', so 0 expires it at once; the members
    that have not synced are removed and the group rebalances (here to Empty).
    """
    group = f"g-{uuid.uuid4().hex[:6]}"
    r = await client.request(11, 1, join_body(group, rebalance_timeout_ms=0))
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    s = await client.request(14, 0, sync_body(group, 1, r.member_id, [(r.member_id, b"A")]))
    assert s.error_code == E.UNKNOWN_MEMBER_ID
    d = await client.request(15, 0, {"groups": [group]})
    assert (d.groups[0].group_state, d.groups[0].members) == ("Empty", [])
    # a rebalance timeout above zero (v0 has none: the session timeout stands in) syncs
    r = await client.request(11, 0, join_body(group))
    assert r.error_code == 0 and r.generation_id == 3
    s = await client.request(14, 0, sync_body(group, 3, r.member_id, [(r.member_id, b"B")]))
    assert s.error_code == 0 and s.assignment == b"B"


@pytest.mark.parametrize("version", range(3))
async def test_delete_groups_versions(client, version):
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, _ = await form(client, group, 5, 3)
    r = await client.request(42, version, {"groups_names": [group, "nope"]})
    assert {x.group_id: x.error_code for x in r.results} == {
        group: E.NON_EMPTY_GROUP, "nope": E.GROUP_ID_NOT_FOUND}
    await client.request(13, 1, {"group_id": group, "member_id": member})
    r = await client.request(42, version, {"groups_names": [group]})
    assert [(x.group_id, x.error_code) for x in r.results] == [(group, 0)]
    d = await client.request(15, 0, {"groups": [group]})
    assert d.groups[0].group_state == "Dead"


async def test_parked_join_does_not_block_other_connections(client, abroker):
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, _ = await form(client, group, 5, 3)
    other = await AsyncClient.connect("127.0.0.1", abroker.port)
    try:
        cid = client.send(11, 5, join_body(group, member))  # the only member rejoins: at once
        got, r = await client.recv(11, 5)
        assert got == cid and r.error_code == 0 and r.generation_id == 2
        follower = await other.request(11, 5, join_body(group))
        assert follower.error_code == E.MEMBER_ID_REQUIRED
        parked = other.send(11, 5, join_body(group, follower.member_id))  # rebalance: waits
        hb = await client.request(12, 3, {"group_id": group, "generation_id": 2,
                                          "member_id": member, "group_instance_id": None})
        assert hb.error_code == E.REBALANCE_IN_PROGRESS
        rejoin = await client.request(11, 5, join_body(group, member))
        assert rejoin.error_code == 0 and rejoin.generation_id == 3 and len(rejoin.members) == 2
        got, r = await other.recv(11, 5)
        assert got == parked and r.error_code == 0 and r.generation_id == 3 and r.members == []
    finally:
        await other.close()


# --- consumers started together: one first generation, no round learnt of at a heartbeat ----------


async def test_first_generation_waits_for_member_ids_handed_out(abroker):
    """Two members' first JoinGroups (79) before either rejoins: the first rejoin is not answered
    with a generation of one (the initial delay passes meanwhile); both get generation 1 once
    the second id comes back."""
    await abroker.app.wait_loaded()
    group = f"g-{uuid.uuid4().hex[:6]}"
    a, b = [await AsyncClient.connect("127.0.0.1", abroker.port) for _ in range(2)]
    try:
        id_a = (await a.request(11, 5, join_body(group))).member_id
        id_b = (await b.request(11, 5, join_body(group))).member_id
        first = asyncio.ensure_future(a.request(11, 5, join_body(group, id_a)))
        await asyncio.sleep(0.2)  # well past the initial delay
        assert not first.done()
        second = await b.request(11, 5, join_body(group, id_b))
        first = await first
        assert first.error_code == second.error_code == 0
        assert first.generation_id == second.generation_id == 1
        assert sorted(m.member_id for m in first.members) == sorted([id_a, id_b])
    finally:
        await a.close()
        await b.close()


async def test_leader_sync_waits_for_a_member_id_handed_out(abroker):
    """A member whose first JoinGroup (79) comes after the first generation formed: the leader's
    SyncGroup is answered 27 when that member joins, instead of 0 at once (the leader would
    learn of the new round only at its next heartbeat)."""
    await abroker.app.wait_loaded()
    group = f"g-{uuid.uuid4().hex[:6]}"
    a, b = [await AsyncClient.connect("127.0.0.1", abroker.port) for _ in range(2)]
    try:
        id_a = (await a.request(11, 5, join_body(group))).member_id
        joined = await a.request(11, 5, join_body(group, id_a))
        assert joined.generation_id == 1 and len(joined.members) == 1
        id_b = (await b.request(11, 5, join_body(group))).member_id
        sync = asyncio.ensure_future(a.request(14, 3, sync_body(group, 1, id_a, [(id_a, b"A")])))
        await asyncio.sleep(0.2)
        assert not sync.done()
        late = asyncio.ensure_future(b.request(11, 5, join_body(group, id_b)))
        assert (await sync).error_code == E.REBALANCE_IN_PROGRESS
        rejoin = await a.request(11, 5, join_body(group, id_a))
        assert rejoin.generation_id == (await late).generation_id == 2
    finally:
        await a.close()
        await b.close()
