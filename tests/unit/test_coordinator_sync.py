"""SyncGroup (Kafka's GroupCoordinator.handleSyncGroup): durable assignment first, then answers; pending-sync removal."""

from __future__ import annotations

import pytest

from odradek.broker.coordinator.rebalance import SYNC_HOLD_MAX_MS
from odradek.broker.coordinator.state import GroupState
from odradek.broker.runtime.promise import Promise
from tests.unit.coordinator_harness import GROUP, E, Harness, ok


@pytest.fixture
def h(tmp_path):
    return Harness(tmp_path)


def completing(h: Harness, n: int = 2, **kw) -> tuple[list[str], int]:
    """A group of ``n`` in CompletingRebalance; (member ids leader first, generation)."""
    ids = h.stable_group(n, **kw)
    results = [h.join(m, **kw) for m in ids]
    generation = ok(results[0].result()).generation
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    return ids, generation


class SlowWrites:
    """Holds shard writes until released, to observe what happens before durability."""

    def __init__(self, h: Harness, monkeypatch):
        self.real = h.shard.write
        self.held: list[tuple[list, Promise]] = []
        monkeypatch.setattr(h.shard, "write", self.write)

    def write(self, records, now=None):
        promise = Promise()
        self.held.append((records, promise))
        return promise

    def release(self, error=None) -> None:
        for records, promise in self.held:
            promise.set(self.real(records).result() if error is None else error)
        self.held.clear()


def test_answers_wait_for_the_durable_group_record(h, monkeypatch):
    (leader, follower), generation = completing(h)
    slow = SlowWrites(h, monkeypatch)
    follower_sync = h.sync(follower, generation)
    leader_sync = h.sync(leader, generation, {leader: b"L", follower: b"F"})
    assert not follower_sync.done and not leader_sync.done
    [(records, _)] = slow.held
    [(key, value)] = records
    assert key.group == GROUP and value.generation == generation
    assert {m.member_id: m.assignment for m in value.members} == {leader: b"L", follower: b"F"}
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    slow.release()
    assert ok(follower_sync.result()).assignment == b"F"
    assert ok(leader_sync.result()).assignment == b"L"
    assert h.group().state is GroupState.STABLE
    assert h.shard.group_records[GROUP].generation == generation


def test_result_carries_protocol_type_and_name(h):
    (leader, _), generation = completing(h)
    result = ok(h.sync(leader, generation, {leader: b"x"}).result())
    assert (result.protocol_type, result.protocol_name) == ("consumer", "range")


def test_omitted_members_get_empty_assignments_and_unknown_ids_are_ignored(h):
    (leader, follower), generation = completing(h)
    parked = h.sync(follower, generation)
    ok(h.sync(leader, generation, {leader: b"L", "stranger": b"S"}).result())
    assert ok(parked.result()).assignment == b""
    record = h.shard.group_records[GROUP]
    assert {m.member_id for m in record.members} == {leader, follower}


def test_stable_answers_with_the_stored_assignment(h):
    leader, follower = h.stable_group(2)
    assert ok(h.sync(follower, 2).result()).assignment == follower.encode()
    assert ok(h.sync(leader, 2, {leader: b"ignored"}).result()).assignment == leader.encode()


@pytest.mark.parametrize("ptype,pname,error", [
    (None, None, E.INCONSISTENT_GROUP_PROTOCOL),
    ("consumer", None, E.INCONSISTENT_GROUP_PROTOCOL),
    ("connect", "range", E.INCONSISTENT_GROUP_PROTOCOL),
    ("consumer", "sticky", E.INCONSISTENT_GROUP_PROTOCOL),
    ("consumer", "range", E.NONE),
])
def test_v5_protocol_checks(h, ptype, pname, error):
    leader, _ = h.stable_group(2)
    result = h.sync(leader, 2, protocol_type=ptype, protocol_name=pname, require_protocol=True)
    assert result.result().error is error


def test_before_v5_protocol_fields_are_optional_but_checked_when_given(h):
    leader, _ = h.stable_group(2)
    assert h.sync(leader, 2).result().error is E.NONE
    assert h.sync(leader, 2, protocol_name="sticky").result().error is E.INCONSISTENT_GROUP_PROTOCOL


def test_v5_missing_protocol_is_checked_before_anything_else(h):
    result = h.sync("x", 1, group="", require_protocol=True).result()
    assert result.error is E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("storage_error,mapped", [
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.REBALANCE_IN_PROGRESS),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.INVALID_FETCH_SIZE, E.UNKNOWN_SERVER_ERROR),
    (E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE),
])
def test_failed_group_record_maps_the_error_and_rebalances(h, monkeypatch, storage_error, mapped):
    (leader, follower), generation = completing(h)
    slow = SlowWrites(h, monkeypatch)
    parked = h.sync(follower, generation)
    lead = h.sync(leader, generation, {leader: b"L", follower: b"F"})
    slow.release(storage_error)
    assert parked.result().error is mapped and lead.result().error is mapped
    assert parked.result().protocol_type is None
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert GROUP not in h.shard.group_records or h.shard.group_records[GROUP].generation < generation


def test_write_completing_after_the_group_moved_on_is_ignored(h, monkeypatch):
    (leader, follower), generation = completing(h)
    slow = SlowWrites(h, monkeypatch)
    lead = h.sync(leader, generation, {leader: b"L"})
    h.join(follower, protocols=[("range", b"new")])  # a rebalance starts meanwhile
    assert lead.result().error is E.REBALANCE_IN_PROGRESS
    slow.release()
    assert h.group().state is GroupState.PREPARING_REBALANCE


def test_member_that_never_syncs_is_removed_and_the_group_rebalances(h):
    (leader, follower), generation = completing(h, rebalance=8000)  # sessions: 10 s
    ok(h.sync(leader, generation, {leader: b"L", follower: b"F"}).result())
    assert h.group().state is GroupState.STABLE
    h.advance(7999)
    assert follower in h.group().members
    h.advance(1)
    assert follower not in h.group().members
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(leader, generation) is E.REBALANCE_IN_PROGRESS


def test_sync_deadline_is_cancelled_once_everyone_synced(h):
    (leader, follower), generation = completing(h)
    h.sync(follower, generation)
    h.sync(leader, generation, {})
    assert not h.group().pending_sync and h.group().sync_timer is None


def test_nobody_syncs_everyone_is_removed(h):
    (leader, follower), generation = completing(h, rebalance=8000)  # before any session expiry
    h.advance(7999)
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    h.advance(1)
    group = h.group()
    assert group.state is GroupState.EMPTY and not group.members
    assert h.shard.group_records[GROUP].members == []


def test_answers_come_after_the_fsync_when_writes_wait_for_durability(tmp_path):
    import asyncio

    h = Harness(tmp_path)
    (leader, follower), generation = completing(h)
    h.shard.writer.await_fsync = True  # as with log.fsync.mode=always: applied after the fsync

    async def scenario() -> None:
        follower_sync = h.sync(follower, generation)
        leader_sync = h.sync(leader, generation, {leader: b"L", follower: b"F"})
        assert not leader_sync.done and h.group().state is GroupState.COMPLETING_REBALANCE
        for _ in range(400):
            if leader_sync.done:
                break
            await asyncio.sleep(0.005)
        assert ok(leader_sync.result()).assignment == b"L"
        assert ok(follower_sync.result()).assignment == b"F"

    asyncio.run(scenario())
    assert h.group().state is GroupState.STABLE
    assert h.shard.group_records[GROUP].generation == generation


# --- the leader's SyncGroup held while member ids handed out are to come back --------------------


def _lone_generation(h: Harness) -> str:
    leader = h.join_new()
    h.advance(0)
    return ok(leader.result()).member_id


def test_leader_sync_held_while_a_member_id_is_pending_then_rebalance(h):
    """A consumer whose first JoinGroup (79) came after the first generation formed: the leader's
    SyncGroup waits for it, and its join turns the answer into 27, so the leader rejoins at once
    instead of learning of the new member at its next heartbeat."""
    leader = _lone_generation(h)
    late = h.join().result().member_id  # MEMBER_ID_REQUIRED: pending
    sync = h.sync(leader, 1, {leader: b"a"})
    assert not sync.done and h.group().state is GroupState.COMPLETING_REBALANCE
    joined = h.join(late)
    assert sync.result().error is E.REBALANCE_IN_PROGRESS
    assert h.group().state is GroupState.PREPARING_REBALANCE
    rejoin = h.join(leader)
    assert ok(rejoin.result()).generation == 2 and ok(joined.result()).generation == 2


def test_leader_sync_held_at_most_sync_hold_max_ms(h):
    """A client that gives up after its MEMBER_ID_REQUIRED does not stall the group for its
    session timeout: the leader's assignment is stored after SYNC_HOLD_MAX_MS."""
    leader = _lone_generation(h)
    h.join(session=60_000)  # never comes back
    sync = h.sync(leader, 1, {leader: b"a"})
    h.advance(SYNC_HOLD_MAX_MS - 1)
    assert not sync.done
    h.advance(1)
    assert ok(sync.result()).assignment == b"a"
    assert h.group().state is GroupState.STABLE


def test_leader_sync_held_ends_when_the_pending_id_leaves(h):
    leader = _lone_generation(h)
    late = h.join().result().member_id
    sync = h.sync(leader, 1, {leader: b"a"})
    assert h.leave(late).members[0][1] is E.NONE
    assert ok(sync.result()).assignment == b"a"


def test_leader_sync_not_held_without_pending_ids(h):
    leader = _lone_generation(h)
    assert ok(h.sync(leader, 1, {leader: b"a"}).result()).assignment == b"a"
