"""Per-group configs (GROUP config resources, Kafka's ``GroupConfig``) with real admin clients over TCP.

kafka-python and confluent-kafka set ``consumer.session.timeout.ms`` /
``consumer.heartbeat.interval.ms`` (and the share.* / streams.* names Kafka 4.2 has) on a group;
DescribeConfigs reports them as GROUP_CONFIG over the broker's defaults; values outside the
broker's ``group.*.min/max.*`` bounds get INVALID_CONFIG with Kafka's message; the overrides
survive a restart, a test-control reset forgets them; ACLs are Kafka's (DESCRIBE_CONFIGS /
ALTER_CONFIGS on the GROUP resource).  The consumer-protocol coordinator answers with the group's
heartbeat interval and fences on the group's session timeout (broker clock).
"""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode
from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import create_topic_kafka_python

pytestmark = pytest.mark.integration

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
DEFAULT_CONFIG, GROUP_CONFIG = 5, 8
BOUNDS = {"group.consumer.min.session.timeout.ms": "2000", "group.consumer.min.heartbeat.interval.ms": "100",
          "group.consumer.heartbeat.interval.ms": "1000"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def broker(tmp_path):
    with ThreadedBroker(tmp_path, overrides=BOUNDS) as b:
        yield b


def incremental(b, name: str, configs: list[tuple[str, int, str | None]], *, validate_only: bool = False):
    body = {"resources": [{"resource_type": GROUP, "resource_name": name,
                           "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in configs]}],
            "validate_only": validate_only}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(44, 1, body).responses[0]


def legacy(b, name: str, configs: dict[str, str]):
    body = {"resources": [{"resource_type": GROUP, "resource_name": name,
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "validate_only": False}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(33, 2, body).responses[0]


def described(b, name: str):
    body = {"resources": [{"resource_type": GROUP, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": True}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(32, 4, body).results[0]


def configs_of(b, name: str) -> dict[str, tuple[str, int]]:
    res = described(b, name)
    assert res.error_code == 0, res
    return {c.name: (c.value, c.config_source) for c in res.configs}


def test_kafka_python_sets_describes_and_deletes_group_configs(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    group = unique("g")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, group, {
            "consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "500"})],
            incremental=True, raise_on_unknown=False)
        found = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, group)])["group"][group]
        assert {k: (v["value"], v["config_source"]) for k, v in found.items()} == {
            "consumer.session.timeout.ms": ("3000", "DYNAMIC_GROUP_CONFIG"),
            "consumer.heartbeat.interval.ms": ("500", "DYNAMIC_GROUP_CONFIG")}
    finally:
        admin.close()
    configs = configs_of(broker, group)
    assert configs["consumer.session.timeout.ms"] == ("3000", GROUP_CONFIG)
    assert configs["consumer.heartbeat.interval.ms"] == ("500", GROUP_CONFIG)
    assert configs["share.record.lock.duration.ms"] == ("30000", DEFAULT_CONFIG)
    assert configs["share.auto.offset.reset"] == ("latest", DEFAULT_CONFIG)
    assert set(configs) == {
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.session.timeout.ms",
        "share.heartbeat.interval.ms", "share.record.lock.duration.ms", "share.auto.offset.reset",
        "share.isolation.level", "streams.session.timeout.ms", "streams.heartbeat.interval.ms",
        "streams.num.standby.replicas", "streams.initial.rebalance.delay.ms"}
    eff = broker.call(lambda: broker.app.group_configs.effective(group))
    assert (eff.consumer_session_timeout_ms, eff.consumer_heartbeat_interval_ms) == (3000, 500)
    assert incremental(broker, group, [("consumer.session.timeout.ms", DELETE, None)]).error_code == 0
    assert configs_of(broker, group)["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)


def test_confluent_admin_alters_and_describes_a_group_resource(broker):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    group = unique("g")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(10)
    [fut] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    entries = fut.result(10)
    assert entries["share.auto.offset.reset"].value == "earliest"
    assert entries["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
    assert entries["share.isolation.level"].value == "read_committed"
    assert entries["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    eff = broker.call(lambda: broker.app.group_configs.effective(group))
    assert (eff.share_auto_offset_reset, eff.share_isolation_level) == ("earliest", "read_committed")


@pytest.mark.parametrize(("configs", "message"), [
    ({"consumer.session.timeout.ms": "1000"},
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "70000"},
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "20000"},
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ({"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "3000"},
     "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
    ({"consumer.session.timeout.ms": "2000", "consumer.heartbeat.interval.ms": "2500"},
     "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
    ({"share.record.lock.duration.ms": "500"},
     "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ({"consumer.session.timeout.ms": "soon"},
     "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"share.auto.offset.reset": "none"}, None),
    ({"share.auto.offset.reset": "by_duration:-PT1H"}, None),
    ({"share.isolation.level": "READ_COMMITTED"}, None),
    ({"streams.num.standby.replicas": "3"},
     "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
    ({"group.max.size": "3"}, "Unknown group config name: group.max.size"),
])
def test_values_kafka_refuses_get_invalid_config_and_change_nothing(broker, configs, message):
    group = unique("g")
    r = incremental(broker, group, [(k, SET, v) for k, v in configs.items()])
    assert r.error_code == ErrorCode.INVALID_CONFIG
    if message is not None:
        assert r.error_message == message
    assert broker.call(lambda: broker.app.group_configs.overrides(group)) == {}


def test_request_shape_errors_validate_only_and_legacy_alter_configs(broker):
    assert incremental(broker, "", [("consumer.session.timeout.ms", SET, "3000")]).error_code == \
        ErrorCode.INVALID_REQUEST
    assert described(broker, "").error_code == ErrorCode.INVALID_REQUEST
    group = unique("g")
    r = incremental(broker, group, [("consumer.session.timeout.ms", APPEND, "3000")])
    assert r.error_code == ErrorCode.INVALID_CONFIG
    assert incremental(broker, group, [("share.auto.offset.reset", SET, "by_duration:P1DT2H")],
                       validate_only=True).error_code == 0
    assert broker.call(lambda: broker.app.group_configs.overrides(group)) == {}
    # Kafka 4.2's legacy AlterConfigs takes GROUP resources too, and replaces the whole set
    assert incremental(broker, group, [("consumer.session.timeout.ms", SET, "3000")]).error_code == 0
    assert legacy(broker, group, {"consumer.heartbeat.interval.ms": "700"}).error_code == 0
    assert broker.call(lambda: broker.app.group_configs.overrides(group)) == {"consumer_heartbeat_interval_ms": 700}


def test_group_configs_survive_a_restart_and_a_reset_forgets_them(broker):
    group = unique("g")
    assert incremental(broker, group, [("consumer.session.timeout.ms", SET, "4000"),
                                       ("share.auto.offset.reset", SET, "by_duration:PT30M")]).error_code == 0
    broker.restart()
    configs = configs_of(broker, group)
    assert configs["consumer.session.timeout.ms"] == ("4000", GROUP_CONFIG)
    assert configs["share.auto.offset.reset"] == ("by_duration:PT30M", GROUP_CONFIG)
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        listed = c.request(74, 1, {"resource_types": [GROUP]}).config_resources
        assert [(r.resource_name, r.resource_type) for r in listed] == [(group, GROUP)]
    broker.reset()
    assert configs_of(broker, group)["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
    broker.restart()
    assert configs_of(broker, group)["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)


def _join(group: str, member: str, topic: str) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}


def _beat(group: str, member: str, epoch: int) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": None}


def test_the_coordinator_reads_the_groups_heartbeat_interval_and_session_timeout(broker):
    topic, group, other = unique("t"), unique("g"), unique("g")
    create_topic_kafka_python(broker.bootstrap_servers, topic, 2)
    assert incremental(broker, group, [("consumer.session.timeout.ms", SET, "3000"),
                                       ("consumer.heartbeat.interval.ms", SET, "400")]).error_code == 0
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        r = c.request(68, 1, _join(group, "m1", topic))
        assert (r.error_code, r.heartbeat_interval_ms) == (0, 400)
        assert c.request(68, 1, _join(other, "m2", topic)).heartbeat_interval_ms == 1000
        steady = c.request(68, 1, _beat(group, "m1", r.member_epoch))  # the steady-state fast path
        assert (steady.error_code, steady.heartbeat_interval_ms) == (0, 400)
        broker.advance(ms=3500)  # past the group's 3 s session, well inside the default 45 s
        assert c.request(68, 1, _beat(group, "m1", r.member_epoch)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert c.request(68, 1, _beat(other, "m2", 1)).error_code == 0
        # lowering the session timeout takes effect at the member's next heartbeat
        assert incremental(broker, other, [("consumer.session.timeout.ms", SET, "2500")]).error_code == 0
        assert c.request(68, 1, _beat(other, "m2", 1)).error_code == 0
        broker.advance(ms=3000)
        assert c.request(68, 1, _beat(other, "m2", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_acls_are_describe_configs_and_alter_configs_on_the_group(tmp_path):
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourceType,
    )

    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            'user_admin="admin-secret" user_alice="alice-secret";')
    overrides = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:admin", **BOUNDS}

    def client(user: str) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username=user,
                                sasl_plain_password=f"{user}-secret")

    with ThreadedBroker(tmp_path, overrides=overrides) as b:
        admin, alice = client("admin"), client("alice")
        try:
            admin.create_acls([ACL("User:alice", "*", ACLOperation.DESCRIBE_CONFIGS, ACLPermissionType.ALLOW,
                                   ResourcePattern(ResourceType.GROUP, "seen"))])
            from kafka.admin import ConfigResource, ConfigResourceType

            def alter() -> object:
                return alice.alter_configs([ConfigResource(ConfigResourceType.GROUP, "seen", {
                    "consumer.session.timeout.ms": "3000"})], incremental=True, raise_on_unknown=False)
            assert "GroupAuthorizationFailedError" in str(alter()["group"]["seen"])
            admin.create_acls([ACL("User:alice", "*", ACLOperation.ALTER_CONFIGS, ACLPermissionType.ALLOW,
                                   ResourcePattern(ResourceType.GROUP, "seen"))])
            assert "Error" not in str(alter()["group"]["seen"])
            seen = alice.describe_configs([ConfigResource(ConfigResourceType.GROUP, "seen")])["group"]["seen"]
            assert seen["consumer.session.timeout.ms"]["value"] == "3000"
            assert alice.describe_configs([ConfigResource(ConfigResourceType.GROUP, "hidden")]) == \
                {"group": {"hidden": {}}}  # kafka-python drops the denied resource's configs
            from confluent_kafka import KafkaError, KafkaException
            from confluent_kafka.admin import AdminClient
            from confluent_kafka.admin import ConfigResource as CResource
            from confluent_kafka.admin import ResourceType as CType

            ck = AdminClient({"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                              "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                              "sasl.password": "alice-secret"})
            [fut] = ck.describe_configs([CResource(CType.GROUP, "hidden")]).values()
            with pytest.raises(KafkaException) as denied:
                fut.result(10)
            assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
            del ck, fut
        finally:
            admin.close()
            alice.close()
        assert b.call(lambda: b.app.group_configs.overrides("seen")) == {"consumer_session_timeout_ms": 3000}
