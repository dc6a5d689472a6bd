"""KIP-932 share groups: the live model and its part of the shard's one ``replay``.

Kafka's ``modern/share/ShareGroup`` and ``ShareGroupMember`` and the share-group branches of
``GroupMetadataManager.replay``.  Everything here is rebuilt from the records of
``offsets/share_group_records.py``: members (10), group epoch and metadata hash (11), target
assignment epoch (12) and members (13), current assignments (14), and which share-partitions are
initializing, initialized or being deleted (15).  Only the session timers and the time an
``initializing`` topic was stamped are live (a replayed stamp is the replay time, as in Kafka).

A share group is ``Empty`` without members and ``Stable`` with some: there is no revocation
phase, several members may hold one partition, and the data path never asks who holds what.
"""

from __future__ import annotations

import uuid
from dataclasses import field
from typing import Any

from ...offsets.records import RecordDecodeError
from ...offsets.share_group_records import (
    Assignment,
    SGAssignmentKey,
    SGMemberKey,
    SGMemberValue,
    SGMetadataKey,
    SGStatePartitionKey,
    SGStatePartitionValue,
    SGTargetMemberKey,
    SGTargetMetadataKey,
    TopicPartitionsInfo,
)
from ...protocol.lean_dataclass import dataclass

EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
SHARE_STATES = (EMPTY, STABLE, DEAD)
PROTOCOL_TYPE = "share"  # ListGroups' ProtocolType and GroupType of a share group


@dataclass(eq=False)
class ShareMember:
    """One member: the member record's fields, the current assignment's, and its live timer."""

    member_id: str
    meta: SGMemberValue = field(default_factory=SGMemberValue)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = 0
    assigned: Assignment = field(default_factory=dict)
    # live only
    session_timer: Any = None
    session_deadline_ms: int = 0
    heard_real_ms: int = 0  # real time (``clock.real_ms``) of the last session restart (``spare_active``)


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    # record 15 (None: no such record)
    partitions: SGStatePartitionValue | None = None
    # live: when each initializing topic was stamped (replay time for replayed ones)
    initializing_since: dict[uuid.UUID, int] = field(default_factory=dict)
    topics_version: int | None = None  # live: the topics' version its metadata was last checked at
    partitions_version: int = 0  # live: moves with every record 15 replayed
    # live: (group epoch, partitions version, topics version) at which a plain heartbeat last found
    # nothing to do -- while it holds, the next plain heartbeat at the group's epoch is answered at once
    quiet: tuple[int, int, int] | None = None

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def member(self, member_id: str) -> ShareMember:
        found = self.members.get(member_id)
        if found is None:
            found = self.members[member_id] = ShareMember(member_id)
        return found

    def subscribed_topics(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.meta.subscribed_topic_names)
        return names

    @property
    def initializing(self) -> dict[uuid.UUID, TopicPartitionsInfo]:
        return {} if self.partitions is None else self.partitions.initializing

    @property
    def initialized(self) -> dict[uuid.UUID, TopicPartitionsInfo]:
        return {} if self.partitions is None else self.partitions.initialized

    @property
    def deleting(self) -> dict[uuid.UUID, str]:
        return {} if self.partitions is None else self.partitions.deleting


class ReplayError(RecordDecodeError):
    """A share-group record that contradicts the state (Kafka's IllegalStateException): a load stops."""


def replay_share(groups: dict[str, ShareGroup], key: Any, value: Any, now: int) -> str | None:
    """Apply one share-group record; returns the group id, or None when the record was ignored.

    Kafka's ``GroupMetadataManager.replay`` for record types 10-15: any value creates the group,
    a tombstone of an unknown group or member is ignored, the group-epoch tombstone removes the
    group (which must be empty by then).
    """
    group_id = key.group
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return None
        group = groups[group_id] = ShareGroup(group_id)
    kind = type(key)
    if kind is SGMetadataKey:
        if value is None:
            if group.members or group.targets:
                raise ReplayError(f"share group {group_id} removed while it has members")
            del groups[group_id]
        else:
            group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
    elif kind is SGMemberKey:
        _replay_member(group, key.member, value)
    elif kind is SGTargetMetadataKey:
        group.assignment_epoch = -1 if value is None else value.assignment_epoch
    elif kind is SGTargetMemberKey:
        if value is None:
            group.targets.pop(key.member, None)
        else:
            group.targets[key.member] = value.partitions
    elif kind is SGAssignmentKey:
        _replay_assignment(group, key.member, value)
    elif kind is SGStatePartitionKey:
        _replay_partitions(group, value, now)
    return group_id


def _replay_member(group: ShareGroup, member_id: str, value: SGMemberValue | None) -> None:
    if value is not None:
        group.member(member_id).meta = value
        return
    member = group.members.get(member_id)
    if member is None:
        return
    if member.member_epoch != -1 or member_id in group.targets:
        raise ReplayError(f"member {member_id} of share group {group.group_id} removed before its assignments")
    del group.members[member_id]
    if member.session_timer is not None:
        member.session_timer.cancel()
        member.session_timer = None


def _replay_assignment(group: ShareGroup, member_id: str, value: Any) -> None:
    if value is None:
        member = group.members.get(member_id)
        if member is not None:
            member.member_epoch = member.previous_member_epoch = -1
            member.assigned = {}
        return
    member = group.member(member_id)
    member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
    member.state, member.assigned = value.state, value.assigned


def _replay_partitions(group: ShareGroup, value: SGStatePartitionValue | None, now: int) -> None:
    old = group.initializing_since
    group.partitions_version += 1
    group.partitions = value
    group.initializing_since = {} if value is None else {t: old.get(t, now) for t in value.initializing}


def persisted(group: ShareGroup) -> dict:
    """What the records say of a group (live state == replayed state is checked on this)."""
    p = group.partitions
    return {
        "epoch": group.group_epoch, "hash": group.metadata_hash, "assignment_epoch": group.assignment_epoch,
        "targets": dict(group.targets),
        "partitions": None if p is None else (dict(p.initializing), dict(p.initialized), dict(p.deleting)),
        "members": {m.member_id: (m.meta, m.member_epoch, m.previous_member_epoch, m.state, m.assigned)
                    for m in group.members.values()},
    }
