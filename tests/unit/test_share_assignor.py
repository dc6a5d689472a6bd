"""The ``simple`` share-group assignor (Kafka's SimpleAssignor): the properties clients and users rely
on -- every assignable partition has a member, balance within one, partitions shared when there are
more members than partitions, stickiness -- not Kafka's exact picks (its hash-map order)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.coordinator.share_assignor import assign, desired_counts

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def counts(result: dict) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def holders(result: dict) -> dict[tuple, int]:
    out: dict[tuple, int] = {}
    for a in result.values():
        for t, ps in a.items():
            for p in ps:
                out[(t, p)] = out.get((t, p), 0) + 1
    return out


def test_desired_counts_spread_sharing_times_partitions():
    assert desired_counts(3, 1) == [1, 1, 1]
    assert desired_counts(2, 4) == [2, 2]
    assert desired_counts(3, 4) == [2, 1, 1]  # ceil(4/3 (i+1)) - ceil(4/3 i)
    assert desired_counts(5, 2) == [2, 1, 1, 1, 1]  # sharing 3: six assignments over five members


def test_two_members_four_partitions_two_each():
    result = assign({"a": frozenset({T1}), "b": frozenset({T1})}, {T1: frozenset(range(4))}, {})
    assert counts(result) == {"a": 2, "b": 2}
    assert holders(result) == {(T1, p): 1 for p in range(4)}


def test_three_members_one_partition_all_share_it():
    result = assign({m: frozenset({T1}) for m in "abc"}, {T1: frozenset({0})}, {})
    assert result == {m: {T1: frozenset({0})} for m in "abc"}


def test_nothing_assignable_gives_empty_assignments():
    assert assign({"a": frozenset({T1})}, {}, {}) == {"a": {}}
    assert assign({}, {T1: frozenset({0})}, {}) == {}


def test_heterogeneous_subscriptions_assign_per_topic():
    result = assign({"a": frozenset({T1}), "b": frozenset({T1, T2}), "c": frozenset({T2})},
                    {T1: frozenset(range(2)), T2: frozenset(range(2))}, {})
    assert set(result["a"]) <= {T1} and set(result["c"]) <= {T2}
    assert holders(result) == {(t, p): 1 for t in (T1, T2) for p in range(2)}


def test_unsubscribed_topics_leave_the_previous_assignment():
    previous = {"a": {T1: frozenset({0, 1}), T2: frozenset({0})}}
    result = assign({"a": frozenset({T1})}, {T1: frozenset(range(2)), T2: frozenset(range(1))}, previous)
    assert result == {"a": {T1: frozenset({0, 1})}}


@settings(max_examples=300, deadline=None)
@given(members=st.integers(1, 9), partitions=st.lists(st.integers(0, 6), min_size=1, max_size=3),
       joiner=st.booleans())
def test_properties(members, partitions, joiner):
    topics = {uuid.UUID(int=i + 1): frozenset(range(n)) for i, n in enumerate(partitions)}
    subs = {f"m{i}": frozenset(topics) for i in range(members)}
    result = assign(subs, topics, {})
    total = sum(len(ps) for ps in topics.values())
    if total:
        sharing = -(-members // total)
        assert set(holders(result)) == {(t, p) for t, ps in topics.items() for p in ps}  # every one has a member
        assert max(holders(result).values()) <= sharing
        assert max(counts(result).values()) - min(counts(result).values()) <= 1  # balance within one
    else:
        assert all(a == {} for a in result.values())
    assert assign(subs, topics, result) == result  # stable: nothing moves without a change
    if joiner:  # a member joining keeps the others' partitions where balance allows
        subs["new"] = frozenset(topics)
        after = assign(subs, topics, result)
        for m, a in after.items():
            if m != "new":
                for t, ps in a.items():
                    kept = ps & result[m].get(t, frozenset())
                    assert kept or not result[m].get(t) or len(ps) <= len(result[m].get(t, ()))
        if total:
            assert set(holders(after)) == {(t, p) for t, ps in topics.items() for p in ps}
