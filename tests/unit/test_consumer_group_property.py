"""Property: random join / leave / subscribe / heartbeat / topic-change / restart sequences of
consumer-protocol members keep every partition owned by at most one member (server side and as the
clients see it), converge to the target assignment once the members keep heartbeating, and the
live state always equals the state replayed from the log."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.broker.coordinator.consumer_group import STABLE
from tests.unit.consumer_harness import ConsumerHarness, E, owned_twice

TOPICS = ["a", "b", "c"]


class Client:
    """A member as a client runs it: the epoch it knows, what it owns (its last assignment)."""

    def __init__(self, member_id: str, topics: list[str]):
        self.member_id = member_id
        self.topics = topics
        self.epoch = 0
        self.owned: dict = {}
        self.joined = False

    def beat(self, h: ConsumerHarness, new_topics: list[str] | None = None) -> None:
        if not self.joined:
            r = h.subscribe(self.member_id, self.topics)
        else:
            r = h.hb(self.member_id, self.epoch, owned=dict(self.owned), topics=new_topics)
        if r.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.joined, self.epoch, self.owned = False, 0, {}  # drop everything, rejoin
            return
        assert r.error == E.NONE, r
        self.joined = True
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = {t: ps for t, ps in r.assignment.items() if ps}


def client_overlap(clients: list[Client]) -> list:
    seen, twice = set(), []
    for c in clients:
        for t, ps in c.owned.items():
            for p in ps:
                if (t, p) in seen:
                    twice.append((t, p))
                seen.add((t, p))
    return twice


op = st.one_of(
    st.tuples(st.just("join"), st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("leave"), st.integers(0, 10)),
    st.tuples(st.just("beat"), st.integers(0, 10)),
    st.tuples(st.just("subscribe"), st.integers(0, 10), st.lists(st.sampled_from(TOPICS), max_size=3, unique=True)),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS)),
    st.tuples(st.just("delete"), st.sampled_from(TOPICS)),
    st.tuples(st.just("restart")),
    st.tuples(st.just("silence")),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=25))
def test_random_sequences_keep_ownership_single_and_converge(ops):
    with tempfile.TemporaryDirectory() as d:
        h = ConsumerHarness(Path(d))
        for t in TOPICS:
            h.topic(t, 3)
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
                        h.hb(c.member_id, -1)
                    clients.remove(c)
                elif kind == "beat":
                    c.beat(h)
                else:
                    c.beat(h, new_topics=step[2])
            elif kind == "grow":
                h.topic(step[1], (h.topic_table[step[1]][1] if step[1] in h.topic_table else 0) + 1)
            elif kind == "delete" and step[1] in h.topic_table:
                h.delete_topic(step[1])
            elif kind == "restart":
                before = h.shard.consumer_view()
                h.restart()
                assert h.shard.consumer_view() == before  # live state == replayed state
            elif kind == "silence":
                h.advance(46_000)  # every session expires; clients count their partitions lost
                for c in clients:
                    c.joined, c.epoch, c.owned = False, 0, {}
            for g in h.shard.consumer_groups.values():
                assert owned_twice(g) == []
            assert client_overlap(clients) == []
        # converge: everyone keeps heartbeating
        for _ in range(12):
            for c in clients:
                c.beat(h)
                assert client_overlap(clients) == []
        group = h.shard.consumer_groups.get("cg")
        if group is not None and group.members:
            assert group.state == STABLE
            for c in clients:
                member = group.members[c.member_id]
                target = {t: ps for t, ps in group.targets.get(c.member_id, {}).items() if ps}
                assert {t: ps for t, ps in member.assigned.items() if ps} == target
        before = h.shard.consumer_view()
        h.restart()
        assert h.shard.consumer_view() == before
