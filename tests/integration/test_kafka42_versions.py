"""The versions Kafka 4.2 added to APIs Odradek already served, over raw frames: each new
version answers as a single-node Kafka 4.2 broker without tiered storage does, bad input
included (an unknown topic id is UNKNOWN_TOPIC_ID, never a crash)."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E

from .wire_helpers import create_topic, produce

pytestmark = pytest.mark.integration

METADATA = 3


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def _topic(b, n: int = 0) -> str:
    name = f"v42-{uuid.uuid4().hex[:8]}"
    create_topic(b, name)
    if n:
        produce(b, name, n)
    return name


def _topic_id(b, name: str) -> uuid.UUID:
    with _client(b) as c:
        r = c.request(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    return r.topics[0].topic_id


# --- Metadata v13 (KIP-1102): a top-level error code, 0 from a broker ----------------------------

def test_metadata_v13_answers_with_a_top_level_error_code(broker):
    name = _topic(broker)
    with _client(broker) as c:
        r = c.request(METADATA, 13, {"topics": [{"name": name}, {"name": None, "topic_id": uuid.uuid4()}],
                                     "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    assert r.error_code == E.NONE
    assert [(t.name, t.error_code) for t in r.topics] == [(name, E.NONE), (None, E.UNKNOWN_TOPIC_ID)]
    assert [b.node_id for b in r.brokers] == [broker.app.node_id]


# --- DescribeGroups v6 (KIP-1043): an error message; an unknown group is GROUP_ID_NOT_FOUND ------

DESCRIBE_GROUPS = 15


def _describe_groups(b, version: int, groups: list[str]):
    with _client(b) as c:
        return c.request(DESCRIBE_GROUPS, version, {"groups": groups, "include_authorized_operations": False})


def test_describe_groups_v6_unknown_group_is_group_id_not_found(broker):
    r = _describe_groups(broker, 6, ["no-such-group"])
    g = r.groups[0]
    assert (g.error_code, g.error_message, g.group_state, list(g.members)) == (
        E.GROUP_ID_NOT_FOUND, "Group no-such-group not found.", "Dead", [])


def test_describe_groups_v5_unknown_group_stays_an_empty_dead_one(broker):
    g = _describe_groups(broker, 5, ["no-such-group"]).groups[0]
    assert (g.error_code, g.group_state) == (E.NONE, "Dead")


def test_describe_groups_v6_describes_a_group_with_committed_offsets(broker):
    name = _topic(broker)
    with _client(broker) as c:
        r = c.request(8, 9, {"group_id": "g6", "generation_id_or_member_epoch": -1, "member_id": "",
                             "group_instance_id": None, "topics": [
                                 {"name": name, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                "committed_leader_epoch": -1,
                                                                "committed_metadata": None}]}]})
        assert r.topics[0].partitions[0].error_code == E.NONE
    g = _describe_groups(broker, 6, ["g6"]).groups[0]
    assert (g.error_code, g.error_message, g.group_state) == (E.NONE, None, "Empty")


# --- DescribeCluster v2 (KIP-1073): fenced brokers on request, IsFenced per broker ---------------

DESCRIBE_CLUSTER = 60


@pytest.mark.parametrize("include_fenced", [False, True])
def test_describe_cluster_v2_lists_this_node_unfenced(broker, include_fenced):
    with _client(broker) as c:
        r = c.request(DESCRIBE_CLUSTER, 2, {"include_cluster_authorized_operations": False,
                                            "endpoint_type": 1, "include_fenced_brokers": include_fenced})
    assert (r.error_code, r.endpoint_type, r.controller_id) == (E.NONE, 1, broker.app.node_id)
    assert [(b.broker_id, b.port, b.is_fenced) for b in r.brokers] == [
        (broker.app.node_id, broker.app.endpoint.port, False)]


@pytest.mark.parametrize("endpoint_type, code", [(2, E.MISMATCHED_ENDPOINT_TYPE), (7, E.UNSUPPORTED_ENDPOINT_TYPE)])
def test_describe_cluster_other_endpoint_types_are_refused(broker, endpoint_type, code):
    with _client(broker) as c:
        for version in (1, 2):
            r = c.request(DESCRIBE_CLUSTER, version, {"include_cluster_authorized_operations": False,
                                                      "endpoint_type": endpoint_type})
            assert (r.error_code, list(r.brokers)) == (code, [])


# --- ListTransactions v2 (KIP-1152): a transactional id pattern -----------------------------------

INIT_PRODUCER_ID, LIST_TRANSACTIONS = 22, 66


def _list_transactions(c: SyncClient, pattern: str | None, version: int = 2):
    return c.request(LIST_TRANSACTIONS, version, {"state_filters": [], "producer_id_filters": [],
                                                  "duration_filter": -1, "transactional_id_pattern": pattern})


def test_list_transactions_v2_filters_on_the_whole_transactional_id(broker):
    tag = uuid.uuid4().hex[:8]
    ids = [f"{tag}-orders-1", f"{tag}-orders-2", f"{tag}-payments-1"]
    with _client(broker) as c:
        for tid in ids:
            assert c.request(INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                   "producer_id": -1, "producer_epoch": -1}).error_code == E.NONE

        def listed(pattern, version=2):
            r = _list_transactions(c, pattern, version)
            assert r.error_code == E.NONE
            return sorted(t.transactional_id for t in r.transaction_states if t.transactional_id.startswith(tag))

        assert listed(f"{tag}-orders-.*") == ids[:2]
        assert listed("orders") == []  # a whole-id match, not a search
        assert listed(".*-1") == [ids[0], ids[2]]
        assert listed(None) == listed("") == listed(f"{tag}-orders-.*", version=1) == ids


@pytest.mark.parametrize("pattern", ["(ab(cd", "(a)\\1", "a(?=b)", "(?<!x)y"])
def test_list_transactions_v2_refuses_what_re2_does_not_compile(broker, pattern):
    with _client(broker) as c:
        r = _list_transactions(c, pattern)
        assert (r.error_code, list(r.transaction_states)) == (E.INVALID_REGULAR_EXPRESSION, [])
        assert _list_transactions(c, None).error_code == E.NONE  # the connection is still served


# --- ListOffsets v8-v11: the tiered-storage timestamps, answered without tiered storage -----------

LIST_OFFSETS = 2


def _list_offsets(c: SyncClient, version: int, topic: str, timestamp: int, partition: int = 0):
    r = c.request(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]})
    p = r.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp, p.leader_epoch


def test_list_offsets_v8_to_v11_special_timestamps(broker):
    name = _topic(broker, 3)
    with _client(broker) as c:
        for version in (8, 9, 10, 11):
            assert _list_offsets(c, version, name, -4) == (E.NONE, 0, -1, 0)  # earliest local = earliest
            assert _list_offsets(c, version, name, -2) == (E.NONE, 0, -1, 0)
            assert _list_offsets(c, version, name, -1) == (E.NONE, 3, -1, 0)
            code, offset, _, _ = _list_offsets(c, version, name, -3)  # records may share a millisecond
            assert code == E.NONE and 0 <= offset <= 2
        for version in (9, 10, 11):
            assert _list_offsets(c, version, name, -5) == (E.NONE, -1, -1, -1)  # nothing tiered
        assert _list_offsets(c, 11, name, -6) == (E.NONE, -1, -1, -1)  # nothing pending upload


@pytest.mark.parametrize("version, timestamp", [(7, -4), (8, -5), (10, -6), (11, -7), (3, -3)])
def test_list_offsets_a_timestamp_older_than_the_version_is_unsupported(broker, version, timestamp):
    """Kafka's ReplicaManager.isListOffsetsTimestampUnsupported, checked before the partition exists."""
    name = _topic(broker, 1)
    with _client(broker) as c:
        assert _list_offsets(c, version, name, timestamp)[0] == E.UNSUPPORTED_VERSION
        assert _list_offsets(c, version, "no-such-topic", timestamp)[0] == E.UNSUPPORTED_VERSION
        assert _list_offsets(c, version, name, -2)[0] == E.NONE


def test_list_offsets_v11_unknown_partition(broker):
    name = _topic(broker)
    with _client(broker) as c:
        assert _list_offsets(c, 11, name, -4, partition=7)[0] == E.UNKNOWN_TOPIC_OR_PARTITION
        assert _list_offsets(c, 11, "no-such-topic", -1)[0] == E.UNKNOWN_TOPIC_OR_PARTITION


# --- OffsetCommit v10 (KIP-848): topics by id; an unknown id is UNKNOWN_TOPIC_ID -----------------

OFFSET_COMMIT, OFFSET_FETCH = 8, 9


def _commit_by_id(c: SyncClient, group: str, topic_ids: list[uuid.UUID], offset: int):
    return c.request(OFFSET_COMMIT, 10, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"topic_id": tid, "partitions": [
            {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": "m"} for p in (0, 5)]} for tid in topic_ids]})


def _fetched(c: SyncClient, group: str, topic: str) -> dict[int, tuple[int, int]]:
    r = c.request(OFFSET_FETCH, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                "topics": [{"name": topic, "partition_indexes": [0]}]}],
                                    "require_stable": False})
    return {p.partition_index: (p.error_code, p.committed_offset) for t in r.groups[0].topics for p in t.partitions}


def test_offset_commit_v10_commits_by_topic_id(broker):
    name = _topic(broker, 2)
    tid, unknown = _topic_id(broker, name), uuid.uuid4()
    group = f"g-{uuid.uuid4().hex[:6]}"
    with _client(broker) as c:
        r = _commit_by_id(c, group, [tid, unknown], 2)
        assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
            (tid, [(0, E.NONE), (5, E.UNKNOWN_TOPIC_OR_PARTITION)]),
            (unknown, [(0, E.UNKNOWN_TOPIC_ID), (5, E.UNKNOWN_TOPIC_ID)])]
        assert _fetched(c, group, name) == {0: (E.NONE, 2)}


def test_offset_commit_v10_unknown_ids_only(broker):
    with _client(broker) as c:
        r = _commit_by_id(c, "g-none", [uuid.uuid4()], 1)
        assert [p.error_code for p in r.topics[0].partitions] == [E.UNKNOWN_TOPIC_ID] * 2


# --- OffsetFetch v10 (KIP-848): topics by id; an unknown id is UNKNOWN_TOPIC_ID -------------------

def _fetch_by_id(c: SyncClient, group: str, topics: list[tuple[uuid.UUID, list[int]]] | None):
    r = c.request(OFFSET_FETCH, 10, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics":
                                                 None if topics is None else [{"topic_id": t, "partition_indexes": ps}
                                                                              for t, ps in topics]}],
                                     "require_stable": True})
    g = r.groups[0]
    return g.error_code, {(t.topic_id, p.partition_index): (p.error_code, p.committed_offset, p.metadata)
                          for t in g.topics for p in t.partitions}


def test_offset_fetch_v10_by_topic_id(broker):
    name = _topic(broker, 3)
    tid, unknown = _topic_id(broker, name), uuid.uuid4()
    group = f"g-{uuid.uuid4().hex[:6]}"
    with _client(broker) as c:
        assert _commit_by_id(c, group, [tid], 3).topics[0].partitions[0].error_code == E.NONE
        assert _fetch_by_id(c, group, [(tid, [0, 1]), (unknown, [0, 2])]) == (E.NONE, {
            (tid, 0): (E.NONE, 3, "m"), (tid, 1): (E.NONE, -1, ""),
            (unknown, 0): (E.UNKNOWN_TOPIC_ID, -1, ""), (unknown, 2): (E.UNKNOWN_TOPIC_ID, -1, "")})
        assert _fetch_by_id(c, group, None) == (E.NONE, {(tid, 0): (E.NONE, 3, "m")})
        assert _fetch_by_id(c, group, [(unknown, [0])]) == (E.NONE, {(unknown, 0): (E.UNKNOWN_TOPIC_ID, -1, "")})


def test_offset_fetch_v10_leaves_out_a_deleted_topic_when_fetching_all(broker):
    kept, gone = _topic(broker, 1), _topic(broker, 1)
    ids = {n: _topic_id(broker, n) for n in (kept, gone)}
    group = f"g-{uuid.uuid4().hex[:6]}"
    with _client(broker) as c:
        r = _commit_by_id(c, group, [ids[kept], ids[gone]], 1)
        assert [t.partitions[0].error_code for t in r.topics] == [E.NONE, E.NONE]
        assert c.request(20, 6, {"topics": [{"name": gone, "topic_id": uuid.UUID(int=0)}],
                                 "timeout_ms": 5000}).responses[0].error_code == E.NONE
        code, rows = _fetch_by_id(c, group, None)
    assert code == E.NONE and {t for t, _ in rows} <= {ids[kept]} and (ids[kept], 0) in rows
