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
from collections.abc import Callable
from dataclasses import field
from functools import partial
from typing import Any, ClassVar

from ...offsets.share_group_records import (
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
from .modern_group import (
    Groups,
    ModernGroup,
    ModernMember,
    ReplayError,
    Rule,
    replay_group_record,
    shared_rules,
)

EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
SHARE_STATES = (EMPTY, STABLE, DEAD)
PROTOCOL_TYPE = "share"  # ListGroups' ProtocolType and GroupType of a share group


@dataclass(eq=False)
class ShareMember(ModernMember):
    """One member: the member record's fields, the current assignment's, and its live timer."""

    meta: SGMemberValue = field(default_factory=SGMemberValue)
    previous_member_epoch: int = -1


@dataclass(eq=False)
class ShareGroup(ModernGroup):
    member_class: ClassVar[type[ModernMember]] = ShareMember

    members: dict[str, ShareMember] = field(default_factory=dict)
    # record 15 (None: no such record)
    partitions: SGStatePartitionValue | None = None
    # live: when each initializing topic was stamped (replay time for replayed ones)
    initializing_since: dict[uuid.UUID, int] = field(default_factory=dict)
    partitions_version: int = 0  # live: moves with every record 15 replayed
    # live: (group epoch, partitions version, topics version) at which a plain heartbeat last found
    # nothing to do -- while it holds, the next plain heartbeat at the group's epoch is answered at once
    quiet: tuple[int, int, int] | None = None

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

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

    def _check_removable(self) -> None:
        if self.members or self.targets:
            raise ReplayError(f"share group {self.group_id} removed while it has members")

    def _remove_member(self, member: ShareMember) -> None:
        """Only once its assignments are gone (Kafka's ``replay`` of the member tombstone)."""
        if member.member_epoch != -1 or member.member_id in self.targets:
            raise ReplayError(f"member {member.member_id} of share group {self.group_id} removed before its "
                              "assignments")
        super()._remove_member(member)


def _replay_partitions(groups: Groups, group: ShareGroup, key: SGStatePartitionKey,
                       value: SGStatePartitionValue | None, now: int) -> None:
    """Record 15: which share-partitions are initializing (stamped with ``now``), initialized or
    being deleted."""
    old = group.initializing_since
    group.partitions_version += 1
    group.partitions = value
    group.initializing_since = {} if value is None else {t: old.get(t, now) for t in value.initializing}


# record kind -> its rule (``modern_group``): the rules both group kinds share, and its own
_RULES: dict[type, Rule] = {
    **shared_rules(group_epoch=SGMetadataKey, member=SGMemberKey, target_epoch=SGTargetMetadataKey,
                   target_member=SGTargetMemberKey, assignment=SGAssignmentKey),
    SGStatePartitionKey: _replay_partitions,
}


# (groups, key, value, now) -> the group id, or None when the record was ignored: one share-group
# record (types 10-15) applied (``modern_group.replay_group_record``; ``now``: the replay time
# record 15 stamps)
replay_share: Callable[[dict[str, ShareGroup], Any, Any, int], str | None] = partial(
    replay_group_record, ShareGroup, _RULES)


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
