"""What the share offset admin APIs ask of the group coordinator, in one place.

Kafka's data path never asks the group coordinator about members (the share-partition
manager serves any member id); only the offset admin APIs do
(``GroupCoordinatorService.describeShareGroupOffsets`` / ``alterShareGroupOffsets`` /
``deleteShareGroupOffsets``): whether the share group exists and is empty, which
share-partitions it has initialized, and -- after an alter or a delete -- record 15
(ShareGroupStatePartitionMetadata) saying which topics are initialized, so the group's
next heartbeat neither re-initializes what was altered nor assigns what was deleted.
"""

from __future__ import annotations

import uuid
from enum import Enum
from typing import TYPE_CHECKING

from ...offsets.share_group_records import SGStatePartitionKey, SGStatePartitionValue, TopicPartitionsInfo
from ...protocol.errors import ErrorCode
from ..coordinator.share_heartbeat import other_kind
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator
    from ..coordinator.share_group import ShareGroup


class ShareGroupStatus(Enum):
    ABSENT = "absent"        # no group of any kind has the id
    EMPTY = "empty"          # a share group without members
    ACTIVE = "active"        # a share group with members
    OTHER_KIND = "other"     # the id belongs to a classic or consumer group


def _group(coordinator: Coordinator | None, group_id: str) -> tuple[ShareGroup | None, ShareGroupStatus | None,
                                                                    ErrorCode]:
    if coordinator is None:
        return None, None, ErrorCode.COORDINATOR_NOT_AVAILABLE
    shard, error = coordinator.check(group_id, allow_empty=False)
    if error is not ErrorCode.NONE or shard is None:
        return None, None, error
    group = shard.share_groups.get(group_id)
    if group is not None:
        return group, ShareGroupStatus.ACTIVE if group.members else ShareGroupStatus.EMPTY, error
    return None, ShareGroupStatus.OTHER_KIND if other_kind(shard, group_id) else ShareGroupStatus.ABSENT, error


def share_group_status(coordinator: Coordinator | None, group_id: str) -> tuple[ShareGroupStatus | None, ErrorCode]:
    """The share group's status, or None and the coordinator's error (loading, not active, bad id)."""
    _g, status, error = _group(coordinator, group_id)
    return status, error


def initialized_partitions(coordinator: Coordinator | None, group_id: str) -> dict[uuid.UUID, set[int]] | None:
    """The share-partitions the group has initialized (record 15), None when it is no share group."""
    group, _status, _error = _group(coordinator, group_id)
    if group is None:
        return None
    return {tid: set(info.partitions) for tid, info in group.initialized.items()}


def record_initialized(coordinator: Coordinator | None, group_id: str, topic_id: uuid.UUID, topic: str,
                       partitions: set[int], *, initialized: bool) -> Promise:
    """Record 15 with ``partitions`` of the topic added to *initialized* (an alter) or the topic
    removed from it (a delete).  An alter on an absent group creates it: Kafka's
    ``GroupMetadataManager.alterShareGroupOffsets`` gets or creates the share group, and the
    replay of its record 15 persists it (an empty share group at epoch 0)."""
    group, status, _error = _group(coordinator, group_id)
    if group is None and not (initialized and status is ShareGroupStatus.ABSENT):
        return Promise.resolved(ErrorCode.NONE)
    before = (group.partitions if group is not None else None) or SGStatePartitionValue()
    value = SGStatePartitionValue(dict(before.initializing), dict(before.initialized), dict(before.deleting))
    if initialized:
        have = value.initialized.get(topic_id)
        parts = frozenset(partitions) | (have.partitions if have is not None else frozenset())
        value.initialized[topic_id] = TopicPartitionsInfo(topic, parts)
    else:
        value.initialized.pop(topic_id, None)
        value.initializing.pop(topic_id, None)
    shard = coordinator.shard_for(group_id)
    return shard.run(CoordinatorResult([(SGStatePartitionKey(group_id), value)], ErrorCode.NONE))
