"""Property: whatever members do, the log rebuilds what the live coordinator holds.

Random sequences of joins (dynamic and static, v5/v9, changing metadata),
syncs, heartbeats, leaves, deletes, transactional offset commits by the
members (KIP-447) and their markers, clock advances (so sessions, join and
sync deadlines expire) and restarts (a new Shard replayed from the same
log).  After each restart the replayed persisted view must equal the live
one, and every group the live coordinator had settled (Stable, or Empty with
a record) must come back with the same generation, protocol, leader,
members and assignments.  Between restarts, a Stable group always equals
what its record says.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from odradek.broker.coordinator.api import JoinResult, LeaveMember
from odradek.broker.coordinator.group import ClassicGroup
from odradek.broker.coordinator.state import GroupState
from odradek.broker.coordinator.txn_offsets import TxnCommitRequest, commit_txn_offsets, write_marker
from odradek.broker.runtime.promise import Promise
from odradek.broker.txn_contracts import TxnMarker
from tests.unit.coordinator_harness import GROUP, E, Harness, subscription

PROTOCOLS = [
    [("range", subscription("t")), ("roundrobin", subscription("t"))],
    [("roundrobin", subscription("t", "u")), ("range", subscription("t", "u"))],
]
INSTANCES = [None, None, "static-a", "static-b"]


@dataclass
class Client:
    """What a consumer remembers between requests."""

    instance: str | None
    member_id: str = ""
    generation: int = -1
    members: list[str] = field(default_factory=list)
    leader: bool = False
    join: Promise | None = None
    synced: int = -1
    variant: int = 0

    def absorb(self) -> None:
        """Take in a JoinGroup answer that arrived meanwhile."""
        if self.join is None or not self.join.done:
            return
        result: JoinResult = self.join.result()
        self.join = None
        if result.error is E.NONE:
            self.member_id, self.generation = result.member_id, result.generation
            self.leader = result.leader == result.member_id
            self.members = [m for m, _, _ in result.members]
        elif result.error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID, E.NOT_COORDINATOR):
            self.member_id, self.generation = "", -1


def do_join(h: Harness, c: Client, variant: int, version: int) -> None:
    if c.join is not None:
        return  # a real client never has two JoinGroups in flight
    c.variant = variant
    kw = dict(instance=c.instance, protocols=PROTOCOLS[variant], version=version,
              session=10_000, rebalance=8_000)
    answer = h.join(c.member_id, **kw)
    if answer.done and answer.result().error is E.MEMBER_ID_REQUIRED:
        answer = h.join(answer.result().member_id, **kw)
    c.join = answer


def do_sync(h: Harness, c: Client) -> None:
    if not c.member_id or c.generation < 0:
        return
    assignments = {m: f"{m}@{c.generation}".encode() for m in c.members} if c.leader else {}
    h.sync(c.member_id, c.generation, assignments, instance=c.instance)
    c.synced = c.generation


def poll(h: Harness, c: Client) -> None:
    """One step of a well-behaved consumer: join, sync, heartbeat, rejoin when told to."""
    if c.join is not None:
        return
    if not c.member_id:
        do_join(h, c, c.variant, 5)
    elif c.synced < c.generation:
        do_sync(h, c)
    else:
        error = h.heartbeat(c.member_id, c.generation, instance=c.instance)
        if error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            c.member_id, c.generation = "", -1
        if error is not E.NONE:
            do_join(h, c, c.variant, 5)


def apply(h: Harness, clients: list[Client], op: tuple) -> None:
    kind, who, arg = op
    c = clients[who % len(clients)]
    if kind == "join":
        do_join(h, c, arg % 2, 9 if arg >= 2 else 5)
    elif kind == "sync":
        do_sync(h, c)
    elif kind == "heartbeat" and c.member_id:
        h.heartbeat(c.member_id, c.generation, instance=c.instance)
    elif kind == "leave" and c.member_id:
        h.leave(LeaveMember(c.member_id, c.instance))
        c.member_id, c.generation = "", -1
    elif kind == "advance":
        h.advance([0, 999, 3_000, 8_000, 10_000, 31_000][arg])
    elif kind == "poll":
        if who == 4:
            h.advance(1_000)  # a second passes; every consumer polls
        for client in clients if who == 4 else [c]:
            client.absorb()
            poll(h, client)
    elif kind == "delete":
        h.delete(GROUP)
    elif kind == "txn":  # the member commits its position in its producer's transaction
        request = TxnCommitRequest("tx", GROUP, 1000 + who % 2, 0, c.generation, c.member_id, c.instance, 3)
        commit_txn_offsets(h.coordinator, request, [("t", arg % 2, arg, -1, "")], lambda topic: 2)
    elif kind == "marker":
        write_marker(h.coordinator, "__consumer_offsets", h.shard.partition,
                     TxnMarker(1000 + who % 2, 0, 0, commit=arg >= 1))
    elif kind == "restart":
        check_restart(h)
    for client in clients:
        client.absorb()


# --- what must hold ----------------------------------------------------------------------------


def settled(group: ClassicGroup) -> tuple:
    """The persisted part of a group, comparable between live and rebuilt groups."""
    members = {m.member_id: (m.group_instance_id, m.client_id, m.client_host,
                             m.session_timeout_ms, m.rebalance_timeout_ms,
                             m.metadata(group.protocol_name), m.assignment)
               for m in group.members.values()}
    return (group.generation, group.protocol_type, group.protocol_name, group.leader_id, members,
            dict(group.static_members))


def is_settled(h: Harness, group: ClassicGroup) -> bool:
    return group.group_id in h.shard.group_records and group.state in (GroupState.STABLE,
                                                                        GroupState.EMPTY)


def check_counters(group: ClassicGroup) -> None:
    """The group's running counts agree with its members."""
    assert group.awaiting_join_count == sum(1 for m in group.members.values() if m.awaiting_join)
    counts: dict[str, int] = {}
    for m in group.members.values():
        for name in set(m.protocol_names()):
            counts[name] = counts.get(name, 0) + 1
    assert group.protocol_counts == counts


def check_stable_matches_record(h: Harness) -> None:
    for group_id, group in h.shard.groups.items():
        check_counters(group)
        if is_settled(h, group):
            rebuilt = ClassicGroup.from_record(group_id, h.shard.group_records[group_id])
            assert settled(rebuilt) == settled(group)
            assert rebuilt.state is group.state


def check_restart(h: Harness) -> None:
    view = h.shard.persisted_view()
    txn = h.shard.txn_view()
    committed = {g: dict(o) for g, o in h.shard.offsets.items()}
    groups = {g: (x.state, x.protocol_type) for g, x in h.shard.groups.items()
              if x.state in (GroupState.EMPTY, GroupState.STABLE)}
    expected = {g: settled(x) for g, x in h.shard.groups.items() if is_settled(h, x)}
    event(f"restart with settled groups in {sorted({x[4] != {} for x in expected.values()})}")
    h.restart(hooks=False)
    assert h.shard.persisted_view() == view
    assert h.shard.txn_view() == txn
    assert {g: dict(o) for g, o in h.shard.offsets.items()} == committed
    assert {g: (x.state, x.protocol_type) for g, x in h.shard.groups.items()
            if g in groups} == groups
    for group_id, summary in expected.items():
        assert settled(h.shard.groups[group_id]) == summary
    for listener in h.coordinator.load_listeners:
        listener(h.shard)


OPS = st.one_of(
    st.tuples(st.just("join"), st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("sync"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("heartbeat"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("poll"), st.integers(0, 4), st.just(0)),
    *[st.tuples(st.just("poll"), st.just(4), st.just(0))] * 5,
    st.tuples(st.just("leave"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("advance"), st.just(0), st.integers(0, 5)),
    st.tuples(st.just("restart"), st.just(0), st.just(0)),
    st.tuples(st.just("delete"), st.just(0), st.just(0)),
    st.tuples(st.just("txn"), st.integers(0, 3), st.integers(0, 5)),
    st.tuples(st.just("marker"), st.integers(0, 1), st.integers(0, 2)),
)


# a phase: some arbitrary operations, then a few seconds of well-behaved polling, maybe a restart
PHASES = st.lists(st.tuples(st.lists(OPS, max_size=10), st.integers(0, 8), st.booleans()),
                  min_size=1, max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=PHASES, initial_delay=st.sampled_from([0, 3000]))
def test_log_rebuilds_the_live_coordinator(phases, initial_delay):
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(Path(tmp), initial_rebalance_delay_ms=initial_delay)
        clients = [Client(instance) for instance in INSTANCES]
        for ops, polls, restart in phases:
            for op in ops + [("poll", 4, 0)] * polls + [("restart", 0, 0)] * restart:
                apply(h, clients, op)
                check_stable_matches_record(h)
        group = h.shard.groups.get(GROUP)
        event(f"final state {group.state.value if group else None}")
        event(f"generation reached >= 3: {group is not None and group.generation >= 3}")
        check_restart(h)
        h.log.close()
