"""DescribeGroups, ListGroups and DeleteGroups (Kafka's ``GroupCoordinator.handleDescribeGroup``, ``handleListGroups``, ``handleDeleteGroups``).

Read-only views of the live groups for admin tools, and deletion of Empty
groups: the group goes Dead and leaves the cache at once (so nothing can join
it meanwhile), and its offset tombstones plus the group tombstone are written
as one batch before the answer goes out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from ...offsets.records import GroupKey, OffsetKey
from ...protocol.errors import ErrorCode
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, ShardStatus
from .api import GroupDescription, GroupOverview, MemberDescription
from .consumer_admin import delete_consumer_group
from .consumer_group import CONSUMER_STATES
from .group import ClassicGroup
from .shard import Record, Shard
from .share_admin import delete_share_group
from .share_group import PROTOCOL_TYPE as SHARE_GROUP_TYPE
from .share_group import SHARE_STATES
from .state import _JAVA_TRIM, GroupState, parse_state_filter

if TYPE_CHECKING:
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")

CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"


def consumer_state_filter(names: list[str]) -> set[str]:
    """A ListGroups states filter read for consumer groups: lower-cased and trimmed (Kafka 4)."""
    wanted = {n.lower().strip(_JAVA_TRIM) for n in names}
    return {s for s in CONSUMER_STATES if s.lower() in wanted}


# --- DescribeGroups ---------------------------------------------------------------------


def describe_groups(coordinator: GroupShards, group_ids: list[str]) -> list[GroupDescription]:
    return [describe_group(coordinator, group_id) for group_id in group_ids]


def describe_group(coordinator: GroupShards, group_id: str) -> GroupDescription:
    """Kafka's ``GroupMetadata.summary``: metadata and assignments only when Stable."""
    shard, error = coordinator.check(group_id, allow_empty=True)
    if error is not ErrorCode.NONE:
        return GroupDescription(error, group_id, "", "", "")
    group = shard.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:  # a consumer group too (KIP-1043: v6 answers 69)
        return GroupDescription(ErrorCode.NONE, group_id, GroupState.DEAD.value, "", "")
    stable = group.state is GroupState.STABLE
    members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata(group.protocol_name) if stable else b"",
                                 m.assignment if stable else b"")
               for m in group.members.values()]
    return GroupDescription(ErrorCode.NONE, group_id, group.state.value, group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", members)


# --- ListGroups -------------------------------------------------------------------------


def list_groups(coordinator: GroupShards, states: list[str] | None = None,
                types: list[str] | None = None) -> tuple[ErrorCode, list[GroupOverview]]:
    """Every live group (simple ones too), filtered; error 14 while any shard still loads.

    As Kafka's GroupMetadataManager.listGroups: an empty filter does not
    filter; both filters must match.  Type names are lower-cased (not trimmed)
    and parsed to classic/consumer/share, anything else is an unknown type that
    matches no group.  KIP-848 groups list as type and protocol type ``consumer``
    with their own state names (Assigning, Reconciling).
    """
    wanted_states = parse_state_filter(states, coordinator.config.state_filter_mode) if states else None
    wanted_types = {t.lower() for t in types} if types else None
    out = []
    if wanted_types is None or CONSUMER_GROUP_TYPE in wanted_types:
        consumer_states = consumer_state_filter(states) if states else None
        for shard in coordinator.shards:
            for cg in shard.consumer_groups.values():
                if consumer_states is None or cg.state in consumer_states:
                    out.append(GroupOverview(cg.group_id, "consumer", cg.state, CONSUMER_GROUP_TYPE))
    if wanted_types is None or SHARE_GROUP_TYPE in wanted_types:
        share_states = {s for s in SHARE_STATES if s.lower() in {n.lower().strip(_JAVA_TRIM) for n in states}} \
            if states else None
        for shard in coordinator.shards:
            for sg in shard.share_groups.values():
                if share_states is None or sg.state in share_states:
                    out.append(GroupOverview(sg.group_id, SHARE_GROUP_TYPE, sg.state, SHARE_GROUP_TYPE))
    if wanted_types is not None and CLASSIC_GROUP_TYPE not in wanted_types:
        return _loading_error(coordinator), out
    for shard in coordinator.shards:
        for group in shard.groups.values():
            if group.state is GroupState.DEAD:
                continue
            if wanted_states is not None and group.state not in wanted_states:
                continue
            out.append(GroupOverview(group.group_id, group.protocol_type or "", group.state.value))
    return _loading_error(coordinator), out


def _loading_error(coordinator: GroupShards) -> ErrorCode:
    if any(s.status is ShardStatus.LOADING for s in coordinator.shards):
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return ErrorCode.NONE


# --- DeleteGroups -----------------------------------------------------------------------


def delete_groups(coordinator: GroupShards, group_ids: list[str]) -> Promise:
    """A Promise of {group id: error}, duplicates collapsed, once every batch is durable."""
    results: dict[str, ErrorCode] = {}
    writes: list[tuple[str, Promise]] = []
    for group_id in dict.fromkeys(group_ids):
        error, write = _delete_one(coordinator, group_id)
        results[group_id] = error
        if write is not None:
            writes.append((group_id, write))
    answer = Promise()
    remaining = [len(writes)]

    def finish(group_id: str, error: ErrorCode | None) -> None:
        if error is not None:
            results[group_id] = _DELETE_ERRORS.get(error, error)
        remaining[0] -= 1
        if remaining[0] == 0:
            answer.set(results)

    if not writes:
        answer.set(results)
    for group_id, write in writes:
        write.add_done_callback(lambda error, g=group_id: finish(g, error))
    return answer


_DELETE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.INVALID_RECORD: ErrorCode.UNKNOWN_SERVER_ERROR,  # ours: a record that cannot be encoded
}


def _delete_one(coordinator: GroupShards, group_id: str) -> tuple[ErrorCode, Promise | None]:
    """Tombstones for an Empty group's offsets and record; their replay removes it.

    A group with nothing on the log is live state only, removed at once.
    """
    shard, error = coordinator.check(group_id, allow_empty=True)
    if error is not ErrorCode.NONE:
        return error, None
    if group_id in shard.share_groups:
        return delete_share_group(coordinator, shard, shard.share_groups[group_id])
    if group_id in shard.consumer_groups:
        error, records = delete_consumer_group(shard, shard.consumer_groups[group_id])
        if error is not ErrorCode.NONE:
            return error, None
        log.info("group.deleted", group=group_id, kind="consumer")
        return ErrorCode.NONE, shard.run(CoordinatorResult(records, None), replay_now=True)
    group = shard.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:
        return ErrorCode.GROUP_ID_NOT_FOUND, None
    if group.state is not GroupState.EMPTY:
        return ErrorCode.NON_EMPTY_GROUP, None
    records = _tombstones(shard, group)
    log.info("group.deleted", group=group_id, offsets=len(shard.offsets.get(group_id) or ()))
    if not records:
        shard.remove_group(group_id)
        return ErrorCode.NONE, None
    return ErrorCode.NONE, shard.run(CoordinatorResult(records, None))


def _tombstones(shard: Shard, group: ClassicGroup) -> list[Record]:
    """Every committed offset of the group, and its group record if one can exist (generation > 0).

    Commits written but not yet durable (``log.fsync.mode=always``) count too:
    they precede these tombstones in the log, so a partition left out would be
    replayed after an acknowledged deletion and bring the group back (Kafka's
    ``OffsetMetadataManager.deleteAllOffsets`` reads the uncommitted state too).
    """
    group_id = group.group_id
    partitions = set(shard.offsets.get(group_id) or ()) | shard.pending_offsets(group_id)
    records: list[Record] = [(OffsetKey(group_id, topic, partition), None)
                             for topic, partition in sorted(partitions)]
    if group.generation > 0:
        records.append((GroupKey(group_id), None))
    return records
