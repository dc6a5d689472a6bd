"""Admin views and deletion of KIP-932 share groups: ShareGroupDescribe (Kafka's
``GroupMetadataManager.shareGroupDescribe`` / ``ShareGroup.asDescribedGroup``) and DeleteGroups on
a share group (``GroupCoordinatorService.deleteGroups`` with its share-state step).

Deleting a share group deletes its share-partitions' durable state too, in Kafka's order: the
group must be Empty (NON_EMPTY_GROUP); every topic it initialized (or was initializing, or was
already deleting) moves to *deleting* (record 15); the share coordinator deletes each
share-partition's state (a ShareSnapshot tombstone); only then the group's tombstones are written.
If the share coordinator fails, the group stays (its topics marked deleting) and the error is the
group's answer.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import structlog

from ...offsets.share_group_records import (
    SGAssignmentKey,
    SGMemberKey,
    SGMetadataKey,
    SGStatePartitionKey,
    SGStatePartitionValue,
    SGTargetMemberKey,
    SGTargetMetadataKey,
)
from ...protocol.errors import ErrorCode
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, ShardStatus
from . import share_assignor
from .shard import Shard
from .share_group import ShareGroup

if TYPE_CHECKING:
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")

# no authorizer: every operation a group supports (READ=3, DELETE=6, DESCRIBE=8) as a bit field
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_OMITTED = -2147483648


def described_error(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    """A DescribedGroup carrying only an error (Kafka leaves the rest at the defaults)."""
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": _OMITTED}


def describe_share_groups(coordinator: GroupShards, group_ids: list[str], with_ops: bool) -> list[dict]:
    return [_describe_one(coordinator, g, with_ops) for g in group_ids]


def find_share_group(shard: Shard, group_id: str) -> tuple[ShareGroup | None, str]:
    """``shareGroup(groupId)``: the group, or None and GroupIdNotFoundException's message."""
    group = shard.share_groups.get(group_id)
    if group is not None:
        return group, ""
    if group_id in shard.consumer_groups or shard.group(group_id) is not None:
        return None, f"Group {group_id} is not a share group."
    return None, f"Group {group_id} not found."


def _describe_one(coordinator: GroupShards, group_id: str, with_ops: bool) -> dict:
    if group_id == "":
        return described_error(group_id, ErrorCode.INVALID_GROUP_ID)
    shard, error = coordinator.check(group_id, allow_empty=False)
    if error is not ErrorCode.NONE:
        return described_error(group_id, error)
    group, message = find_share_group(shard, group_id)
    if group is None:
        return described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message)
    names = topic_names(shard, group)
    return {
        "error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id, "group_state": group.state,
        "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
        "assignor_name": share_assignor.NAME,
        "members": [{
            "member_id": m.member_id, "rack_id": m.meta.rack_id, "member_epoch": m.member_epoch,
            "client_id": m.meta.client_id, "client_host": m.meta.client_host,
            "subscribed_topic_names": list(m.meta.subscribed_topic_names),
            "assignment": {"topic_partitions": [
                {"topic_id": t, "topic_name": names[t], "partitions": sorted(ps)}
                for t, ps in sorted(m.assigned.items(), key=lambda i: i[0].bytes) if t in names and ps]},
        } for m in group.members.values()],
        "authorized_operations": _GROUP_OPERATIONS if with_ops else _OMITTED,
    }


def topic_names(shard: Shard, group: ShareGroup) -> dict[uuid.UUID, str]:
    """Topic id -> name for what the group's members may hold: topics that exist now (Kafka reads
    its metadata image; a deleted topic drops out of the answer)."""
    out = {}
    for name in group.subscribed_topics() | {i.topic_name for i in group.initialized.values()}:
        found = shard.topics.lookup(name)
        if found is not None:
            out[found[0]] = name
    return out


# --- DeleteGroups ----------------------------------------------------------------------------


def delete_share_group(coordinator: GroupShards, shard: Shard, group: ShareGroup) -> tuple[ErrorCode, Promise | None]:
    """DeleteGroups on a share group: a promise of None (deleted) or the group's error code."""
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, None
    gid = group.group_id
    partitions = _state_partitions(shard, group)
    answer = Promise()
    deleting = SGStatePartitionValue({}, {}, {tid: name for tid, (name, _n) in partitions.items()})
    marked = shard.run(CoordinatorResult([(SGStatePartitionKey(gid), deleting)], None), replay_now=True)

    def delete_state(error: ErrorCode | None) -> None:
        if error is not None:
            answer.set(error)
            return
        persister = coordinator.share_persister
        idents = [(gid, tid, p) for tid, (_name, ps) in partitions.items() for p in sorted(ps)]
        if persister is None or not idents:
            _tombstones(shard, gid, answer)
            return
        outcomes: list[ErrorCode] = []

        def done(err: ErrorCode) -> None:
            outcomes.append(err)
            if len(outcomes) == len(idents):
                failed = [e for e in outcomes if e is not ErrorCode.NONE]
                if failed:
                    log.warning("share_group.delete_state_failed", group=gid, error=failed[0].name)
                    answer.set(failed[0])
                else:
                    _tombstones(shard, gid, answer)
        for ident in idents:
            persister.delete(ident).add_done_callback(done)

    marked.add_done_callback(delete_state)
    return ErrorCode.NONE, answer


def _state_partitions(shard: Shard, group: ShareGroup) -> dict[uuid.UUID, tuple[str, set[int]]]:
    """Every share-partition the group may have state for: initialized, initializing, and those of
    topics already marked deleting (their partitions from the topic as it is now)."""
    out: dict[uuid.UUID, tuple[str, set[int]]] = {}
    for infos in (group.initialized, group.initializing):
        for tid, info in infos.items():
            out.setdefault(tid, (info.topic_name, set()))[1].update(info.partitions)
    for tid, name in group.deleting.items():
        found = shard.topics.lookup(name)
        parts = set(range(found[1])) if found is not None and found[0] == tid else set()
        out.setdefault(tid, (name, set()))[1].update(parts)
    return out


def _tombstones(shard: Shard, group_id: str, answer: Promise) -> None:
    """The group's tombstones (``ShareGroup.createGroupTombstoneRecords``), once its state is gone;
    NON_EMPTY_GROUP if a member joined meanwhile."""
    group = shard.share_groups.get(group_id)
    if group is None:
        answer.set(None)
        return
    if group.members:
        answer.set(ErrorCode.NON_EMPTY_GROUP)
        return
    members = sorted(group.members)
    records = ([(SGAssignmentKey(group_id, m), None) for m in members]
               + [(SGTargetMemberKey(group_id, m), None) for m in sorted(group.targets)]
               + [(SGTargetMetadataKey(group_id), None)]
               + [(SGMemberKey(group_id, m), None) for m in members]
               + [(SGStatePartitionKey(group_id), None), (SGMetadataKey(group_id), None)])
    log.info("group.deleted", group=group_id, kind="share")
    shard.run(CoordinatorResult(records, None), replay_now=True).add_done_callback(answer.set)


# --- deleted topics (``GroupMetadataManager.maybeCleanupShareGroupState``) -----------------------


def forget_deleted_topics(coordinator: GroupShards, names: set[str]) -> list[Promise]:
    """DeleteTopics: every share group forgets the deleted topics' share-partitions (record 15
    without them, one batch per shard) and the share coordinator deletes their state, so a topic
    re-created under the same name is initialized afresh and no orphan state is kept."""
    promises = []
    for shard in coordinator.shards:
        if shard.status is not ShardStatus.ACTIVE or not shard.share_groups:
            continue
        records, idents = [], []
        for group in shard.share_groups.values():
            value, gone = _without_topics(group, names)
            if gone:
                records.append((SGStatePartitionKey(group.group_id), value))
                idents += [(group.group_id, tid, p) for tid, ps in gone.items() for p in sorted(ps)]
        if not records:
            continue
        log.info("share_group.topics_deleted", partition=shard.partition, topics=sorted(names), groups=len(records))
        promises.append(shard.run(CoordinatorResult(records, None), replay_now=True))
        persister = coordinator.share_persister
        if persister is not None:
            for ident in idents:
                persister.delete(ident)
    return promises


def _without_topics(group: ShareGroup, names: set[str]) -> tuple[SGStatePartitionValue, dict[uuid.UUID, set[int]]]:
    """Record 15 without the named topics, and the share-partitions that had (or may have) state."""
    value = SGStatePartitionValue(dict(group.initializing), dict(group.initialized), dict(group.deleting))
    gone: dict[uuid.UUID, set[int]] = {}
    for infos in (value.initializing, value.initialized):
        for tid in [t for t, info in infos.items() if info.topic_name in names]:
            gone.setdefault(tid, set()).update(infos.pop(tid).partitions)
    for tid in [t for t, name in value.deleting.items() if name in names]:
        del value.deleting[tid]
        gone.setdefault(tid, set())
    return value, gone
