"""What KIP-848 consumer groups and KIP-932 share groups have in common, and their one replay.

Kafka's ``modern/ModernGroup`` and ``ModernGroupMember``: a group epoch and subscribed topics'
hash, members, a target assignment (its epoch and one target per member) and each member's
current assignment and epochs.  Kafka's ``GroupMetadataManager.replay`` replays the
``ConsumerGroup*`` and ``ShareGroup*`` records with parallel rules; here each group kind gives a
table from its record kinds (key classes) to rules, the shared rules below for the records both
kinds have (``shared_rules``) and its own for the rest, and ``replay_group_record`` runs any of
them.

The rules reach what differs between the kinds through a few methods of the group and member
(``apply_assignment``, ``cancel_timers``, ``_remove_member``, ``_owners_moved``,
``_members_changed``): a consumer group keeps who owns each partition and its static members up
to date; a share group refuses a removal that contradicts its state (``ReplayError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, ClassVar

from ...offsets.consumer_records import Assignment
from ...offsets.records import RecordDecodeError
from ...protocol.lean_dataclass import dataclass


class ReplayError(RecordDecodeError):
    """A group record that contradicts the state (Kafka's IllegalStateException): a load stops."""


@dataclass(eq=False)
class ModernMember:
    """One member: the member record's fields (``meta``), the current assignment's, and its session."""

    member_id: str
    meta: Any = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned: Assignment = field(default_factory=dict)
    # live only
    session_timer: Any = None
    session_deadline_ms: int = 0
    heard_real_ms: int = 0  # real time (``clock.real_ms``) of the last session restart (``spare_active``)

    def owned(self) -> Assignment:
        """What it may still hold (a consumer member also holds what is pending revocation)."""
        return self.assigned

    def apply_assignment(self, value: Any) -> None:
        """The current-assignment record (8, 14): its epochs, state and partitions; a tombstone
        leaves the member at epoch -1 holding nothing."""
        if value is None:
            self.member_epoch = self.previous_member_epoch = -1
            self.assigned = {}
        else:
            self.member_epoch, self.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            self.state, self.assigned = value.state, value.assigned

    def cancel_timers(self) -> None:
        """The member left (its member record's tombstone): nothing of it may fire any more."""
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None


@dataclass(eq=False)
class ModernGroup:
    """A group of either kind as its records build it (``member_class``: the kind's member)."""

    member_class: ClassVar[type[ModernMember]] = ModernMember

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    topics_version: int | None = None  # live: the topics' version its metadata was last checked at
    # live: moves with every record replayed for the group; a member's steady heartbeat checked at
    # one stamp is not trusted at another (``consumer_heartbeat.steady_member``)
    stamp: int = 0

    def member(self, member_id: str) -> Any:
        """The member, created (empty) when the group has none of that id."""
        found = self.members.get(member_id)
        if found is None:
            found = self.members[member_id] = self.member_class(member_id)
        return found

    def _check_removable(self) -> None:
        """Before the group-epoch tombstone removes the group (a share group must be empty)."""

    def _remove_member(self, member: Any) -> None:
        """The member record's tombstone of a member the group has."""
        del self.members[member.member_id]
        member.cancel_timers()

    def _owners_moved(self, member: Any, before: Assignment) -> None:
        """The member held ``before`` and now holds ``member.owned()`` (a consumer group's owners)."""

    def _members_changed(self) -> None:
        """After every member record (a consumer group's static members)."""


Groups = dict[str, Any]
# (the kind's groups, the group, key, value, replay time) -> None
Rule = Callable[[Groups, Any, Any, Any, int], None]


def replay_group_record(group_class: type[ModernGroup], rules: Mapping[type, Rule], groups: Groups,
                        key: Any, value: Any, now: int = 0) -> str | None:
    """Apply one record of a modern group; returns the group id, or None when it was ignored.

    Kafka's ``GroupMetadataManager.replay``: any value creates the group; a tombstone of an
    unknown group (or member) is ignored; the group-epoch tombstone removes the group.  ``rules``
    is the kind's table (record key class -> rule); ``now`` stamps what a rule keeps replay time
    of.  A kind binds its class and table with ``functools.partial`` (no frame of its own on
    the path every record of a rebalance takes).
    """
    group_id = key.group
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return None
        group = groups[group_id] = group_class(group_id)
    group.stamp += 1
    rules[type(key)](groups, group, key, value, now)
    return group_id


# --- the rules of the records both kinds have ---------------------------------------------------

def shared_rules(*, group_epoch: type, member: type, target_epoch: type, target_member: type,
                 assignment: type) -> dict[type, Rule]:
    """The part of a kind's table for the records every modern group has, keyed by its key classes."""
    return {group_epoch: replay_group_epoch, member: replay_member, target_epoch: replay_target_epoch,
            target_member: replay_target_member, assignment: replay_assignment}


def replay_group_epoch(groups: Groups, group: ModernGroup, key: Any, value: Any, now: int) -> None:
    """Records 3 and 11: the group epoch and metadata hash; the tombstone removes the group."""
    if value is None:
        group._check_removable()
        del groups[group.group_id]
    else:
        group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash


def replay_member(groups: Groups, group: ModernGroup, key: Any, value: Any, now: int) -> None:
    """Records 5 and 10: a member's subscription and client facts; the tombstone removes it."""
    if value is not None:
        group.member(key.member).meta = value
    else:
        member = group.members.get(key.member)
        if member is not None:
            group._remove_member(member)
    group._members_changed()


def replay_target_epoch(groups: Groups, group: ModernGroup, key: Any, value: Any, now: int) -> None:
    """Records 6 and 12: the target assignment's epoch (-1 once gone)."""
    group.assignment_epoch = -1 if value is None else value.assignment_epoch


def replay_target_member(groups: Groups, group: ModernGroup, key: Any, value: Any, now: int) -> None:
    """Records 7 and 13: one member's target assignment."""
    if value is None:
        group.targets.pop(key.member, None)
    else:
        group.targets[key.member] = value.partitions


def replay_assignment(groups: Groups, group: ModernGroup, key: Any, value: Any, now: int) -> None:
    """Records 8 and 14: one member's current assignment and epochs (a tombstone of an unknown
    member is ignored)."""
    if value is None:
        member = group.members.get(key.member)
        if member is None:
            return
    else:
        member = group.member(key.member)
    before = member.owned()
    member.apply_assignment(value)
    group._owners_moved(member, before)
