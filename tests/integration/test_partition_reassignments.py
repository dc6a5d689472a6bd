"""AlterPartitionReassignments v0-v1 and ListPartitionReassignments v0 over TCP, answered as
Kafka's controller answers them for a cluster of one registered broker
(``ReplicationControlManager.alterPartitionReassignments``): raw frames at every version, bad
input, and kafka-python's admin client."""

from __future__ import annotations

import pytest

from odradek.broker.wire_client import SyncClient

pytestmark = pytest.mark.integration

UNKNOWN_TOPIC, INVALID_RF, INVALID_ASSIGNMENT, NO_REASSIGNMENT = 3, 38, 39, 85


def request(b, api_key: int, version: int, body: dict):
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(api_key, version, body)


def create(b, name: str, partitions: int = 2) -> None:
    assert request(b, 19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                                          "assignments": [], "configs": []}],
                              "timeout_ms": 5000, "validate_only": False}).topics[0].error_code == 0


def alter(b, version: int, topics: dict[str, dict[int, list[int] | None]], allow_rf_change: bool = True):
    body = {"timeout_ms": 5000, "allow_replication_factor_change": allow_rf_change,
            "topics": [{"name": n, "partitions": [{"partition_index": i, "replicas": r} for i, r in parts.items()]}
                       for n, parts in topics.items()]}
    return request(b, 45, version, body)


def codes(res) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {(t.name, p.partition_index): (p.error_code, p.error_message) for t in res.responses for p in t.partitions}


@pytest.mark.parametrize("version", [0, 1])
def test_reassigning_to_this_broker_is_a_no_op_success(broker, version):
    create(broker, "r1")
    node = broker.app.node_id
    res = alter(broker, version, {"r1": {0: [node], 1: [node]}})
    assert (res.error_code, res.error_message) == (0, None)
    assert codes(res) == {("r1", 0): (0, None), ("r1", 1): (0, None)}
    if version >= 1:
        assert res.allow_replication_factor_change is True
    assert broker.app.topics.partition_count("r1") == 2


@pytest.mark.parametrize("version", [0, 1])
def test_bad_targets_get_the_controllers_errors(broker, version):
    create(broker, "r2")
    node = broker.app.node_id
    res = alter(broker, version, {"r2": {0: [node + 1], 1: [], 2: [node]},
                                  "nope": {0: [node]}, "__consumer_offsets": {0: [node, node]}})
    got = codes(res)
    assert got[("r2", 0)] == (INVALID_ASSIGNMENT, f"The manual partition assignment includes broker {node + 1}, "
                                                  "but no such broker is registered.")
    assert got[("r2", 1)] == (INVALID_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    assert got[("r2", 2)] == (UNKNOWN_TOPIC, "Unable to find partition r2:2.")
    assert got[("nope", 0)] == (UNKNOWN_TOPIC, "Unable to find a topic named nope.")
    assert got[("__consumer_offsets", 0)][0] == INVALID_ASSIGNMENT  # the broker twice
    assert res.error_code == 0


def test_sorted_broker_ids_name_the_first_unregistered_one(broker):
    create(broker, "r3", 1)
    node = broker.app.node_id
    res = alter(broker, 1, {"r3": {0: [node + 7, node + 2, node]}})
    assert f"includes broker {node + 2}," in codes(res)[("r3", 0)][1]


@pytest.mark.parametrize("version", [0, 1])
def test_cancelling_when_nothing_is_in_progress(broker, version):
    create(broker, "r4", 1)
    res = alter(broker, version, {"r4": {0: None}})
    assert codes(res)[("r4", 0)] == (NO_REASSIGNMENT, "No partition reassignment is in progress.")


def test_v1_echoes_allow_replication_factor_change(broker):
    create(broker, "r5", 1)
    res = alter(broker, 1, {"r5": {0: [broker.app.node_id]}}, allow_rf_change=False)
    assert res.allow_replication_factor_change is False and codes(res)[("r5", 0)] == (0, None)


def test_list_shows_nothing_in_progress(broker):
    create(broker, "r6", 1)
    for topics in (None, [], [{"name": "r6", "partition_indexes": [0, 5]}], [{"name": "nope", "partition_indexes": [0]}]):
        res = request(broker, 46, 0, {"timeout_ms": 1000, "topics": topics})
        assert (res.error_code, res.error_message, list(res.topics)) == (0, None, [])


def test_kafka_python_admin(broker):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    create(broker, "r7", 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        out = admin.alter_partition_reassignments({TopicPartition("r7", 0): [broker.app.node_id]})
        assert TopicPartition("r7", 0) in out, out
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments([TopicPartition("r7", 1)]) == {}
    finally:
        admin.close()
