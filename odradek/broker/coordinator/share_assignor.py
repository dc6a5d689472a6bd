"""The ``simple`` share-group assignor (Kafka's ``SimpleAssignor``), a pure function.

Share groups hand records out per batch under a lock, so a partition may be assigned to several
members when there are more members than partitions.  Kafka's
``SimpleHomogeneousAssignmentBuilder`` (every member subscribes to the same topics) works on all
target partitions at once; ``SimpleHeterogeneousAssignmentBuilder`` runs the same steps per
topic over the members subscribed to it.  The steps: keep each member's previous partitions that
are still targets; take members off partitions shared by more than the desired sharing
(``ceil(M / P)``), overfilled members first; take partitions off members above their desired
count; give every under-shared partition to unfilled members round-robin.

Kafka's results follow its hash maps' iteration order; here members go by id and partitions by
(topic id, partition), so an assignment is deterministic but not Kafka's exact one (no client
relies on which member gets which partition: balance within one, stickiness and sharing hold).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

Assignment = dict[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]

NAME = "simple"


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, frozenset[int]],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Member id -> its target assignment.

    ``subscriptions``: each member's subscribed topic ids; ``partitions``: the assignable
    (initialized) partitions per topic id; ``previous``: the current target assignment.
    """
    if not subscriptions:
        return {}
    subs = {m: frozenset(t for t in s if partitions.get(t)) for m, s in subscriptions.items()}
    members = sorted(subscriptions)
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if len(set(subs.values())) == 1:  # homogeneous
        groups = [(members, subs[members[0]])]
    else:
        topics = sorted({t for s in subs.values() for t in s}, key=lambda u: u.bytes)
        groups = [([m for m in members if t in subs[m]], frozenset([t])) for t in topics]
    for group_members, topic_ids in groups:
        targets = [(t, p) for t in sorted(topic_ids, key=lambda u: u.bytes) for p in sorted(partitions[t])]
        prev = {m: {(t, p) for t, ps in previous.get(m, {}).items() if t in topic_ids for p in ps}
                for m in group_members}
        for m, tps in _build(group_members, targets, prev).items():
            out[m] |= tps
    return {m: _as_assignment(tps) for m, tps in out.items()}


def _as_assignment(tps: set[TopicPartition]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def desired_counts(members: int, partitions: int) -> list[int]:
    """``desiredAssignmentCount``: ``ceil(x (i+1)) - ceil(x i)`` with x = sharing * P / M, in integers."""
    if partitions == 0:
        return [0] * members
    sharing = -(-members // partitions)
    total = sharing * partitions
    return [-(-total * (i + 1) // members) - -(-total * i // members) for i in range(members)]


def _build(members: list[str], targets: list[TopicPartition],
           previous: dict[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    if not members or not targets:
        return {m: set() for m in members}
    sharing = -(-len(members) // len(targets))
    desired = dict(zip(members, desired_counts(len(members), len(targets)), strict=True))
    wanted = set(targets)
    held = {m: {tp for tp in previous.get(m, ()) if tp in wanted} for m in members}
    holders: dict[TopicPartition, list[str]] = {tp: [] for tp in targets}
    for m in members:
        for tp in sorted(held[m]):
            holders[tp].append(m)
    # over-shared partitions lose members, the overfilled ones first
    for tp in targets:
        extra = len(holders[tp]) - sharing
        if extra <= 0:
            continue
        order = sorted(holders[tp], key=lambda m: len(held[m]) <= desired[m])
        for m in order[:extra]:
            held[m].discard(tp)
            holders[tp].remove(m)
    # overfilled members lose partitions, the most shared ones first
    for m in members:
        surplus = len(held[m]) - desired[m]
        if surplus > 0:
            for tp in sorted(held[m], key=lambda tp: (-len(holders[tp]), tp[0].bytes, tp[1]))[:surplus]:
                held[m].discard(tp)
                holders[tp].remove(m)
    # under-shared partitions go to unfilled members, round-robin
    unfilled = [m for m in members if len(held[m]) < desired[m]]
    i = 0
    for tp in targets:
        if not unfilled:
            break
        tried = 0
        while len(holders[tp]) < sharing and unfilled and tried < len(unfilled):
            i %= len(unfilled)
            m = unfilled[i]
            if tp in held[m]:
                i += 1
                tried += 1
                continue
            held[m].add(tp)
            holders[tp].append(m)
            tried = 0
            if len(held[m]) >= desired[m]:
                unfilled.pop(i)
            else:
                i += 1
    return held
