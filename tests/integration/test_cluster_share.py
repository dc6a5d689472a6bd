"""Share groups in a cluster: ShareFetch / ShareAcknowledge are answered by partition leaders, the
share-group APIs by the group's coordinator, as Kafka's brokers do (``KafkaApis.handleShareFetchRequest``)."""

from __future__ import annotations

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.shares.records import kafka_uuid_text, state_partition_for
from odradek.testing.handle import BrokerHandle
from tests.integration.share_wire import (
    ACCEPT,
    acks,
    fetch_topics,
    init_share,
    offsets_of,
    partition_rows,
    share_ack,
    share_fetch,
)
from tests.integration.test_cluster_clients import unique
from tests.integration.test_cluster_wire import client, placed, produce, roles, topic_id

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def cluster():
    # several __consumer_offsets / __share_group_state partitions, so keys have different coordinators
    with BrokerHandle(brokers=3, overrides={"offsets.topic.num.partitions": 6,
                                            "share.coordinator.state.topic.num.partitions": 6}) as handle:
        yield handle


def coordinator_of(cluster, group: str) -> int:
    with client(cluster, 1) as c:
        return c.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0].node_id


def test_share_fetch_and_acknowledge_at_a_non_leader_name_the_leader(cluster):
    topic, group = unique("share-lead"), unique("share-lead-g")
    state = placed(cluster, topic)[f"{topic}-0"]
    leader, follower, outsider = roles(state)
    with client(cluster, leader) as c:
        c.request(0, 9, produce(topic, [0]))
        c.request(0, 9, produce(topic, [0]))
    with client(cluster, coordinator_of(cluster, group)) as c:
        init_share(c, group, topic)
    tid = topic_id(cluster, topic)
    for node in (follower, outsider):
        with client(cluster, node) as c:
            fetched = share_fetch(c, group, "m1", 0, fetch_topics(tid, 0))
            acked = share_ack(c, group, "m1", 1, acks(tid, 0, (0, 0, [ACCEPT])))
        for answer in (fetched, acked):
            assert answer.error_code == 0
            part = partition_rows(answer)[0]
            assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, node
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, 0)
            assert [n.node_id for n in answer.node_endpoints] == [leader]
    with client(cluster, leader) as c:
        assert offsets_of(share_fetch(c, group, "m1", 0, fetch_topics(tid, 0))) == [0, 1]
        assert partition_rows(share_ack(c, group, "m1", 1, acks(tid, 0, (0, 1, [ACCEPT, ACCEPT]))))[0].error_code == 0


def test_share_group_apis_go_to_the_coordinator(cluster):
    topic, group = unique("share-coord"), unique("share-coord-g")
    placed(cluster, topic)
    coordinator = coordinator_of(cluster, group)
    for node in (1, 2, 3):
        expected = ErrorCode.NONE if node == coordinator else ErrorCode.NOT_COORDINATOR
        with client(cluster, node) as c:
            beat = c.request(76, 1, {"group_id": group, "member_id": unique("m")[:30], "member_epoch": 0,
                                     "rack_id": None, "subscribed_topic_names": [topic]})
            described = c.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})
            offsets = c.request(90, 0, {"groups": [{"group_id": group, "topics": None}]})
            altered = c.request(91, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
                {"partition_index": 0, "start_offset": 0}]}]})
            deleted = c.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        assert beat.error_code == expected, node
        assert described.groups[0].error_code == expected, node
        assert offsets.groups[0].error_code == expected, node
        if node != coordinator:
            assert altered.error_code == deleted.error_code == ErrorCode.NOT_COORDINATOR, node


def test_a_share_group_describe_answers_each_group_from_its_coordinator(cluster):
    groups = [unique("share-desc") for _ in range(12)]
    mine = [g for g in groups if coordinator_of(cluster, g) == 1]
    assert mine and len(mine) < len(groups)
    with client(cluster, 1) as c:
        described = c.request(77, 1, {"group_ids": groups, "include_authorized_operations": False})
    assert [g.group_id for g in described.groups] == groups
    for g in described.groups:
        assert g.error_code != ErrorCode.NOT_COORDINATOR if g.group_id in mine else \
            g.error_code == ErrorCode.NOT_COORDINATOR, g


def test_the_share_coordinator_is_the_leader_of_the_keys_share_state_partition(cluster):
    """FindCoordinator v6 key type 2 (what a broker's persister asks): the leader of the
    ``__share_group_state`` partition ``"group:topicId:partition"`` hashes to, following a move."""
    topic, group = unique("share-state"), unique("share-state-g")
    placed(cluster, topic, partitions=4)
    tid = topic_id(cluster, topic)
    keys = [f"{group}:{kafka_uuid_text(tid)}:{p}" for p in range(4)]

    def found(version: int = 6) -> list:
        with client(cluster, 2) as c:
            return c.request(10, version, {"key_type": 2, "coordinator_keys": keys}).coordinators

    def leader(p: int) -> int:
        index = state_partition_for(group, tid, p, 6)
        return cluster.layout("__share_group_state")["partitions"][f"__share_group_state-{index}"]["leader_id"]

    assert [(c.error_code, c.node_id) for c in found()] == [(0, leader(p)) for p in range(4)]
    index = state_partition_for(group, tid, 0, 6)
    cluster.move_leader("__share_group_state", index, leader(0) % 3 + 1)
    assert found()[0].node_id == leader(0)
    assert {c.error_code for c in found(5)} == {ErrorCode.INVALID_REQUEST}
    with client(cluster, 1) as c:
        bad = c.request(10, 6, {"key_type": 2, "coordinator_keys": ["", f"{group}:nope:0"]}).coordinators
    assert [b.error_code for b in bad] == [ErrorCode.INVALID_REQUEST] * 2


def test_a_share_sessions_partition_that_moved_away_names_its_new_leader(cluster):
    """The share session's cached partition is checked on every ShareFetch, as the fetch session's:
    after a move the old leader answers NOT_LEADER_OR_FOLLOWER with the new one, and hands out nothing."""
    topic, group = unique("share-moved"), unique("share-moved-g")
    leader, follower, _outsider = roles(placed(cluster, topic)[f"{topic}-0"])
    with client(cluster, leader) as c:
        c.request(0, 9, produce(topic, [0]))
    with client(cluster, coordinator_of(cluster, group)) as c:
        init_share(c, group, topic)
    tid = topic_id(cluster, topic)
    with client(cluster, leader) as c:
        assert partition_rows(share_fetch(c, group, "m1", 0, fetch_topics(tid, 0), max_records=0))[0].error_code == 0
        moved = cluster.move_leader(topic, 0, follower)
        again = share_fetch(c, group, "m1", 1, [])
    part = partition_rows(again)[0]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and list(part.acquired_records) == []
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (follower, moved["leader_epoch"])
    assert [n.node_id for n in again.node_endpoints] == [follower]
