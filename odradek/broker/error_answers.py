"""The answer to a request that failed unexpectedly: Kafka's ``AbstractRequest.getErrorResponse``.

When a handler raises or its answer cannot be encoded, Kafka does not drop
the connection: ``KafkaApis.handleError`` sends the request's own error
response, which carries the error code at the top level and/or on every
topic, partition, group or resource the request named (each request class
decides, and these follow them).  Only a Produce with acks=0 has no answer
(Kafka closes the connection).  Names come back as the request sent them
(they decoded, so they encode); an error message is never sent, since
Kafka leaves it out for UNKNOWN_SERVER_ERROR.  Fields not set here take
the declaration's defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.errors import ErrorCode

Shape = Callable[[int, Any, int], dict | None]


def _produce(v: int, req, code: int) -> dict | None:
    if req.acks == 0:
        return None
    return {"responses": [{"name": t.name, "topic_id": t.get("topic_id"), "partition_responses": [
        {"index": p.index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
         "log_start_offset": -1} for p in t.partition_data]} for t in req.topic_data]}


def _fetch(v: int, req, code: int) -> dict:
    """From v13 the top-level code alone, no partitions (``FetchRequest.getErrorResponse``)."""
    return {"error_code": code, "session_id": req.get("session_id", 0), "responses": [] if v >= 13 else [
        {"topic": t.topic, "partitions": [
            {"partition_index": p.partition, "error_code": code, "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "aborted_transactions": None, "records": None}
            for p in t.partitions]} for t in req.topics]}


def _list_offsets(v: int, req, code: int) -> dict:
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": code, "timestamp": -1, "offset": -1,
         "leader_epoch": -1} for p in t.partitions]} for t in req.topics]}


def _metadata(v: int, req, code: int) -> dict:
    topics = [{"name": t.name if t.name is not None else "", "topic_id": t.topic_id,  # null name: "" (Kafka)
               "error_code": code, "is_internal": False, "partitions": []} for t in req.topics or []]
    # v13's top-level error code (KIP-1102) carries it too, so an all-topics request sees it
    return {"brokers": [], "cluster_id": None, "controller_id": -1, "topics": topics, "error_code": code}


def _offset_commit(v: int, req, code: int) -> dict:
    return {"topics": [{"name": t.name, "topic_id": t.get("topic_id"),
                        "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                       for p in t.partitions]} for t in req.topics]}


def _offset_fetch(v: int, req, code: int) -> dict:
    if v >= 8:
        return {"groups": [{"group_id": g.group_id, "error_code": code, "topics": []} for g in req.groups]}
    topics = []
    if v < 2:  # no top-level error code yet: every partition carries it
        topics = [{"name": t.name, "partitions": [
            {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": code} for i in t.partition_indexes]} for t in req.topics or []]
    return {"error_code": code, "topics": topics}


def _find_coordinator(v: int, req, code: int) -> dict:
    if v >= 4:
        return {"coordinators": [{"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code,
                                  "error_message": None} for k in req.coordinator_keys]}
    return {"error_code": code, "error_message": None, "node_id": -1, "host": "", "port": -1}


def _add_partitions_to_txn(v: int, req, code: int) -> dict:
    """v4+ (the broker batch): the top-level error only."""
    if v >= 4:
        return {"error_code": code, "results_by_transaction": []}
    return {"results_by_topic_v3_and_below": [{"name": t.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": code} for p in t.partitions]}
        for t in req.v3_and_below_topics]}


def _describe_transactions(v: int, req, code: int) -> dict:
    return {"transaction_states": [{"error_code": code, "transactional_id": tid, "transaction_state": "",
                                    "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                                    "producer_id": -1, "producer_epoch": -1, "topics": []}
                                   for tid in req.transactional_ids]}


def _describe_producers(v: int, req, code: int) -> dict:
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p, "error_code": code, "error_message": None, "active_producers": []}
        for p in t.partition_indexes]} for t in req.topics]}


def _describe_scram(v: int, req, code: int) -> dict:
    """DescribeUserScramCredentialsRequest.getErrorResponse: the error at the top and per user named."""
    return {"error_code": code, "error_message": None, "results": [
        {"user": u.name, "error_code": code, "error_message": None, "credential_infos": []}
        for u in req.users or []]}


def _alter_scram(v: int, req, code: int) -> dict:
    """AlterUserScramCredentialsRequest.getErrorResponse: one result per user named, once."""
    users = dict.fromkeys(x.name for x in [*req.deletions, *req.upsertions])
    return {"results": [{"user": u, "error_code": code, "error_message": None} for u in users]}


def _top_level(**fields: Any) -> Shape:
    return lambda v, req, code: {"error_code": code, **fields}


def _describe_groups(v: int, req, code: int) -> dict:
    return {"groups": [{"group_id": g, "error_code": code, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": []} for g in req.groups]}


def _create_topics(v: int, req, code: int) -> dict:
    return {"topics": [{"name": t.name, "error_code": code, "error_message": None, "num_partitions": -1,
                        "replication_factor": -1, "configs": []} for t in req.topics]}


def _delete_topics(v: int, req, code: int) -> dict:
    if v >= 6:
        return {"responses": [{"name": t.name, "topic_id": t.topic_id, "error_code": code} for t in req.topics]}
    return {"responses": [{"name": n, "error_code": code} for n in req.topic_names]}


def _describe_configs(v: int, req, code: int) -> dict:
    return {"results": [{"error_code": code, "error_message": None, "resource_type": r.resource_type,
                         "resource_name": r.resource_name, "configs": []} for r in req.resources]}


def _delete_groups(v: int, req, code: int) -> dict:
    return {"results": [{"group_id": g, "error_code": code} for g in req.groups_names]}


def _offset_delete(v: int, req, code: int) -> dict:
    return {"error_code": code, "topics": []}


def _delete_records(v: int, req, code: int) -> dict:
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "low_watermark": -1, "error_code": code} for p in t.partitions]}
        for t in req.topics]}


def _offset_for_leader_epoch(v: int, req, code: int) -> dict:
    return {"topics": [{"topic": t.topic, "partitions": [
        {"error_code": code, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
        for p in t.partitions]} for t in req.topics]}


def _create_partitions(v: int, req, code: int) -> dict:
    return {"results": [{"name": t.name, "error_code": code, "error_message": None} for t in req.topics]}


def _elect_leaders(v: int, req, code: int) -> dict:
    return {"error_code": code, "replica_election_results": [
        {"topic": t.topic, "partition_result": [{"partition_id": p, "error_code": code, "error_message": None}
                                                for p in t.partitions]} for t in req.topic_partitions or []]}


def _describe_topic_partitions(v: int, req, code: int) -> dict:
    return {"topics": [{"error_code": code, "name": t.name, "partitions": []} for t in req.topics],
            "next_cursor": None}


def _alter_configs(v: int, req, code: int) -> dict:
    """AlterConfigs and IncrementalAlterConfigs: the error on every resource named."""
    return {"responses": [{"error_code": code, "error_message": None, "resource_type": r.resource_type,
                           "resource_name": r.resource_name} for r in req.resources]}


def _alter_client_quotas(v: int, req, code: int) -> dict:
    """AlterClientQuotasRequest.getErrorResponse: the error on every entity named."""
    return {"entries": [{"error_code": code, "error_message": None, "entity": [
        {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
        for entry in req.entries]}


def _create_acls(v: int, req, code: int) -> dict:
    return {"results": [{"error_code": code, "error_message": None} for _ in req.creations]}


def _delete_acls(v: int, req, code: int) -> dict:
    return {"filter_results": [{"error_code": code, "error_message": None, "matching_acls": []}
                               for _ in req.filters]}


def _consumer_group_describe(v: int, req, code: int) -> dict:
    return {"groups": [{"error_code": code, "error_message": None, "group_id": g, "group_state": "",
                        "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}
                       for g in req.group_ids]}


def _alter_reassignments(v: int, req, code: int) -> dict:
    """AlterPartitionReassignmentsRequest.getErrorResponse: the code on top and on every partition."""
    return {"error_code": code, "error_message": None, "responses": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code,
                                         "error_message": None} for p in t.partitions]} for t in req.topics]}


def _list_reassignments(v: int, req, code: int) -> dict:
    """ListPartitionReassignmentsRequest.getErrorResponse: the asked partitions, no replicas."""
    return {"error_code": code, "error_message": None, "topics": [
        {"name": t.name, "partitions": [{"partition_index": i, "replicas": [], "adding_replicas": [],
                                         "removing_replicas": []} for i in t.partition_indexes]}
        for t in req.topics or []]}


def _alter_replica_log_dirs(v: int, req, code: int) -> dict:
    """AlterReplicaLogDirsRequest.getErrorResponse: every partition named, by topic."""
    by_topic: dict[str, list[dict]] = {}
    for d in req.dirs:
        for t in d.topics:
            by_topic.setdefault(t.name, []).extend({"partition_index": p, "error_code": code} for p in t.partitions)
    return {"results": [{"topic_name": n, "partitions": ps} for n, ps in by_topic.items()]}


def _describe_share_group_offsets(v: int, req, code: int) -> dict:
    """DescribeShareGroupOffsetsRequest.getErrorResponse: the error on every group named."""
    return {"groups": [{"group_id": g.group_id, "topics": [], "error_code": code, "error_message": None}
                       for g in req.groups]}


SHAPES: dict[int, Shape] = {
    0: _produce, 1: _fetch, 2: _list_offsets, 3: _metadata, 8: _offset_commit, 9: _offset_fetch,
    10: _find_coordinator,
    11: lambda v, req, code: {"error_code": code, "generation_id": -1, "leader": "", "member_id": "",
                              "protocol_name": None if v >= 7 else "", "members": []},
    12: _top_level(), 13: _top_level(members=[]), 14: _top_level(protocol_type=None, protocol_name=None),
    15: _describe_groups, 16: _top_level(groups=[]), 18: _top_level(api_keys=[]), 19: _create_topics,
    20: _delete_topics, 21: _delete_records, 22: _top_level(producer_id=-1, producer_epoch=-1),
    23: _offset_for_leader_epoch, 32: _describe_configs, 33: _alter_configs, 44: _alter_configs, 35: _top_level(results=[]), 37: _create_partitions,
    42: _delete_groups, 43: _elect_leaders, 47: _offset_delete, 75: _describe_topic_partitions,
    60: _top_level(error_message=None, cluster_id="", controller_id=-1, brokers=[]),
    24: _add_partitions_to_txn, 25: _top_level(), 26: _top_level(), 65: _describe_transactions,
    28: _offset_commit,  # TxnOffsetCommit: the same shape (TxnOffsetCommitRequest.getErrorResponse)
    66: _top_level(unknown_state_filters=[], transaction_states=[]), 61: _describe_producers,
    50: _describe_scram, 51: _alter_scram,
    48: _top_level(error_message=None, entries=None), 49: _alter_client_quotas,
    57: _top_level(error_message=None, results=[]),  # UpdateFeaturesResponse.createWithErrors
    29: _top_level(error_message=None, resources=[]), 30: _create_acls, 31: _delete_acls,
    68: _top_level(error_message=None, member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None),
    69: _consumer_group_describe,
    76: _top_level(error_message=None, member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None),
    77: _consumer_group_describe,  # ShareGroupDescribeRequest.getErrorResponse: the same shape
    74: _top_level(config_resources=[]), 45: _alter_reassignments, 46: _list_reassignments,
    34: _alter_replica_log_dirs,  # ListConfigResourcesRequest.getErrorResponse
    17: _top_level(mechanisms=[]), 36: _top_level(error_message=None, auth_bytes=b""),
    # share groups: ShareFetchRequest / ShareAcknowledgeRequest.getErrorResponse (top level only)
    78: _top_level(error_message=None, acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[]),
    79: _top_level(error_message=None, acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[]),
    90: _describe_share_group_offsets,
    91: _top_level(error_message=None, responses=[]), 92: _top_level(error_message=None, responses=[]),
}


def error_answer(api_key: int, version: int, request: Any,
                 code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> dict | None:
    """The body Kafka sends for ``request`` failing with ``code``; None: close the connection instead."""
    shape = SHAPES.get(api_key)
    if shape is None:
        return None
    body = shape(version, request, int(code))
    if body is not None:
        body.setdefault("throttle_time_ms", 0)
    return body
