"""Server-side assignors of KIP-848 consumer groups: pure functions, tested alone.

``assign(members, partitions, previous)`` -> {member id: {topic id: partitions}}, where
``members`` are ``AssignorMember`` (subscribed topic ids, instance id), ``partitions`` is
{topic id: partition count} of the subscribed topics that exist, and ``previous`` the members'
previous target assignments.

- ``uniform`` (Kafka's ``UniformAssignor``, the default): balance first -- every member's count
  within one of every other's among the subscribers of each topic -- then stickiness relative to
  the previous target: a member keeps what it had while balance allows, free partitions go to the
  least loaded subscriber, then partitions move from the most to the least loaded subscriber
  until balanced.  Kafka iterates hash maps, so its exact choices are not reproducible anywhere;
  here members, topics and partitions are iterated sorted, so the result is deterministic.
- ``range`` (Kafka's ``RangeAssignor`` since KAFKA-16944): per topic, subscribers sorted (static
  members by instance id, then dynamic ones by member id) get contiguous ranges, the first
  ``partitions mod subscribers`` one more.  Not sticky, as in Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from odradek.protocol.lean_dataclass import dataclass

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class AssignorMember:
    member_id: str
    topics: frozenset[uuid.UUID]
    instance_id: str | None = None


class AssignorError(Exception):
    """An assignor could not compute an assignment (answered UNKNOWN_SERVER_ERROR)."""


def _tkey(t: uuid.UUID) -> bytes:
    return t.bytes


def uniform(members: list[AssignorMember], partitions: Mapping[uuid.UUID, int],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Balanced, then sticky to ``previous`` (see the module notes)."""
    if members and all(m.topics == members[0].topics for m in members):
        return _uniform_homogeneous(members, partitions, previous)
    return _uniform_heterogeneous(members, partitions, previous)


def _uniform_homogeneous(members: list[AssignorMember], partitions: Mapping[uuid.UUID, int],
                         previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Every member subscribes to the same topics (``UniformHomogeneousAssignmentBuilder``): each gets
    ``total // n`` partitions, ``total % n`` of them one more -- first those whose previous target
    already had more than the minimum -- keeping its previous partitions up to its quota."""
    ordered = sorted(members, key=lambda m: m.member_id)
    topics = sorted((t for t in members[0].topics if t in partitions), key=_tkey)
    index = {t: i for i, t in enumerate(topics)}
    counts = [partitions[t] for t in topics]
    total = sum(counts)
    base, extra = divmod(total, len(ordered))
    taken: set[tuple[int, int]] = set()
    kept: dict[str, list[tuple[int, int]]] = {}
    for m in ordered:
        mine = []
        for t, ps in previous.get(m.member_id, {}).items():
            ti = index.get(t)
            if ti is None:
                continue
            for p in ps:
                tp = (ti, p)
                if p < counts[ti] and tp not in taken:
                    taken.add(tp)
                    mine.append(tp)
        mine.sort()
        kept[m.member_id] = mine
    quota = {m.member_id: base for m in ordered}
    for m in [m for m in ordered if len(kept[m.member_id]) > base] + [m for m in reversed(ordered)
                                                                       if len(kept[m.member_id]) <= base]:
        if extra == 0:
            break
        quota[m.member_id] += 1
        extra -= 1
    free: list[tuple[int, int]] = []
    for m in ordered:
        mine = kept[m.member_id]
        if len(mine) > quota[m.member_id]:
            free.extend(mine[quota[m.member_id]:])
            del mine[quota[m.member_id]:]
    free.extend((ti, p) for ti, n in enumerate(counts) for p in range(n) if (ti, p) not in taken)
    free.sort(reverse=True)
    for m in ordered:
        mine = kept[m.member_id]
        while len(mine) < quota[m.member_id]:
            mine.append(free.pop())
    out = {}
    for m in ordered:
        grouped: dict[uuid.UUID, set[int]] = {}
        for ti, p in kept[m.member_id]:
            grouped.setdefault(topics[ti], set()).add(p)
        out[m.member_id] = {t: frozenset(ps) for t, ps in grouped.items()}
    return out


def _uniform_heterogeneous(members: list[AssignorMember], partitions: Mapping[uuid.UUID, int],
                           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Members subscribe to different topics (``UniformHeterogeneousAssignmentBuilder``)."""
    ordered = sorted(members, key=lambda m: m.member_id)
    held: dict[str, set[tuple[uuid.UUID, int]]] = {m.member_id: set() for m in ordered}
    taken: set[tuple[uuid.UUID, int]] = set()
    # 1. keep the previous target's partitions of topics still subscribed and existing
    for m in ordered:
        for t, ps in previous.get(m.member_id, {}).items():
            if t in m.topics and t in partitions:
                for p in ps:
                    if p < partitions[t] and (t, p) not in taken:
                        held[m.member_id].add((t, p))
                        taken.add((t, p))
    subscribers = {t: [m for m in ordered if t in m.topics] for t in partitions}
    # 2. free partitions, topic by topic (most partitions per subscriber first), to the least loaded
    topics = sorted((t for t in partitions if subscribers[t]),
                    key=lambda t: (-partitions[t] / len(subscribers[t]), len(subscribers[t]), _tkey(t)))
    for t in topics:
        subs = subscribers[t]
        for p in range(partitions[t]):
            if (t, p) not in taken:
                target = min(subs, key=lambda m: len(held[m.member_id]))
                held[target.member_id].add((t, p))
                taken.add((t, p))
    # 3. move partitions from the most to the least loaded subscriber of their topic until balanced
    _balance(topics, subscribers, held)
    return {m.member_id: _as_assignment(held[m.member_id]) for m in ordered}


def _balance(topics: list[uuid.UUID], subscribers: dict[uuid.UUID, list[AssignorMember]],
             held: dict[str, set[tuple[uuid.UUID, int]]]) -> None:
    moved = True
    passes = 0
    while moved and passes < 10_000:
        moved = False
        passes += 1
        for t in topics:
            subs = subscribers[t]
            if len(subs) < 2:
                continue
            most = max(subs, key=lambda m: (len(held[m.member_id]), m.member_id))
            least = min(subs, key=lambda m: (len(held[m.member_id]), m.member_id))
            if len(held[most.member_id]) - len(held[least.member_id]) <= 1:
                continue
            mine = sorted((tp for tp in held[most.member_id] if tp[0] == t), key=lambda tp: -tp[1])
            if not mine:
                continue
            tp = mine[0]
            held[most.member_id].discard(tp)
            held[least.member_id].add(tp)
            moved = True


def _as_assignment(tps: set[tuple[uuid.UUID, int]]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def range_(members: list[AssignorMember], partitions: Mapping[uuid.UUID, int],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Contiguous ranges per topic over the sorted subscribers (see the module notes)."""
    ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m.member_id: {} for m in ordered}
    for t in sorted(partitions, key=_tkey):
        subs = [m for m in ordered if t in m.topics]
        if not subs:
            continue
        n = partitions[t]
        quota, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = quota + (1 if i < extra else 0)
            if count:
                out[m.member_id][t] = frozenset(range(start, start + count))
            start += count
    return out


ASSIGNORS: dict[str, Callable[..., dict[str, Assignment]]] = {"uniform": uniform, "range": range_}
# the class names Kafka also accepts in group.consumer.assignors
CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}
