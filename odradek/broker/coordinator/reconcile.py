"""A member's move from its current assignment to its target: Kafka's ``CurrentAssignmentBuilder``.

Pure: (member's epoch, state, assigned, pending revocation; target and its epoch; the partitions
the member says it owns; who else holds what) -> the member's next epoch, state, assigned and
pending revocation.  A partition is given to a member only when no other member holds it, so no
partition is ever owned by two members: the taker waits in UNRELEASED_PARTITIONS until the giver
reports (in its heartbeat's owned partitions) that it let go.

Kafka 4.2's rules: no epoch + 1 when leaving UNREVOKED_PARTITIONS (KAFKA-19974).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from ...protocol.lean_dataclass import dataclass
from .consumer_group import MemberState

Assignment = dict[uuid.UUID, frozenset[int]]


class FencedMember(Exception):
    """The member's state cannot be reconciled (UNKNOWN state with owned partitions): FENCED_MEMBER_EPOCH."""


@dataclass(frozen=True)
class Reconciled:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


def _norm(a: Assignment) -> Assignment:
    return {t: ps for t, ps in a.items() if ps}


def _holds_any(owned: Assignment | None, wanted: Assignment) -> bool:
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in wanted.items())


def reconcile(epoch: int, previous_epoch: int, state: int, assigned: Assignment, pending: Assignment,
              target: Assignment, target_epoch: int, owned: Assignment | None,
              held_by_other: Callable[[uuid.UUID, int], bool]) -> Reconciled:
    """The member after this heartbeat (``CurrentAssignmentBuilder.build``)."""
    current = Reconciled(epoch, previous_epoch, state, assigned, pending)
    if state == MemberState.STABLE and epoch == target_epoch:
        return current
    if state == MemberState.UNREVOKED_PARTITIONS and _holds_any(owned, pending):
        return current
    if state == MemberState.UNKNOWN:
        if owned is None or any(owned.values()):
            raise FencedMember
    keep: Assignment = {}
    revoke: Assignment = {}
    want: Assignment = {}
    unreleased = False
    for t in set(assigned) | set(target):
        a = assigned.get(t, frozenset())
        tg = target.get(t, frozenset())
        k = a & tg
        if k:
            keep[t] = k
        if a - k:
            revoke[t] = a - k
        free = frozenset(p for p in tg - k if not held_by_other(t, p))
        if len(free) != len(tg - k):
            unreleased = True
        if free:
            want[t] = free
    if revoke and _holds_any(owned, revoke):
        return Reconciled(epoch, previous_epoch, MemberState.UNREVOKED_PARTITIONS, keep, revoke)
    new_prev = epoch if epoch != target_epoch else previous_epoch
    if want:
        merged = dict(keep)
        for t, ps in want.items():
            merged[t] = merged.get(t, frozenset()) | ps
        return Reconciled(target_epoch, new_prev,
                          MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE, _norm(merged), {})
    return Reconciled(target_epoch, new_prev,
                      MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE, keep, {})
