"""Test control reaches KIP-848 groups over TCP: a fault rule matches ConsumerGroupHeartbeat by group,
capture decodes it with its answer, ``reset`` forgets consumer groups, ConsumerGroupDescribe and
ListGroups v5 show them, and a broker that lists only the classic protocol answers UNSUPPORTED_VERSION."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.offsets.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)
from odradek.protocol.errors import ErrorCode
from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import create_topic_kafka_python

pytestmark = pytest.mark.integration


def join(group: str, member: str, topic: str) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}


@pytest.fixture(scope="module")
def kbroker():
    with ThreadedBroker() as b:
        yield b


def test_faults_capture_describe_list_and_reset(kbroker):
    topic = f"t-{uuid.uuid4().hex[:6]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, topic, 3)
    kbroker.fault("ConsumerGroupHeartbeat", error="GROUP_MAX_SIZE_REACHED", group_id="faulted", times=1)
    with SyncClient("127.0.0.1", kbroker.app.endpoint.port) as c:
        assert c.request(68, 1, join("faulted", "m0", topic)).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
        r = c.request(68, 1, join("cg", "m1", topic))
        assert (r.error_code, r.member_epoch, r.member_id) == (0, 1, "m1")
        assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2]
        [d] = c.request(69, 1, {"group_ids": ["cg"], "include_authorized_operations": False}).groups
        assert (d.group_state, d.group_epoch, d.members[0].member_type) == ("Stable", 1, 1)
        [classic_view] = c.request(15, 6, {"groups": ["cg"], "include_authorized_operations": False}).groups
        assert (classic_view.error_code, classic_view.error_message, classic_view.group_state) == (
            ErrorCode.GROUP_ID_NOT_FOUND, "Group cg is not a classic group.", "Dead")
        listed = c.request(16, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups
        assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("cg", "consumer", "Stable")]
    [captured] = kbroker.captured("ConsumerGroupHeartbeat", group_id="cg")
    assert captured.answer["member_epoch"] == 1
    assert kbroker.faults() == []
    kbroker.reset()
    with SyncClient("127.0.0.1", kbroker.app.endpoint.port) as c:
        [d] = c.request(69, 1, {"group_ids": ["cg"], "include_authorized_operations": False}).groups
        assert d.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_classic_only_broker_refuses_the_consumer_protocol():
    with ThreadedBroker(overrides={"group.coordinator.rebalance.protocols": "classic"}) as b, \
            SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        assert c.request(68, 1, join("g", "m", "t")).error_code == ErrorCode.UNSUPPORTED_VERSION


def test_group_version_0_turns_the_consumer_protocol_off():
    """Kafka 4 serves the protocol only with the finalized feature group.version >= 1."""
    with ThreadedBroker(overrides={"odradek.initial.features": "group.version=0"}) as b, \
            SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        assert c.request(68, 1, join("g", "m", "t")).error_code == ErrorCode.UNSUPPORTED_VERSION
        [d] = c.request(69, 1, {"group_ids": ["g"], "include_authorized_operations": False}).groups
        assert d.error_code == ErrorCode.UNSUPPORTED_VERSION


def _group_version(c: SyncClient, level: int, kind: int) -> None:
    body = {"timeout_ms": 1000, "validate_only": False, "feature_updates": [
        {"feature": "group.version", "max_version_level": level, "upgrade_type": kind, "allow_downgrade": kind != 1}]}
    [r] = c.request(57, 1, body).results
    assert r.error_code == 0, r


def test_update_features_switches_a_steady_member_off_and_on():
    """The coordinator keeps its consumer-protocol switch between heartbeats: lowering group.version
    with UpdateFeatures (safe downgrade) turns the next steady heartbeat away, raising it serves the
    member again, and a reset's defaults serve a new group."""
    with ThreadedBroker() as b, SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        topic = f"t-{uuid.uuid4().hex[:6]}"
        create_topic_kafka_python(b.bootstrap_servers, topic, 2)
        assert c.request(68, 1, join("g", "m", topic)).member_epoch == 1
        steady = {**join("g", "m", topic), "member_epoch": 1, "rebalance_timeout_ms": -1,
                  "subscribed_topic_names": None, "topic_partitions": None}
        assert c.request(68, 1, steady).error_code == 0
        _group_version(c, 0, 2)
        assert c.request(68, 1, steady).error_code == ErrorCode.UNSUPPORTED_VERSION
        _group_version(c, 1, 1)
        r = c.request(68, 1, steady)
        assert (r.error_code, r.member_epoch) == (0, 1)
        _group_version(c, 0, 2)
        b.reset()
        assert c.request(68, 1, join("g2", "m", topic)).member_epoch == 1


def test_a_consumer_heartbeat_refused_after_the_upgrade_leaves_the_classic_group(kbroker):
    """A classic static member holds instance id ``i1``; a consumer-protocol member joining with the
    same instance id converts the group and is then refused UNRELEASED_INSTANCE_ID (Kafka's
    ``consumerGroupHeartbeat``): the whole operation fails, so the group is still the classic group
    it was -- its member served, described and listed as before."""
    topic, gid = f"t-{uuid.uuid4().hex[:6]}", f"up-{uuid.uuid4().hex[:6]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, topic, 2)
    subscription = encode_subscription(Subscription(version=1, topics=[topic]))
    with SyncClient("127.0.0.1", kbroker.app.endpoint.port) as c:
        joined = c.request(11, 5, {"group_id": gid, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
                                   "member_id": "", "group_instance_id": "i1", "protocol_type": "consumer",
                                   "protocols": [{"name": "range", "metadata": subscription}]})
        assert joined.error_code == 0
        member, generation = joined.member_id, joined.generation_id
        everything = encode_assignment(Assignment(version=1, assigned_partitions=[TopicPartitions(topic, [0, 1])]))
        synced = c.request(14, 3, {"group_id": gid, "generation_id": generation, "member_id": member,
                                   "group_instance_id": "i1",
                                   "assignments": [{"member_id": member, "assignment": everything}]})
        assert synced.error_code == 0
        r = c.request(68, 1, {**join(gid, "c1", topic), "instance_id": "i1"})
        assert r.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
        [d] = c.request(15, 5, {"groups": [gid], "include_authorized_operations": False}).groups
        assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "range")
        assert [(m.member_id, m.group_instance_id) for m in d.members] == [(member, "i1")]
        listed = c.request(16, 5, {"states_filter": [], "types_filter": []}).groups
        assert [(g.group_type, g.group_state) for g in listed if g.group_id == gid] == [("classic", "Stable")]
        assert c.request(12, 3, {"group_id": gid, "generation_id": generation, "member_id": member,
                                 "group_instance_id": "i1"}).error_code == 0
