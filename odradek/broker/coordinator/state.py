"""Classic group states and the one table of allowed transitions (as in Kafka).

Anything not in the table is a bug in the coordinator and raises.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_ALL = frozenset(GroupState)

# short names for the coordinator modules' state checks
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY
DEAD = GroupState.DEAD

# target state -> states it may be entered from
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: _ALL,
}


class IllegalStateTransition(RuntimeError):
    """A transition outside ``VALID_PREVIOUS``: a coordinator bug, never a client error."""


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(f"group {group_id!r}: {current.value} -> {target.value}")


_JAVA_TRIM = "".join(chr(c) for c in range(0x21))  # String.trim: code points <= U+0020


def parse_state_filter(names: list[str], mode: str = "lower-trim") -> set[GroupState]:
    """ListGroups v4+ states_filter, as Kafka's coordinator of the time read it.

    ``lower-trim`` (Kafka 4's GroupMetadataManager.listGroups, the default):
    each name lower-cased then trimmed (Java's ``String.trim``); ``lower``
    (3.9's Scala GroupCoordinator.handleListGroups): lower-cased only;
    ``exact`` (2.6 to 3.5): the state's name as Kafka spells it.  Unknown
    names match nothing, so a filter of only unknown names lists no group.
    """
    if mode == "exact":
        by_name = {s.value: s for s in GroupState}
        wanted = set(names)
    else:
        by_name = {s.value.lower(): s for s in GroupState}
        wanted = {n.lower() for n in names}
        if mode == "lower-trim":
            wanted = {n.strip(_JAVA_TRIM) for n in wanted}
    return {by_name[n] for n in wanted if n in by_name}
