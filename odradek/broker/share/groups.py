"""What the share data path's admin APIs ask the group coordinator: does the share group exist, is it empty.

Kafka's data path never asks the group coordinator about members (the share-partition
manager serves any member id); only the offset admin APIs do
(``GroupCoordinatorService.alterShareGroupOffsets`` / ``deleteShareGroupOffsets``: absent
-> GROUP_ID_NOT_FOUND, members -> NON_EMPTY_GROUP, a group of another kind ->
GROUP_ID_NOT_FOUND).  This is the one function they go through.

The share-group model lives in the group coordinator's shards (the share-group records
10-15 of ``__consumer_offsets``); the shard keeps its share groups in ``share_groups``
(group id -> a group with ``members``).  A shard without that map knows no share group.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator


class ShareGroupStatus(Enum):
    ABSENT = "absent"        # no group of any kind has the id
    EMPTY = "empty"          # a share group without members
    ACTIVE = "active"        # a share group with members
    OTHER_KIND = "other"     # the id belongs to a classic or consumer group


def share_group_status(coordinator: Coordinator | None, group_id: str) -> tuple[ShareGroupStatus | None, ErrorCode]:
    """The share group's status, or None and the coordinator's error (loading, not active, bad id)."""
    if coordinator is None:
        return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
    shard, error = coordinator.check(group_id, allow_empty=False)
    if error is not ErrorCode.NONE or shard is None:
        return None, error
    share_groups = getattr(shard, "share_groups", None) or {}
    group = share_groups.get(group_id)
    if group is not None:
        return (ShareGroupStatus.ACTIVE if getattr(group, "members", None) else ShareGroupStatus.EMPTY), error
    if shard.group(group_id) is not None or group_id in shard.consumer_groups:
        return ShareGroupStatus.OTHER_KIND, error
    return ShareGroupStatus.ABSENT, error
