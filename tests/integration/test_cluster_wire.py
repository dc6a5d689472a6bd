"""Each broker of a cluster answers only for what it leads, request by request, as Kafka's do."""

from __future__ import annotations

import pytest

from odradek.broker.wire_client import SyncClient, encode
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch
from odradek.testing.handle import BrokerHandle
from tests.integration.test_cluster_clients import unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster():
    with BrokerHandle(brokers=3) as handle:
        yield handle


def client(cluster, node: int) -> SyncClient:
    return SyncClient("127.0.0.1", cluster.app.cluster.endpoints[node]["PLAINTEXT"].port)


def placed(cluster, topic: str, partitions: int = 1, rf: int = 2) -> dict:
    cluster.create_topic(topic, partitions, replication_factor=rf)
    return cluster.layout(topic)["partitions"]


def roles(state: dict) -> tuple[int, int, int]:
    """(leader, a follower, a node that is not a replica) of a partition with two replicas."""
    follower = next(n for n in state["replica_nodes"] if n != state["leader_id"])
    outsider = next(n for n in (1, 2, 3) if n not in state["replica_nodes"])
    return state["leader_id"], follower, outsider


def produce(topic: str, partitions: list[int]) -> dict:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": encode_batch([(None, b"v")])}
                                           for p in partitions]}]}


def fetch(topic_id, epoch: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def topic_id(cluster, topic: str):
    return cluster.app.topics.get(topic).topic_id


def test_produce_at_a_non_leader_names_the_leader(cluster):
    topic = unique("wire-produce")
    state = placed(cluster, topic)[f"{topic}-0"]
    leader, follower, outsider = roles(state)
    for node in (follower, outsider):
        with client(cluster, node) as c:
            answer = c.request(0, 11, produce(topic, [0]))
        part = answer.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, 0)
        assert [n.node_id for n in answer.node_endpoints] == [leader]
        with client(cluster, node) as c:  # v9: no hint
            assert c.request(0, 9, produce(topic, [0])).responses[0].partition_responses[0].error_code == \
                ErrorCode.NOT_LEADER_OR_FOLLOWER
    with client(cluster, leader) as c:
        assert c.request(0, 11, produce(topic, [0])).responses[0].partition_responses[0].error_code == 0


def test_one_request_for_partitions_of_different_leaders_is_answered_per_partition(cluster):
    topic = unique("wire-split")
    layout = placed(cluster, topic, partitions=3, rf=1)
    node = layout[f"{topic}-0"]["leader_id"]
    with client(cluster, node) as c:
        answer = c.request(0, 9, produce(topic, [0, 1, 2]))
    codes = {p.index: p.error_code for p in answer.responses[0].partition_responses}
    assert codes == {p: 0 if layout[f"{topic}-{p}"]["leader_id"] == node else ErrorCode.NOT_LEADER_OR_FOLLOWER
                     for p in range(3)}


def test_fetch_checks_the_epoch_at_replicas_and_leadership_everywhere(cluster):
    topic = unique("wire-fetch")
    leader, follower, outsider = roles(placed(cluster, topic)[f"{topic}-0"])
    cluster.move_leader(topic, 0, follower)  # epoch 1
    leader, follower = follower, leader
    tid = topic_id(cluster, topic)
    cases = [(follower, 0, ErrorCode.FENCED_LEADER_EPOCH), (follower, 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
             (outsider, 0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (leader, 2, ErrorCode.UNKNOWN_LEADER_EPOCH),
             (leader, 0, ErrorCode.FENCED_LEADER_EPOCH), (leader, 1, ErrorCode.NONE)]
    for node, epoch, code in cases:
        with client(cluster, node) as c:
            answer = c.request(1, 16, fetch(tid, epoch))
        part = answer.responses[0].partitions[0]
        assert part.error_code == code, (node, epoch)
        if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) and node != leader:
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, 1)
            assert part.records == b"" and part.high_watermark == -1  # what Kafka sends; never null records


def test_list_offsets_and_offset_for_leader_epoch_follow_the_leader_and_its_history(cluster):
    topic = unique("wire-epochs")
    leader, follower, _outsider = roles(placed(cluster, topic)[f"{topic}-0"])
    with client(cluster, leader) as c:
        c.request(0, 9, produce(topic, [0]))
    cluster.move_leader(topic, 0, follower)  # epoch 1 from offset 1
    with client(cluster, follower) as c:
        c.request(0, 9, produce(topic, [0]))
        latest = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": 1, "timestamp": -1}]}]})
        epochs = c.request(23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": 1, "leader_epoch": e} for e in (0, 1, 2)]}]})
    with client(cluster, leader) as c:
        stale = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": 1, "timestamp": -1}]}]})
    p = latest.topics[0].partitions[0]
    assert (p.error_code, p.offset, p.leader_epoch) == (0, 2, 1)
    assert stale.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert [(e.leader_epoch, e.end_offset) for e in epochs.topics[0].partitions] == [(0, 1), (1, 2), (-1, -1)]


def test_group_requests_go_to_the_coordinator(cluster):
    group = unique("wire-group")
    with client(cluster, 1) as c:
        found = c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
    coordinator = found.node_id
    for node in (1, 2, 3):
        with client(cluster, node) as c:
            join = c.request(11, 5, {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                     "protocols": [{"name": "range", "metadata": b""}]})
        expected = ErrorCode.MEMBER_ID_REQUIRED if node == coordinator else ErrorCode.NOT_COORDINATOR
        assert join.error_code == expected, node


@pytest.mark.parametrize("api_key, version, field", [(15, 5, "groups"), (69, 1, "group_ids")])
def test_group_describes_answer_only_the_groups_this_broker_coordinates(cluster, api_key, version, field):
    """DescribeGroups / ConsumerGroupDescribe: each group from its coordinator, NOT_COORDINATOR elsewhere."""
    group = unique("wire-describe")
    with client(cluster, 1) as c:
        coordinator = c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0].node_id
    for node in (1, 2, 3):
        with client(cluster, node) as c:
            (described,) = c.request(api_key, version, {field: [group],
                                                        "include_authorized_operations": False}).groups
        assert described.group_id == group
        assert (described.error_code == ErrorCode.NOT_COORDINATOR) == (node != coordinator), node


def test_metadata_and_describe_cluster_show_a_broker_down(cluster):
    topic = unique("wire-down")
    state = placed(cluster, topic, rf=1)[f"{topic}-0"]
    alone = state["leader_id"]
    other = next(n for n in (1, 2, 3) if n != alone)
    cluster.node_down(alone)
    try:
        with client(cluster, other) as c:
            meta = c.request(3, 12, {"topics": [{"name": topic, "topic_id": topic_id(cluster, topic)}],
                                     "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
            described = c.request(60, 2, {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                                          "include_fenced_brokers": True})
        part = meta.topics[0].partitions[0]
        assert (part.error_code, part.leader_id, part.leader_epoch) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, 1)
        assert list(part.offline_replicas) == [alone]
        assert sorted(b.node_id for b in meta.brokers) == sorted(n for n in (1, 2, 3) if n != alone)
        assert {b.broker_id: b.is_fenced for b in described.brokers} == {n: n == alone for n in (1, 2, 3)}
    finally:
        cluster.node_up(alone)
    assert cluster.layout(topic)["partitions"][f"{topic}-0"]["leader_id"] == alone


def test_acks_all_needs_min_insync_replicas(cluster):
    """min.insync.replicas=2 on three replicas: acks=all writes until a second broker is down, then
    NOT_ENOUGH_REPLICAS with nothing written; acks=1 still writes (Partition.appendRecordsToLeader)."""
    topic = unique("wire-minisr")
    cluster.create_topic(topic, 1, {"min.insync.replicas": "2"}, replication_factor=3)
    state = cluster.layout(topic)["partitions"][f"{topic}-0"]
    leader = state["leader_id"]
    others = [n for n in state["replica_nodes"] if n != leader]
    all_acks = {**produce(topic, [0]), "acks": -1}
    with client(cluster, leader) as c:
        assert c.request(0, 9, all_acks).responses[0].partition_responses[0].error_code == 0
    cluster.node_down(others[0])
    try:
        with client(cluster, leader) as c:
            assert c.request(0, 9, all_acks).responses[0].partition_responses[0].error_code == 0
        cluster.node_down(others[1])
        with client(cluster, leader) as c:
            refused = c.request(0, 9, all_acks).responses[0].partition_responses[0]
            assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            assert c.request(0, 9, produce(topic, [0])).responses[0].partition_responses[0].error_code == 0
    finally:
        for node in others:
            cluster.node_up(node)
    with client(cluster, leader) as c:
        assert c.request(0, 9, all_acks).responses[0].partition_responses[0].error_code == 0


def test_an_incremental_fetch_session_learns_its_partition_moved(cluster):
    """A session's cached partitions are checked on every incremental fetch, as Kafka reads each
    partition of the context: the old leader answers NOT_LEADER_OR_FOLLOWER for the moved one (a
    consumer that sends no leader epoch, as kafka-python), without waiting."""
    topic = unique("wire-session")
    leader, follower, _outsider = roles(placed(cluster, topic)[f"{topic}-0"])
    tid = topic_id(cluster, topic)
    with client(cluster, leader) as c:
        first = c.request(1, 16, {**fetch(tid, -1), "session_epoch": 0})
        assert first.error_code == 0 and first.session_id > 0
        cluster.move_leader(topic, 0, follower)
        # a wait far beyond the client's socket timeout: only an answer that does not wait arrives
        again = c.request(1, 16, {**fetch(tid, -1), "max_wait_ms": 600_000, "session_id": first.session_id,
                                  "session_epoch": 1, "topics": []})
    part = again.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and part.records == b""


def test_a_partition_refused_inside_a_fetch_session_names_its_new_leader(cluster):
    """KIP-951 in an incremental fetch: the session's cached partition that moved away is answered
    NOT_LEADER_OR_FOLLOWER with its current leader and that leader's endpoint (Fetch v16+), as the
    same partition asked for by name would be."""
    topic = unique("wire-session-hint")
    leader, follower, _outsider = roles(placed(cluster, topic)[f"{topic}-0"])
    tid = topic_id(cluster, topic)
    with client(cluster, leader) as c:
        first = c.request(1, 17, {**fetch(tid, -1), "session_epoch": 0})
        assert first.error_code == 0 and first.session_id > 0
        moved = cluster.move_leader(topic, 0, follower)
        again = c.request(1, 17, {**fetch(tid, -1), "session_id": first.session_id, "session_epoch": 1,
                                  "topics": []})
    part = again.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (follower, moved["leader_epoch"])
    endpoint = cluster.app.cluster.endpoints[follower]["PLAINTEXT"]
    assert [(n.node_id, n.port) for n in again.node_endpoints] == [(follower, endpoint.port)]


def test_an_unclean_truncation_rebuilds_the_idempotent_producers_state(cluster):
    """After the cut at 5 the partition knows the producer's sequence only up to 4
    (``UnifiedLog.truncateTo`` rebuilds producer state): sequence 10 is out of order, 5 is next."""
    topic = unique("wire-pid")
    leader, follower, _outsider = roles(placed(cluster, topic)[f"{topic}-0"])

    def batch(seq: int) -> dict:
        return {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": encode_batch(
                [(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq)}]}]}

    with client(cluster, leader) as c:
        init = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                 "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        for seq in range(10):
            assert c.request(0, 9, batch(seq)).responses[0].partition_responses[0].error_code == 0
    cluster.move_leader(topic, 0, follower, truncate_to=5)
    with client(cluster, follower) as c:
        ahead = c.request(0, 9, batch(10)).responses[0].partition_responses[0]
        assert ahead.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        resent = c.request(0, 9, batch(5)).responses[0].partition_responses[0]
        assert (resent.error_code, resent.base_offset) == (0, 5)


def test_an_acks_0_produce_to_a_non_leader_closes_the_connection(cluster):
    """The acks=0 producer's only signal (KafkaApis.handleProduceRequest): the connection closes."""
    topic = unique("wire-acks0")
    _leader, follower, _outsider = roles(placed(cluster, topic)[f"{topic}-0"])
    with client(cluster, follower) as c:
        c.send_raw(encode(0, 9, 1, {**produce(topic, [0]), "acks": 0}))
        c.sock.settimeout(10)
        with pytest.raises(ConnectionError, match="closed by broker"):
            c.recv_frame()  # no answer: the connection closes


def test_describe_producers_is_answered_by_the_leader(cluster):
    topic = unique("wire-producers")
    leader, follower, _outsider = roles(placed(cluster, topic)[f"{topic}-0"])
    body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
    with client(cluster, follower) as c:
        assert c.request(61, 0, body).topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with client(cluster, leader) as c:
        assert c.request(61, 0, body).topics[0].partitions[0].error_code == 0


def test_added_partitions_get_the_topics_replication_factor(cluster):
    topic = unique("wire-grow")
    placed(cluster, topic, partitions=1, rf=3)
    with client(cluster, 1) as c:
        answer = c.request(37, 3, {"topics": [{"name": topic, "count": 3, "assignments": None}],
                                   "timeout_ms": 5000, "validate_only": False})
    assert answer.results[0].error_code == 0
    layout = cluster.layout(topic)["partitions"]
    assert [len(layout[f"{topic}-{p}"]["replica_nodes"]) for p in range(3)] == [3, 3, 3]


def reassign(cluster, node: int, version: int, topic: str, targets: dict[int, list[int] | None],
             allow_rf_change: bool = True):
    body = {"timeout_ms": 5000, "allow_replication_factor_change": allow_rf_change,
            "topics": [{"name": topic, "partitions": [{"partition_index": p, "replicas": r}
                                                      for p, r in targets.items()]}]}
    with client(cluster, node) as c:
        answer = c.request(45, version, body)
    assert answer.error_code == 0
    return {p.partition_index: (p.error_code, p.error_message) for t in answer.responses for p in t.partitions}


def test_a_reassignment_moves_the_replicas_and_a_leader_outside_them(cluster):
    """Shared storage: every added replica is caught up at once, so the reassignment completes in the
    answer (``ReplicationControlManager.changePartitionReassignment``), nothing stays in progress, and
    a leader the target leaves out gives way to the target's first replica with a new epoch."""
    topic = unique("wire-reassign")
    layout = placed(cluster, topic, partitions=2, rf=2)
    before = layout[f"{topic}-0"]
    leader, follower, outsider = roles(before)
    kept = layout[f"{topic}-1"]
    assert reassign(cluster, outsider, 0, topic, {0: [outsider, follower], 1: list(kept["replica_nodes"])}) == {
        0: (0, None), 1: (0, None)}
    after = cluster.layout(topic)["partitions"]
    assert after[f"{topic}-0"]["replica_nodes"] == [outsider, follower]
    assert sorted(after[f"{topic}-0"]["isr_nodes"]) == sorted([outsider, follower])
    assert after[f"{topic}-0"]["leader_id"] == outsider
    assert after[f"{topic}-0"]["leader_epoch"] == before["leader_epoch"] + 1
    assert after[f"{topic}-1"] == kept  # the same replicas: no change at all
    with client(cluster, leader) as c:
        assert c.request(46, 0, {"timeout_ms": 5000, "topics": None}).topics == []
        refused = c.request(0, 9, produce(topic, [0])).responses[0].partition_responses[0]
    assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with client(cluster, outsider) as c:
        assert c.request(0, 9, produce(topic, [0])).responses[0].partition_responses[0].error_code == 0


def test_a_reassignment_keeping_the_leader_keeps_its_epoch(cluster):
    topic = unique("wire-reassign-keep")
    before = placed(cluster, topic, rf=2)[f"{topic}-0"]
    leader, _follower, outsider = roles(before)
    assert reassign(cluster, leader, 1, topic, {0: [outsider, leader, _follower]}) == {0: (0, None)}
    after = cluster.layout(topic)["partitions"][f"{topic}-0"]
    assert after["replica_nodes"] == [outsider, leader, _follower]
    assert (after["leader_id"], after["leader_epoch"]) == (leader, before["leader_epoch"])


def test_reassignment_targets_are_checked_against_the_registered_brokers(cluster):
    topic = unique("wire-reassign-bad")
    placed(cluster, topic, partitions=3, rf=2)
    got = reassign(cluster, 1, 1, topic, {0: [1, 9], 1: [2, 2], 2: [1, 2, 3]}, allow_rf_change=False)
    assert got[0] == (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes broker 9, but no such broker is registered.")
    assert got[1] == (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes the broker 2 more than once.")
    assert got[2] == (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3")
    assert reassign(cluster, 1, 0, topic, {0: None}) == {0: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                                             "No partition reassignment is in progress.")}


def test_added_partitions_take_their_manual_assignment(cluster):
    topic = unique("wire-grow-manual")
    placed(cluster, topic, partitions=1, rf=2)
    body = {"topics": [{"name": topic, "count": 3, "assignments": [{"broker_ids": [3, 1]}, {"broker_ids": [2, 3]}]}],
            "timeout_ms": 5000, "validate_only": False}
    with client(cluster, 1) as c:
        assert c.request(37, 3, body).results[0].error_code == 0
        body = {**body, "topics": [{"name": topic, "count": 4, "assignments": [{"broker_ids": [1, 2, 3]}]}]}
        refused = c.request(37, 3, body).results[0]
    layout = cluster.layout(topic)["partitions"]
    assert [layout[f"{topic}-{p}"]["replica_nodes"] for p in (1, 2)] == [[3, 1], [2, 3]]
    assert [layout[f"{topic}-{p}"]["leader_id"] for p in (1, 2)] == [3, 2]
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes a partition with 3 "
        "replica(s), but this is not consistent with previous partitions, which have 2 replica(s).")
