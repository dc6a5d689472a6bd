"""KIP-848 consumer groups: the live model and its part of the shard's one ``replay``.

Kafka's ``modern/consumer/ConsumerGroup`` and ``ConsumerGroupMember``, and the consumer-group
branches of ``GroupMetadataManager.replay``.  Everything here is rebuilt from the records of
``offsets/consumer_records.py``: group epoch (3), subscription metadata (4), members (5), target
assignment epoch (6) and members (7), current assignments (8), resolved regexes (16).  Only the
timers (session, rebalance) are live state, re-armed after a load (``consumer_heartbeat``).

Derived after every record: the partition owners (who holds each partition, assigned or pending
revocation), the static map (instance id -> member id) and the group state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import field
from enum import IntEnum
from functools import partial
from typing import Any, ClassVar

from ...offsets.consumer_records import (
    Assignment,
    CGAssignmentKey,
    CGAssignmentValue,
    CGMemberKey,
    CGMemberValue,
    CGMetadataKey,
    CGPartitionMetadataKey,
    CGRegexKey,
    CGRegexValue,
    CGTargetMemberKey,
    CGTargetMetadataKey,
    TopicMetadata,
)
from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from .modern_group import Groups, ModernGroup, ModernMember, Rule, replay_group_record, shared_rules


class MemberState(IntEnum):
    """``modern/MemberState``: the int8 of the current-assignment record."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


# group states as sent on the wire (ConsumerGroupDescribe, ListGroups)
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
CONSUMER_STATES = (EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD)


@dataclass
class TopicsView:
    """What the coordinator knows of topics (the data plane's, wired by the broker):
    name -> (id, partition count), every topic name, and a counter that moves on every
    create, delete or partition-count change (groups then refresh their metadata)."""

    lookup: Callable[[str], tuple[uuid.UUID, int] | None] = lambda _name: None
    names: Callable[[], list[str]] = list
    version: Callable[[], int] = lambda: 0


class Refused(Exception):
    """A heartbeat answered with an error (and no records)."""

    def __init__(self, error: ErrorCode, message: str | None = None):
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(eq=False, slots=True)
class ConsumerMember(ModernMember):
    """One member: the member record's fields, the current assignment's, and its live timers."""

    meta: CGMemberValue = field(default_factory=CGMemberValue)
    state: int = MemberState.STABLE
    pending_revocation: Assignment = field(default_factory=dict)
    # live only
    session_timer_ms: int = 0  # when the armed session timer fires (a shorter group config re-arms it)
    rebalance_timer: Any = None
    join_timer: Any = None  # classic members: rejoin within the rebalance timeout after a 27
    sync_timer: Any = None  # classic members: SyncGroup within the rebalance timeout after a join
    steady: Any = None  # its steady heartbeat, checked once (``consumer_heartbeat.Steady``)

    @property
    def classic(self) -> Any:
        """The JoinGroup session timeout and protocols of a classic-protocol member (None: a
        consumer-protocol member): ``ConsumerGroupMember.useClassicProtocol``."""
        return self.meta.classic_member_metadata

    @property
    def instance_id(self) -> str | None:
        return self.meta.instance_id

    def owned(self) -> Assignment:
        """What it may still hold: assigned plus pending revocation."""
        out = dict(self.assigned)
        for t, ps in self.pending_revocation.items():
            out[t] = out.get(t, frozenset()) | ps
        return out

    def apply_assignment(self, value: CGAssignmentValue | None) -> None:
        """Also the partitions pending revocation; a tombstone leaves it STABLE, a state this
        broker does not know is UNKNOWN."""
        ModernMember.apply_assignment(self, value)  # no zero-argument super() in a slotted dataclass
        if value is None:
            self.state, self.pending_revocation = MemberState.STABLE, {}
        else:
            if self.state not in MemberState._value2member_map_:
                self.state = MemberState.UNKNOWN
            self.pending_revocation = value.pending_revocation

    def cancel_timers(self) -> None:
        for timer in (self.session_timer, self.rebalance_timer):
            if timer is not None:
                timer.cancel()


@dataclass(eq=False)
class ConsumerGroup(ModernGroup):
    member_class: ClassVar[type[ModernMember]] = ConsumerMember

    members: dict[str, ConsumerMember] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    regexes: dict[str, CGRegexValue] = field(default_factory=dict)
    # derived
    static_members: dict[str, str] = field(default_factory=dict)
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """``ConsumerGroup.maybeUpdateGroupState``."""
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.state != MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return RECONCILING
        return STABLE

    def subscribed_topics(self) -> set[str]:
        """Every topic name some member subscribes to, by name or through a resolved regex."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.meta.subscribed_topic_names)
            regex = m.meta.subscribed_topic_regex
            if regex:
                resolved = self.regexes.get(regex)
                if resolved is not None:
                    names.update(resolved.topics)
        return names

    def assignor_votes(self) -> str | None:
        """The server assignor most members name (ties: the first named), else None."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.meta.server_assignor:
                votes[m.meta.server_assignor] = votes.get(m.meta.server_assignor, 0) + 1
        return max(votes, key=lambda k: votes[k]) if votes else None

    def _owners_moved(self, member: ConsumerMember, before: Assignment) -> None:
        """The partitions ``before`` it held lose it as owner; those it holds now have it."""
        for t, ps in before.items():
            for p in ps:
                if self.owners.get((t, p)) == member.member_id:
                    del self.owners[(t, p)]
        for t, ps in member.owned().items():
            for p in ps:
                self.owners[(t, p)] = member.member_id

    def _remove_member(self, member: ConsumerMember) -> None:
        """It also stops owning what it held."""
        super()._remove_member(member)
        self._owners_moved(ConsumerMember(member.member_id), member.owned())

    def _members_changed(self) -> None:
        self.static_members = {m.meta.instance_id: m.member_id for m in self.members.values()
                               if m.meta.instance_id is not None}


def _replay_subscription_metadata(groups: Groups, group: ConsumerGroup, key: CGPartitionMetadataKey,
                                  value: Any, now: int) -> None:
    """Record 4: the subscribed topics' metadata (Kafka 4.0)."""
    group.subscription_metadata = {} if value is None else dict(value.topics)


def _replay_regex(groups: Groups, group: ConsumerGroup, key: CGRegexKey, value: CGRegexValue | None,
                  now: int) -> None:
    """Record 16: a resolved regular expression."""
    if value is None:
        group.regexes.pop(key.regex, None)
    else:
        group.regexes[key.regex] = value


# record kind -> its rule (``modern_group``): the rules both group kinds share, and its own
_RULES: dict[type, Rule] = {
    **shared_rules(group_epoch=CGMetadataKey, member=CGMemberKey, target_epoch=CGTargetMetadataKey,
                   target_member=CGTargetMemberKey, assignment=CGAssignmentKey),
    CGPartitionMetadataKey: _replay_subscription_metadata, CGRegexKey: _replay_regex,
}


# (groups, key, value) -> the group id, or None when the record was ignored: one consumer-group
# record (types 3-8 and 16) applied (``modern_group.replay_group_record``)
replay_consumer: Callable[[dict[str, ConsumerGroup], Any, Any], str | None] = partial(
    replay_group_record, ConsumerGroup, _RULES)


def subscribed_names(members: dict[str, ConsumerMember], regexes: dict[str, CGRegexValue]) -> set[str]:
    """Every topic name the members subscribe to, by name or through a resolved regex."""
    names: set[str] = set()
    for m in members.values():
        names.update(m.meta.subscribed_topic_names)
        if m.meta.subscribed_topic_regex in regexes:
            names.update(regexes[m.meta.subscribed_topic_regex].topics)
    return names


def subscription_metadata(members: dict[str, ConsumerMember], regexes: dict[str, CGRegexValue],
                          topics: TopicsView) -> dict[str, TopicMetadata]:
    """{name: (id, name, partitions)} of the subscribed topics that exist (the others are ignored)."""
    out = {}
    for name in sorted(subscribed_names(members, regexes)):
        found = topics.lookup(name)
        if found is not None:
            out[name] = TopicMetadata(found[0], name, found[1])
    return out


def validate_consumer_commit(group: ConsumerGroup, member_id: str, epoch: int, version: int,
                             transactional: bool = False) -> ErrorCode:
    """``ConsumerGroup.validateOffsetCommit``: an admin commit (epoch < 0) only to a group without
    members; otherwise the member must exist, speak OffsetCommit v9+ (KIP-848 members) and send
    its current epoch (STALE_MEMBER_EPOCH: retry after the next heartbeat; a transactional
    commit's stale epoch is ILLEGAL_GENERATION)."""
    if epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    classic = member.classic is not None  # a classic member commits with its generation (= epoch)
    if not transactional and not classic and version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if transactional or classic else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def persisted(group: ConsumerGroup) -> dict:
    """What the records say of a group (live state == replayed state is checked on this)."""
    return {
        "epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
        "metadata": dict(group.subscription_metadata), "targets": dict(group.targets),
        "regexes": dict(group.regexes),
        "members": {m.member_id: (m.meta, m.member_epoch, m.previous_member_epoch, int(m.state), m.assigned,
                                  m.pending_revocation) for m in group.members.values()},
    }
