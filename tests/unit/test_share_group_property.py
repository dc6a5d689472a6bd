"""Property: random join / leave / resubscribe / heartbeat / topic-change / restart / silence sequences
of share-group members, with the share coordinator's initialization failing at random, keep the live
state equal to the state replayed from the log, and converge once the members keep heartbeating:
every subscribed partition initialized and assigned to some member, each member holding exactly its
target (restricted to its topics), balanced within one in a homogeneous group."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.broker.coordinator import share_heartbeat
from odradek.broker.coordinator.share_heartbeat import ShareHeartbeatRequest
from odradek.broker.runtime.promise import Promise
from tests.unit.consumer_harness import ConsumerHarness, E

TOPICS = ["a", "b", "c"]
GROUP = "sg"


class FlakyPersister:
    """The share coordinator's initialize/delete, answering at once; ``failing`` refuses them."""

    def __init__(self) -> None:
        self.failing = False
        self.initialized: dict[tuple, int] = {}

    def initialize(self, ident, *, state_epoch: int, start_offset: int) -> Promise:
        if self.failing:
            return Promise.resolved(E.COORDINATOR_LOAD_IN_PROGRESS)
        self.initialized[ident] = state_epoch
        return Promise.resolved(E.NONE)

    def delete(self, ident) -> Promise:
        self.initialized.pop(ident, None)
        return Promise.resolved(E.NONE)


class ShareHarness(ConsumerHarness):
    def __init__(self, directory: Path) -> None:
        self.persister = FlakyPersister()
        super().__init__(directory)

    def _load(self, hooks: bool = True):
        coordinator = super()._load(hooks)
        coordinator.share_persister = self.persister
        return coordinator

    def restart(self, hooks: bool = True):
        share_heartbeat.unload_shard(self.shard)
        return super().restart(hooks)

    def beat(self, member: str, epoch: int, topics: list[str] | None = None):
        promise = share_heartbeat.share_heartbeat(self.coordinator, ShareHeartbeatRequest(
            GROUP, member, epoch, subscribed_topic_names=topics, client_id="c", client_host="/127.0.0.1"))
        assert promise.done
        return promise.result()


class Client:
    def __init__(self, member_id: str, topics: list[str]) -> None:
        self.member_id, self.topics, self.epoch, self.joined = member_id, topics, 0, False
        self.assigned: dict = {}

    def beat(self, h: ShareHarness, new_topics: list[str] | None = None) -> None:
        if new_topics is not None:
            self.topics = new_topics
        r = h.beat(self.member_id, self.epoch if self.joined else 0,
                   self.topics if (not self.joined or new_topics is not None) else None)
        if r.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.joined, self.epoch, self.assigned = False, 0, {}
            return
        assert r.error == E.NONE, r
        self.joined, self.epoch = True, r.member_epoch
        if r.assignment is not None:
            self.assigned = {t: ps for t, ps in r.assignment.items() if ps}


op = st.one_of(
    st.tuples(st.just("join"), st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("leave"), st.integers(0, 10)),
    st.tuples(st.just("beat"), st.integers(0, 10)),
    st.tuples(st.just("subscribe"), st.integers(0, 10),
              st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS)),
    st.tuples(st.just("delete"), st.sampled_from(TOPICS)),
    st.tuples(st.just("flaky"), st.booleans()),
    st.tuples(st.just("restart")),
    st.tuples(st.just("silence")),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=25))
def test_random_sequences_replay_the_live_state_and_converge(ops):
    with tempfile.TemporaryDirectory() as d:
        h = ShareHarness(Path(d))
        for t in TOPICS:
            h.topic(t, 2)
        clients: list[Client] = []
        n = 0
        for step in ops:
            kind = step[0]
            if kind == "join":
                n += 1
                clients.append(Client(f"m{n}", step[1]))
                clients[-1].beat(h)
            elif kind in ("leave", "beat", "subscribe") and clients:
                c = clients[step[1] % len(clients)]
                if kind == "leave":
                    if c.joined:
                        assert h.beat(c.member_id, -1).error in (E.NONE, E.UNKNOWN_MEMBER_ID)
                    clients.remove(c)
                else:
                    c.beat(h, step[2] if kind == "subscribe" else None)
            elif kind == "grow":
                h.topic(step[1], (h.topic_table[step[1]][1] if step[1] in h.topic_table else 0) + 1)
            elif kind == "delete" and step[1] in h.topic_table:
                h.delete_topic(step[1])
            elif kind == "flaky":
                h.persister.failing = step[1]
            elif kind == "restart":
                before = h.shard.share_view()
                h.restart()
                assert h.shard.share_view() == before  # live state == replayed state
            elif kind == "silence":
                h.advance(46_000)  # every session expires
                for c in clients:
                    c.joined, c.epoch, c.assigned = False, 0, {}
        h.persister.failing = False
        h.advance(31_000)  # initializations refused meanwhile may be asked again
        for c in clients:
            c.joined, c.epoch = False, 0
        for _ in range(6):  # converge: everyone keeps heartbeating
            for c in clients:
                c.beat(h)
        group = h.shard.share_groups.get(GROUP)
        if group is not None and clients:
            assert {m for m in group.members} == {c.member_id for c in clients}
            wanted = {(h.topic_table[t][0], p) for c in clients for t in c.topics if t in h.topic_table
                      for p in range(h.topic_table[t][1])}
            held = {(t, p) for c in clients for t, ps in c.assigned.items() for p in ps}
            assert held == wanted  # every subscribed partition initialized and handed out
            for c in clients:
                target = {t: ps for t, ps in group.targets.get(c.member_id, {}).items() if ps}
                assert c.assigned == {t: ps for t, ps in group.members[c.member_id].assigned.items() if ps}
                assert c.assigned == {t: ps for t, ps in target.items()
                                      if any(h.topic_table.get(n, (None,))[0] == t for n in c.topics)}
            if len({tuple(sorted(c.topics)) for c in clients}) == 1:
                sizes = [sum(len(ps) for ps in c.assigned.values()) for c in clients]
                assert max(sizes) - min(sizes) <= 1
        before = h.shard.share_view()
        h.restart()
        assert h.shard.share_view() == before
