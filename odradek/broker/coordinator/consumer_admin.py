"""Admin views of KIP-848 consumer groups: ConsumerGroupDescribe (Kafka's
``GroupMetadataManager.consumerGroupDescribe`` / ``ConsumerGroup.asDescribedGroup``)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .consumer_group import DEAD, ConsumerGroup

if TYPE_CHECKING:
    from .shards import GroupShards

# no authorizer: every operation a group supports (READ=3, DELETE=6, DESCRIBE=8) as a bit field
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_OMITTED = -2147483648
CONSUMER_MEMBER = 1  # MemberType of a consumer-protocol member (v1, KIP-1099)


def describe_consumer_groups(coordinator: GroupShards, group_ids: list[str], with_ops: bool) -> list[dict]:
    return [_describe_one(coordinator, g, with_ops) for g in group_ids]


def _error(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": DEAD,
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": _OMITTED}


def _describe_one(coordinator: GroupShards, group_id: str, with_ops: bool) -> dict:
    if not coordinator.config.consumer_protocol:
        return _error(group_id, ErrorCode.UNSUPPORTED_VERSION)
    if group_id == "":
        return _error(group_id, ErrorCode.INVALID_GROUP_ID)
    shard, error = coordinator.check(group_id, allow_empty=False)
    if error is not ErrorCode.NONE:
        return _error(group_id, error)
    group = shard.consumer_groups.get(group_id)
    if group is None:
        if shard.group(group_id) is not None:
            return _error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return _error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    names = {t.topic_id: t.topic_name for t in group.subscription_metadata.values()}
    return {
        "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id, "group_state": group.state,
        "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
        "assignor_name": assignor_name(group, coordinator.config.consumer_assignors),
        "members": [_member(group, m, names) for m in group.members.values()],
        "authorized_operations": _GROUP_OPERATIONS if with_ops else _OMITTED,
    }


def assignor_name(group: ConsumerGroup, assignors: tuple[str, ...]) -> str:
    return group.assignor_votes() or assignors[0]


def _member(group: ConsumerGroup, m, names: dict[uuid.UUID, str]) -> dict:
    meta = m.meta
    return {
        "member_id": m.member_id, "instance_id": meta.instance_id, "rack_id": meta.rack_id,
        "member_epoch": m.member_epoch, "client_id": meta.client_id, "client_host": meta.client_host,
        "subscribed_topic_names": list(meta.subscribed_topic_names),
        "subscribed_topic_regex": meta.subscribed_topic_regex or None,
        "assignment": _assignment(m.assigned, names),
        "target_assignment": _assignment(group.targets.get(m.member_id, {}), names),
        "member_type": CONSUMER_MEMBER,
    }


def _assignment(assignment: dict, names: dict[uuid.UUID, str]) -> dict:
    return {"topic_partitions": [{"topic_id": t, "topic_name": names[t], "partitions": sorted(ps)}
                                 for t, ps in sorted(assignment.items(), key=lambda i: i[0].bytes)
                                 if t in names and ps]}
