"""What the console changes, each as the Kafka request a client (or Kafka's own tools) would send.

Every action goes through the broker's handler for that API (``LocalKafka``), so it is checked and
answered exactly as a client's request is -- the same validation, the same ACLs as the console's
principal, the same error codes -- and returns one line for the page: what was done, or Kafka's
error.  Resetting offsets follows ``kafka-consumer-groups --reset-offsets`` (a share group's start
offsets ``kafka-share-groups --reset-offsets``): refused while the group has members, as Kafka's
``ConsumerGroupCommand`` and ``ShareGroupCommand`` refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...protocol.records import encode_batch
from ..kafka_local import LocalKafka
from .reads import (
    EARLIEST,
    LATEST,
    TOPIC_RESOURCE,
    committed,
    error_name,
    group_state,
    list_offsets,
    share_lag,
)

INACTIVE = ("Empty", "Dead")
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations


@dataclass(frozen=True)
class Outcome:
    ok: bool
    text: str


def _outcome(code: int, done: str, message: str | None = None) -> Outcome:
    if code:
        return Outcome(False, f"{error_name(code)}" + (f": {message}" if message else ""))
    return Outcome(True, done)


async def create_topic(kafka: LocalKafka, name: str, partitions: int, configs: dict[str, str]) -> Outcome:
    answer = await kafka.call("CreateTopics", 5, {"timeout_ms": 30000, "validate_only": False, "topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
    t = answer.topics[0]
    return _outcome(t.error_code, f"created topic {name} with {t.num_partitions} partition(s)", t.error_message)


async def delete_topic(kafka: LocalKafka, name: str) -> Outcome:
    answer = await kafka.call("DeleteTopics", 4, {"topic_names": [name], "timeout_ms": 30000})
    return _outcome(answer.responses[0].error_code, f"deleted topic {name}")


async def add_partitions(kafka: LocalKafka, name: str, count: int) -> Outcome:
    answer = await kafka.call("CreatePartitions", 2, {"timeout_ms": 30000, "validate_only": False, "topics": [
        {"name": name, "count": count, "assignments": None}]})
    r = answer.results[0]
    return _outcome(r.error_code, f"{name} now has {count} partitions", r.error_message)


async def delete_records(kafka: LocalKafka, name: str, partition: int, before: int) -> Outcome:
    answer = await kafka.call("DeleteRecords", 1, {"timeout_ms": 30000, "topics": [
        {"name": name, "partitions": [{"partition_index": partition, "offset": before}]}]})
    p = answer.topics[0].partitions[0]
    return _outcome(p.error_code, f"{name}-{partition} now starts at offset {p.low_watermark}")


async def alter_config(kafka: LocalKafka, name: str, key: str, value: str | None) -> Outcome:
    """Set ``key`` to ``value`` on the topic, or back to the default (``value`` None)."""
    answer = await kafka.call("IncrementalAlterConfigs", 1, {"validate_only": False, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": [
            {"name": key, "config_operation": SET if value is not None else DELETE, "value": value}]}]})
    r = answer.responses[0]
    done = f"{key} = {value}" if value is not None else f"{key} back to its default"
    return _outcome(r.error_code, done, r.error_message)


async def produce(kafka: LocalKafka, topic: str, partition: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes]]) -> Outcome:
    batch = encode_batch([(key, value, headers)])
    answer = await kafka.call("Produce", 8, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                                             "topic_data": [{"name": topic, "partition_data": [
                                                 {"index": partition, "records": batch}]}]})
    p = answer.responses[0].partition_responses[0]
    return _outcome(p.error_code, f"written to {topic}-{partition} at offset {p.base_offset}", p.error_message)


async def _partitions(kafka: LocalKafka, topic: str) -> list[int]:
    md = await kafka.call("Metadata", 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return sorted(p.partition_index for t in md.topics if t.error_code == 0 for p in t.partitions)


async def reset_offsets(kafka: LocalKafka, group: str, topic: str | None, to: str,
                        value: int | None = None) -> Outcome:
    """``to``: earliest, latest, timestamp (``value`` ms) or offset (``value``); ``topic`` None: every
    topic the group has committed offsets for (``--all-topics``), or a share group every
    share-partition it has.  A share group's new offsets are its start offsets (AlterShareGroupOffsets)."""
    state, code, kind = await group_state(kafka, group)
    if code:
        return Outcome(False, error_name(code))
    if state not in INACTIVE:
        if kind == "share":  # ShareGroupCommand.resetOffsets
            return Outcome(False, f"Share group '{group}' is not empty.")
        return Outcome(False, f"Assignments can only be reset if the group '{group}' is inactive, "  # ConsumerGroupCommand
                              f"but the current state is {state}.")
    if topic is not None:
        targets = {topic: await _partitions(kafka, topic)}
        if not targets[topic]:
            return Outcome(False, f"UNKNOWN_TOPIC_OR_PARTITION: {topic}")
    else:
        have, error = await (_share_partitions if kind == "share" else committed)(kafka, group)
        if error:
            return Outcome(False, error)
        targets = {}
        for t, p in sorted(have):
            targets.setdefault(t, []).append(p)
    if not targets:
        return Outcome(False, "the group has no committed offsets; name a topic")
    new: dict[str, dict[int, int]] = {}
    for t, parts in targets.items():
        new[t] = await _targets(kafka, t, parts, to, value)
    errors = await (_alter_start_offsets if kind == "share" else _commit)(kafka, group, new)
    if errors:
        return Outcome(False, ", ".join(sorted(errors)))
    shown = ", ".join(f"{t}-{p}: {o}" for t, offsets in sorted(new.items()) for p, o in sorted(offsets.items()))
    return Outcome(True, f"offsets of {group} reset to {shown}")


async def _share_partitions(kafka: LocalKafka, group: str) -> tuple[dict[tuple[str, int], int], str | None]:
    """The share-partitions the share group has (DescribeShareGroupOffsets, as ``listShareGroupOffsets``)."""
    table = await share_lag(kafka, group)
    return {(r["topic"], r["partition"]): r["committed"] for r in table["rows"]}, table["error"]


async def _commit(kafka: LocalKafka, group: str, new: dict[str, dict[int, int]]) -> set[str]:
    answer = await kafka.call("OffsetCommit", 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": o,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}
                                               for p, o in sorted(offsets.items())]}
                   for t, offsets in sorted(new.items())]})
    return {error_name(p.error_code) for t in answer.topics for p in t.partitions if p.error_code}


async def _alter_start_offsets(kafka: LocalKafka, group: str, new: dict[str, dict[int, int]]) -> set[str]:
    answer = await kafka.call("AlterShareGroupOffsets", 0, {"group_id": group, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in sorted(offsets.items())]}
        for t, offsets in sorted(new.items())]})
    if answer.error_code:
        return {error_name(answer.error_code)}
    return {error_name(p.error_code) for t in answer.responses for p in t.partitions if p.error_code}


async def _targets(kafka: LocalKafka, topic: str, parts: list[int], to: str, value: int | None) -> dict[int, int]:
    """Each partition's new offset, as ``ConsumerGroupCommand`` computes it (an offset is kept within
    the log's bounds; a timestamp past the last record means the end)."""
    low = await list_offsets(kafka, topic, parts, EARLIEST)
    high = await list_offsets(kafka, topic, parts, LATEST)
    if to == "earliest":
        return {p: low[p][0] for p in parts}
    if to == "latest":
        return {p: high[p][0] for p in parts}
    if value is None:
        raise ValueError(f"reset to {to} needs a value")
    if to == "timestamp":
        found = await list_offsets(kafka, topic, parts, value)
        return {p: found[p][0] if found[p][0] >= 0 else high[p][0] for p in parts}
    if to == "offset":
        return {p: min(max(value, low[p][0]), high[p][0]) for p in parts}
    raise ValueError(f"unknown reset target {to!r}")


async def delete_offsets(kafka: LocalKafka, group: str, topic: str) -> Outcome:
    """OffsetDelete of the topic's partitions, or for a share group DeleteShareGroupOffsets
    (``kafka-share-groups --delete-offsets``: the share-partitions' state goes)."""
    if (await group_state(kafka, group))[2] == "share":
        return await _delete_share_offsets(kafka, group, topic)
    parts = await _partitions(kafka, topic)
    answer = await kafka.call("OffsetDelete", 0, {"group_id": group, "topics": [
        {"name": topic, "partitions": [{"partition_index": p} for p in parts]}]})
    if answer.error_code:
        return Outcome(False, error_name(answer.error_code))
    errors = {error_name(p.error_code) for t in answer.topics for p in t.partitions if p.error_code}
    if errors:
        return Outcome(False, ", ".join(sorted(errors)))
    return Outcome(True, f"deleted the offsets of {group} for {topic}")


async def _delete_share_offsets(kafka: LocalKafka, group: str, topic: str) -> Outcome:
    answer = await kafka.call("DeleteShareGroupOffsets", 0, {"group_id": group, "topics": [{"topic_name": topic}]})
    if answer.error_code:
        return _outcome(answer.error_code, "", answer.error_message)
    errors = {error_name(t.error_code) for t in answer.responses if t.error_code}
    if errors:
        return Outcome(False, ", ".join(sorted(errors)))
    return Outcome(True, f"deleted the offsets of {group} for {topic}")


async def delete_group(kafka: LocalKafka, group: str) -> Outcome:
    answer = await kafka.call("DeleteGroups", 2, {"groups_names": [group]})
    return _outcome(answer.results[0].error_code, f"deleted group {group}")
