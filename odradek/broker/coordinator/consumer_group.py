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
from typing import Any

from ...offsets.consumer_records import (
    Assignment,
    CGAssignmentKey,
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
class ConsumerMember:
    """One member: the member record's fields, the current assignment's, and its live timers."""

    member_id: str
    meta: CGMemberValue = field(default_factory=CGMemberValue)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # live only
    session_timer: Any = None
    session_deadline_ms: int = 0
    session_timer_ms: int = 0  # when the armed session timer fires (a shorter group config re-arms it)
    heard_real_ms: int = 0  # real time (``clock.real_ms``) of the last session restart (``spare_active``)
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


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    regexes: dict[str, CGRegexValue] = field(default_factory=dict)
    # derived
    static_members: dict[str, str] = field(default_factory=dict)
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    topics_version: int | None = None  # live: the topics' version its metadata was last checked at
    # live: moves with every record replayed for the group; a member's steady heartbeat checked at
    # one stamp is not trusted at another (``consumer_heartbeat.steady_member``)
    stamp: int = 0

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

    def member(self, member_id: str) -> ConsumerMember:
        found = self.members.get(member_id)
        if found is None:
            found = self.members[member_id] = ConsumerMember(member_id)
        return found

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

    def _set_owned(self, member: ConsumerMember, before: Assignment) -> None:
        for t, ps in before.items():
            for p in ps:
                if self.owners.get((t, p)) == member.member_id:
                    del self.owners[(t, p)]
        for t, ps in member.owned().items():
            for p in ps:
                self.owners[(t, p)] = member.member_id

    def _reindex_static(self) -> None:
        self.static_members = {m.meta.instance_id: m.member_id for m in self.members.values()
                               if m.meta.instance_id is not None}


def replay_consumer(groups: dict[str, ConsumerGroup], key: Any, value: Any) -> str | None:
    """Apply one consumer-group record; returns the group id, or None when the record was ignored.

    Kafka's ``GroupMetadataManager.replay`` for record types 3-8 and 16: any value creates the
    group; a tombstone of an unknown group or member is ignored; the group-epoch tombstone
    removes the group.
    """
    group_id = key.group
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return None
        group = groups[group_id] = ConsumerGroup(group_id)
    group.stamp += 1
    kind = type(key)
    if kind is CGMetadataKey:
        if value is None:
            del groups[group_id]
        else:
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
    elif kind is CGPartitionMetadataKey:
        group.subscription_metadata = {} if value is None else dict(value.topics)
    elif kind is CGMemberKey:
        _replay_member(group, key.member, value)
    elif kind is CGTargetMetadataKey:
        group.assignment_epoch = -1 if value is None else value.assignment_epoch
    elif kind is CGTargetMemberKey:
        if value is None:
            group.targets.pop(key.member, None)
        else:
            group.targets[key.member] = value.partitions
    elif kind is CGAssignmentKey:
        _replay_assignment(group, key.member, value)
    elif kind is CGRegexKey:
        if value is None:
            group.regexes.pop(key.regex, None)
        else:
            group.regexes[key.regex] = value
    return group_id


def _replay_member(group: ConsumerGroup, member_id: str, value: CGMemberValue | None) -> None:
    if value is None:
        member = group.members.pop(member_id, None)
        if member is not None:
            group._set_owned(ConsumerMember(member_id), member.owned())
            for timer in (member.session_timer, member.rebalance_timer):
                if timer is not None:
                    timer.cancel()
    else:
        group.member(member_id).meta = value
    group._reindex_static()


def _replay_assignment(group: ConsumerGroup, member_id: str, value: Any) -> None:
    if value is None:
        member = group.members.get(member_id)
        if member is None:
            return
        before = member.owned()
        member.member_epoch = member.previous_member_epoch = -1
        member.state = MemberState.STABLE
        member.assigned, member.pending_revocation = {}, {}
    else:
        member = group.member(member_id)
        before = member.owned()
        member.member_epoch = value.member_epoch
        member.previous_member_epoch = value.previous_member_epoch
        member.state = value.state if value.state in MemberState._value2member_map_ else MemberState.UNKNOWN
        member.assigned, member.pending_revocation = value.assigned, value.pending_revocation
    group._set_owned(member, before)


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
