"""Admin views of KIP-848 consumer groups: ConsumerGroupDescribe (Kafka's
``GroupMetadataManager.consumerGroupDescribe`` / ``ConsumerGroup.asDescribedGroup``)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from ...offsets.consumer_records import (
    CGAssignmentKey,
    CGMemberKey,
    CGMetadataKey,
    CGPartitionMetadataKey,
    CGRegexKey,
    CGTargetMemberKey,
    CGTargetMetadataKey,
)
from ...offsets.records import OffsetKey
from ...protocol.errors import ErrorCode
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult
from .consumer_group import DEAD, ConsumerGroup
from .shard import Shard

if TYPE_CHECKING:
    from .shards import GroupShards

# no authorizer: every operation a group supports (READ=3, DELETE=6, DESCRIBE=8) as a bit field
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_OMITTED = -2147483648
CONSUMER_MEMBER, CLASSIC_MEMBER = 1, 0  # MemberType (v1, KIP-1099): consumer- or classic-protocol member


def describe_consumer_groups(coordinator: GroupShards, group_ids: list[str], with_ops: bool) -> list[dict]:
    return [_describe_one(coordinator, g, with_ops) for g in group_ids]


def _error(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": DEAD,
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": _OMITTED}


def _describe_one(coordinator: GroupShards, group_id: str, with_ops: bool) -> dict:
    if not coordinator.consumer_protocol_enabled():
        return _error(group_id, ErrorCode.UNSUPPORTED_VERSION)
    if group_id == "":
        return _error(group_id, ErrorCode.INVALID_GROUP_ID)
    shard, error = coordinator.check(group_id, allow_empty=False)
    if error is not ErrorCode.NONE:
        return _error(group_id, error)
    group = shard.consumer_groups.get(group_id)
    if group is None:
        if shard.group(group_id) is not None or group_id in shard.share_groups:
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
        "member_type": CONSUMER_MEMBER if m.classic is None else CLASSIC_MEMBER,
    }


def _assignment(assignment: dict, names: dict[uuid.UUID, str]) -> dict:
    return {"topic_partitions": [{"topic_id": t, "topic_name": names[t], "partitions": sorted(ps)}
                                 for t, ps in sorted(assignment.items(), key=lambda i: i[0].bytes)
                                 if t in names and ps]}


# --- deletion and expiry (``ConsumerGroup.createGroupTombstoneRecords``, ``OffsetMetadataManager``) ---


def group_tombstones(group: ConsumerGroup) -> list:
    """A consumer group's tombstones in the order replay needs: every member's current assignment,
    then targets, the target epoch, members, regexes, subscription metadata, the group epoch."""
    gid = group.group_id
    members = sorted(group.members)
    return ([(CGAssignmentKey(gid, m), None) for m in members]
            + [(CGTargetMemberKey(gid, m), None) for m in members]
            + [(CGTargetMetadataKey(gid), None)]
            + [(CGMemberKey(gid, m), None) for m in members]
            + [(CGRegexKey(gid, r), None) for r in sorted(group.regexes)]
            + [(CGPartitionMetadataKey(gid), None), (CGMetadataKey(gid), None)])


def delete_consumer_group(shard: Shard, group: ConsumerGroup) -> tuple[ErrorCode, list]:
    """DeleteGroups on a consumer group: NON_EMPTY_GROUP with members, else offset and group tombstones."""
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, []
    gid = group.group_id
    partitions = set(shard.offsets.get(gid) or ()) | shard.pending_offsets(gid)
    records = [(OffsetKey(gid, t, p), None) for t, p in sorted(partitions)]
    return ErrorCode.NONE, records + group_tombstones(group)


def expire_consumer_offsets(shard: Shard, now_ms: int, retention_ms: int) -> tuple[int, int, int]:
    """KIP-211 for consumer groups (``OffsetMetadataManager.cleanupExpiredOffsets``): an offset of a
    topic the group does not subscribe to expires ``offsets.retention.minutes`` after its commit
    (or at its own expire timestamp), whatever the group's state; an Empty group left without
    offsets is removed in the same batch.  Returns (groups, offsets expired, groups removed)."""
    records: list = []
    expired = removed = 0
    for gid, group in list(shard.consumer_groups.items()):
        subscribed = group.subscribed_topics()
        offsets = shard.offsets.get(gid) or {}
        pending = shard.pending_offsets(gid)
        gone = [tp for tp, v in offsets.items() if tp[0] not in subscribed and tp not in pending
                and now_ms >= (v.expire_timestamp if v.expire_timestamp != -1 else v.commit_timestamp + retention_ms)]
        records.extend((OffsetKey(gid, t, p), None) for t, p in sorted(gone))
        expired += len(gone)
        if not group.members and len(gone) == len(offsets) and not pending and gid not in shard.txn.groups:
            records.extend(group_tombstones(group))
            removed += 1
    if records:
        shard.run(CoordinatorResult(records, None), replay_now=True)
    return len(shard.consumer_groups), expired, removed


def offset_delete_refusals(group: ConsumerGroup, topics: list[str]) -> set[str]:
    """OffsetDelete: the topics a consumer group subscribes to (by name or regex) answer
    GROUP_SUBSCRIBED_TO_TOPIC; the others are deleted whatever the group's state."""
    subscribed = group.subscribed_topics()
    return {t for t in topics if t in subscribed}


def delete_consumer_offsets(shard: Shard, group: ConsumerGroup, topics: list[tuple[str, list[int]]],
                            candidates: list[tuple[str, int]], errors: dict) -> Promise:
    """OffsetDelete on a consumer group (``OffsetMetadataManager.deleteOffsets``): its state is
    never a reason to refuse; partitions of subscribed topics answer GROUP_SUBSCRIBED_TO_TOPIC."""
    refused = offset_delete_refusals(group, [t for t, _p in candidates])
    offsets = shard.offsets.get(group.group_id) or {}
    records = []
    for tp in candidates:
        if tp[0] in refused:
            errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        else:
            errors[tp] = ErrorCode.NONE
            if tp in offsets:
                records.append((OffsetKey(group.group_id, tp[0], tp[1]), None))
    answer = (ErrorCode.NONE, [(name, p, errors[(name, p)]) for name, indexes in topics for p in indexes])
    return shard.run(CoordinatorResult(records, answer, lambda _a, error: (error, [])))
