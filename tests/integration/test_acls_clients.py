"""ACLs over TCP with real clients: CreateAcls / DescribeAcls / DeleteAcls through kafka-python's
and confluent-kafka's admin clients, and the per-API checks a PLAINTEXT client (User:ANONYMOUS)
meets: denied produce, fetch, commit, describe; DENY over ALLOW; prefixed patterns; super
users; ``allow.everyone.if.no.acl.found`` both ways; ACLs surviving a restart.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch
from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import kafka_python_subscriber

pytestmark = pytest.mark.integration

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
INVALID_REQUEST, SECURITY_DISABLED = 42, 54
# wire codes
TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, CREATE, DESCRIBE, ALTER, IDEMPOTENT_WRITE = 2, 3, 4, 5, 8, 7, 12
DENY, ALLOW = 2, 3


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acl_broker(tmp_path, **settings) -> ThreadedBroker:
    overrides = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}
    overrides.update({k.replace("_", "."): v for k, v in settings.items()})
    return ThreadedBroker(tmp_path, overrides=overrides).start()


def request(b, api_key: int, version: int, body: dict):
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(api_key, version, body)


def create_acls(b, *acls: tuple, version: int = 3) -> list[int]:
    """Each acl: (resource type, name, pattern, principal, host, operation, permission)."""
    body = {"creations": [dict(zip(("resource_type", "resource_name", "resource_pattern_type", "principal",
                                    "host", "operation", "permission_type"), a, strict=True)) for a in acls]}
    return [r.error_code for r in request(b, 30, version, body).results]


def create_topic(b, name: str, partitions: int = 1) -> int:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False}
    return request(b, 19, 5, body).topics[0].error_code


def produce(b, topic: str) -> int:
    r = request(b, 0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([(None, b"v")])}]}]})
    return r.responses[0].partition_responses[0].error_code


def fetch(b, topic: str) -> int:
    r = request(b, 1, 12, {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                           "session_id": 0, "session_epoch": -1, "topics": [
                               {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                "partition_max_bytes": 1 << 20}]}],
                           "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0].error_code


def metadata(b, topics: list[str] | None, version: int = 12, **extra):
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    body.update(extra)
    return request(b, 3, version, body)


def commit(b, group: str, topic: str) -> int:
    r = request(b, 8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                          "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                              {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                               "committed_metadata": ""}]}]})
    return r.topics[0].partitions[0].error_code


# --- the ACL APIs ------------------------------------------------------------------------

def test_acl_apis_answer_security_disabled_without_an_authorizer(broker):
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourceType,
    )

    assert create_acls(broker, (TOPIC, "t", LITERAL, ANON, "*", READ, ALLOW)) == [SECURITY_DISABLED]
    described = request(broker, 29, 1, {"resource_type_filter": ANY, "resource_name_filter": None,
                                        "pattern_type_filter": ANY, "principal_filter": None,
                                        "host_filter": None, "operation": ANY, "permission_type": ANY})
    assert described.error_code == SECURITY_DISABLED
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        result = admin.create_acls([ACL(ANON, "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                                        ResourcePattern(ResourceType.TOPIC, "t", ACLResourcePatternType.LITERAL))])
        assert result["succeeded"] == [] and len(result["failed"]) == 1
    finally:
        admin.close()


def test_kafka_python_admin_creates_describes_and_deletes_and_acls_survive_restart(tmp_path):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    def pattern(name: str, kind=ACLResourcePatternType.LITERAL) -> ResourcePattern:
        return ResourcePattern(ResourceType.TOPIC, name, kind)

    acls = [ACL("User:test", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern("topic")),
            ACL("User:test", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                pattern("top", ACLResourcePatternType.PREFIXED)),
            ACL("User:other", "10.1.1.1", ACLOperation.DESCRIBE, ACLPermissionType.DENY, pattern("topic"))]
    b = acl_broker(tmp_path)
    try:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        result = admin.create_acls(acls)
        assert len(result["succeeded"]) == 3 and result["failed"] == []
        assert admin.create_acls(acls[:1])["failed"] == []  # the same ACL again: no duplicate
        admin.close()
        b.restart()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)

        def describe(**kw) -> set:
            f = ACLFilter(kw.get("principal"), kw.get("host"), kw.get("op", ACLOperation.ANY),
                          ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.TOPIC, kw.get("name"),
                                                kw.get("kind", ACLResourcePatternType.ANY)))
            found, error = admin.describe_acls(f)
            assert error.errno == 0
            return {(a.principal, a.resource_pattern.resource_name, a.operation) for a in found}

        assert len(describe()) == 3
        assert describe(name="topic") == {("User:test", "topic", ACLOperation.READ),
                                          ("User:other", "topic", ACLOperation.DESCRIBE)}
        assert describe(name="topic", kind=ACLResourcePatternType.MATCH) == {
            ("User:test", "topic", ACLOperation.READ), ("User:test", "top", ACLOperation.WRITE),
            ("User:other", "topic", ACLOperation.DESCRIBE)}
        assert describe(principal="User:other") == {("User:other", "topic", ACLOperation.DESCRIBE)}
        assert describe(host="*", op=ACLOperation.WRITE) == {("User:test", "top", ACLOperation.WRITE)}
        deleted = admin.delete_acls([ACLFilter("User:test", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                               ResourcePatternFilter(ResourceType.ANY, None,
                                                                     ACLResourcePatternType.ANY))])
        (_flt, matched, error), = deleted
        assert error.errno == 0 and len(matched) == 2
        admin.close()
        b.restart()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        assert describe() == {("User:other", "topic", ACLOperation.DESCRIBE)}
        admin.close()
    finally:
        b.close()


def test_confluent_admin_acls_with_match_filter(tmp_path):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    b = acl_broker(tmp_path)
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        t1, t2 = unique("rdkafka"), unique("rdkafka")
        bindings = [AclBinding(ResourceType.TOPIC, t1, ResourcePatternType.PREFIXED, "User:test1", "*",
                               AclOperation.READ, AclPermissionType.ALLOW),
                    AclBinding(ResourceType.TOPIC, t1 + "-x", ResourcePatternType.LITERAL, "User:test2", "*",
                               AclOperation.WRITE, AclPermissionType.DENY),
                    AclBinding(ResourceType.TOPIC, t2, ResourcePatternType.LITERAL, "User:test1", "*",
                               AclOperation.ALL, AclPermissionType.ALLOW)]
        for f in admin.create_acls(bindings, request_timeout=10).values():
            assert f.result(10) is None
        match = AclBindingFilter(ResourceType.TOPIC, t1 + "-x", ResourcePatternType.MATCH, None, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
        found = admin.describe_acls(match, request_timeout=10).result(10)
        assert {(x.name, x.resource_pattern_type) for x in found} == {
            (t1, ResourcePatternType.PREFIXED), (t1 + "-x", ResourcePatternType.LITERAL)}
        by_principal = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:test1", None,
                                        AclOperation.ANY, AclPermissionType.ANY)
        deleted = admin.delete_acls([by_principal], request_timeout=10)[by_principal].result(10)
        assert {x.name for x in deleted} == {t1, t2}
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        assert [x.name for x in admin.describe_acls(everything, request_timeout=10).result(10)] == [t1 + "-x"]
    finally:
        b.close()


def test_invalid_bindings_and_filters_get_invalid_request(tmp_path):
    b = acl_broker(tmp_path)
    try:
        codes = create_acls(b, (CLUSTER, "my-cluster", LITERAL, ANON, "*", ALTER, ALLOW),
                            (TOPIC, "", LITERAL, ANON, "*", READ, ALLOW),
                            (TOPIC, "t", MATCH, ANON, "*", READ, ALLOW),
                            (TOPIC, "t", LITERAL, "ANONYMOUS", "*", READ, ALLOW),
                            (TOPIC, "t", LITERAL, ANON, "*", ANY, ALLOW),
                            (TOPIC, "t", LITERAL, ANON, "*", READ, ALLOW))
        assert codes == [INVALID_REQUEST] * 5 + [0]
        r = request(b, 31, 2, {"filters": [
            {"resource_type_filter": 0, "resource_name_filter": None, "pattern_type_filter": ANY,
             "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY},
            {"resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
             "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}]})
        assert [f.error_code for f in r.filter_results] == [INVALID_REQUEST, 0]
        assert len(r.filter_results[1].matching_acls) == 1
        # v0: no pattern type on the wire, LITERAL implied
        assert create_acls(b, (TOPIC, "t0", PREFIXED, ANON, "*", READ, ALLOW), version=0) == [0]  # not sent
        d = request(b, 29, 0, {"resource_type_filter": TOPIC, "resource_name_filter": "t0",
                               "principal_filter": None, "host_filter": None, "operation": ANY,
                               "permission_type": ANY})
        assert [(x.resource_name, [a.operation for a in x.acls]) for x in d.resources] == [("t0", [READ])]
    finally:
        b.close()


# --- per-API checks ----------------------------------------------------------------------

def test_topic_with_acls_for_someone_else_denies_anonymous(tmp_path):
    """allow.everyone.if.no.acl.found=true, but the topic has an ACL (for User:alice): ANONYMOUS is
    denied produce, fetch, describe, list offsets; an unnamed topic stays open."""
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    b = acl_broker(tmp_path)
    try:
        private, public = unique("private"), unique("public")
        assert create_topic(b, private) == 0 and create_topic(b, public) == 0
        assert create_acls(b, (TOPIC, private, LITERAL, "User:alice", "*", ALL, ALLOW)) == [0]
        assert produce(b, private) == TOPIC_DENIED
        assert fetch(b, private) == TOPIC_DENIED
        assert produce(b, public) == 0 and fetch(b, public) == 0
        named = metadata(b, [private, public]).topics
        assert {(t.name, t.error_code) for t in named} == {(private, TOPIC_DENIED), (public, 0)}
        assert [t.partitions for t in named if t.name == private] == [[]]
        listed = {t.name for t in metadata(b, None).topics}
        assert public in listed and private not in listed
        offsets = request(b, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": private, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                              "timestamp": -1}]}], "timeout_ms": 0})
        assert offsets.topics[0].partitions[0].error_code == TOPIC_DENIED
        # unknown topics: authorization comes first, so a denied one is 29, never 3
        assert create_acls(b, (TOPIC, "nope-", PREFIXED, "User:alice", "*", ALL, ALLOW)) == [0]
        assert metadata(b, ["nope-1"]).topics[0].error_code == TOPIC_DENIED
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=5000)
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send(private, b"x").get(10)
        finally:
            producer.close(5)
    finally:
        b.close()


def test_deny_overrides_allow_and_prefixed_patterns(tmp_path):
    b = acl_broker(tmp_path)
    try:
        prefix = unique("app") + "-"
        open_topic, closed_topic = prefix + "open", prefix + "closed"
        assert create_topic(b, open_topic) == 0 and create_topic(b, closed_topic) == 0
        assert create_acls(b, (TOPIC, prefix, PREFIXED, "User:*", "*", ALL, ALLOW),
                           (TOPIC, closed_topic, LITERAL, ANON, "*", WRITE, DENY)) == [0, 0]
        assert produce(b, open_topic) == 0
        assert produce(b, closed_topic) == TOPIC_DENIED
        assert fetch(b, closed_topic) == 0  # the DENY names WRITE only
        assert metadata(b, [closed_topic]).topics[0].error_code == 0
    finally:
        b.close()


def test_group_acls_deny_commit_join_and_describe(tmp_path):
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    b = acl_broker(tmp_path)
    try:
        topic, group, open_group = unique("t"), unique("g"), unique("g")
        assert create_topic(b, topic) == 0 and produce(b, topic) == 0
        assert create_acls(b, (GROUP, group, LITERAL, ANON, "*", READ, DENY),
                           (GROUP, group, LITERAL, ANON, "*", DESCRIBE, ALLOW)) == [0, 0]
        assert commit(b, group, topic) == GROUP_DENIED
        assert commit(b, open_group, topic) == 0
        described = request(b, 15, 5, {"groups": [group, open_group], "include_authorized_operations": True})
        ops = {g.group_id: (g.error_code, g.authorized_operations) for g in described.groups}
        assert ops[group] == (0, 1 << DESCRIBE)
        assert ops[open_group][0] == 0 and ops[open_group][1] & (1 << READ)
        listed = {g.group_id for g in request(b, 16, 4, {"states_filter": []}).groups}
        assert open_group in listed  # the denied commit never made the other group
        consumer = KafkaConsumer(topic, group_id=group, bootstrap_servers=b.bootstrap_servers,
                                 auto_offset_reset="earliest", consumer_timeout_ms=5000)
        try:
            with pytest.raises(GroupAuthorizationFailedError):
                consumer.poll(timeout_ms=5000)
                consumer.poll(timeout_ms=5000)
        finally:
            consumer.close(autocommit=False)
        # without DESCRIBE on the cluster and on a group, the group disappears from ListGroups and
        # FindCoordinator refuses it
        assert create_acls(b, (GROUP, open_group, LITERAL, "User:bob", "*", ALL, ALLOW),
                           (CLUSTER, "kafka-cluster", LITERAL, ANON, "*", ALTER, ALLOW),
                           (CLUSTER, "kafka-cluster", LITERAL, ANON, "*", DESCRIBE, DENY)) == [0, 0, 0]
        listed = {g.group_id for g in request(b, 16, 4, {"states_filter": []}).groups}
        assert open_group not in listed
        found = request(b, 10, 4, {"key_type": 0, "coordinator_keys": [open_group, group]})
        assert {c.key: c.error_code for c in found.coordinators} == {open_group: GROUP_DENIED, group: 0}
    finally:
        b.close()


def test_super_users_are_never_denied(tmp_path):
    from kafka import KafkaProducer

    b = acl_broker(tmp_path, super_users=f"User:admin;{ANON}", allow_everyone_if_no_acl_found="false")
    try:
        topic = unique("t")
        assert create_acls(b, (TOPIC, topic, LITERAL, ANON, "*", ALL, DENY),
                           (CLUSTER, "kafka-cluster", LITERAL, "User:*", "*", ALL, DENY)) == [0, 0]
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
        producer.send(topic, b"hello").get(10)
        producer.close(5)
        consumer = kafka_python_subscriber(topic, group_id=unique("g"), bootstrap_servers=b.bootstrap_servers,
                                           auto_offset_reset="earliest", consumer_timeout_ms=10000)
        try:
            assert [m.value for m in consumer][:1] == [b"hello"]
            consumer.commit()
        finally:
            consumer.close()
    finally:
        b.close()


def test_allow_everyone_both_ways(tmp_path):
    """true: a resource no ACL names is open; false: it is closed, and ACLs written while open
    (and surviving the restart) grant exactly what they say."""
    topic, granted = unique("t"), unique("granted")
    b = acl_broker(tmp_path)
    try:
        assert create_topic(b, topic) == 0 and produce(b, topic) == 0 and create_topic(b, granted) == 0
        assert create_acls(b, (TOPIC, granted, LITERAL, ANON, "*", WRITE, ALLOW),
                           (CLUSTER, "kafka-cluster", LITERAL, ANON, "*", DESCRIBE, ALLOW)) == [0, 0]
    finally:
        b.close()
    b = acl_broker(tmp_path, allow_everyone_if_no_acl_found="false")
    try:
        assert produce(b, topic) == TOPIC_DENIED and fetch(b, topic) == TOPIC_DENIED
        assert produce(b, granted) == 0
        assert fetch(b, granted) == TOPIC_DENIED  # WRITE does not grant READ
        assert {t.name for t in metadata(b, None).topics} == {granted}  # WRITE implies DESCRIBE
        assert create_acls(b, (TOPIC, "x", LITERAL, ANON, "*", READ, ALLOW)) == [CLUSTER_DENIED]
        described = request(b, 29, 1, {"resource_type_filter": ANY, "resource_name_filter": None,
                                       "pattern_type_filter": ANY, "principal_filter": None,
                                       "host_filter": None, "operation": ANY, "permission_type": ANY})
        assert described.error_code == 0 and len(described.resources) == 2  # DESCRIBE on the cluster
        assert create_topic(b, unique("new")) == TOPIC_DENIED
        assert commit(b, unique("g"), granted) == GROUP_DENIED
        # an idempotent producer may start: it may WRITE some topic
        assert request(b, 22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                  "producer_id": -1, "producer_epoch": -1}).error_code == 0
        cluster = request(b, 60, 0, {"include_cluster_authorized_operations": True})
        assert cluster.cluster_authorized_operations == 1 << DESCRIBE
        ops = metadata(b, [granted], include_topic_authorized_operations=True).topics[0]
        assert ops.topic_authorized_operations == (1 << WRITE) | (1 << DESCRIBE)
    finally:
        b.close()


def test_idempotent_producer_needs_idempotent_write_or_some_topic_write(tmp_path):
    b = acl_broker(tmp_path, allow_everyone_if_no_acl_found="false", super_users="User:admin")
    try:
        r = request(b, 22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                               "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == CLUSTER_DENIED
        r = request(b, 22, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000,
                               "producer_id": -1, "producer_epoch": -1})
        assert r.error_code == TXN_DENIED
    finally:
        b.close()


def test_unknown_authorizer_class_stops_start_up(tmp_path):
    from odradek.broker.config import ConfigError

    with pytest.raises(ConfigError, match="authorizer.class.name"):
        ThreadedBroker(tmp_path, overrides={"authorizer.class.name": "com.example.Custom"}).start()


def test_auto_create_needs_create_on_the_cluster_or_the_topic(tmp_path):
    b = acl_broker(tmp_path)
    try:
        prefix = unique("auto") + "-"
        # ANONYMOUS may ALTER the cluster (to keep managing ACLs) but not CREATE on it
        assert create_acls(b, (CLUSTER, "kafka-cluster", LITERAL, ANON, "*", ALTER, ALLOW),
                           (TOPIC, prefix, PREFIXED, ANON, "*", DESCRIBE, ALLOW)) == [0, 0]
        asked = metadata(b, [prefix + "a"], allow_auto_topic_creation=True).topics[0]
        assert asked.error_code == TOPIC_DENIED and b.app.topics.get(prefix + "a") is None
        assert create_topic(b, prefix + "b") == TOPIC_DENIED
        assert create_acls(b, (TOPIC, prefix, PREFIXED, ANON, "*", CREATE, ALLOW)) == [0]
        asked = metadata(b, [prefix + "a"], allow_auto_topic_creation=True).topics[0]
        assert asked.error_code == 0 and len(asked.partitions) == 1
        assert create_topic(b, prefix + "b") == 0
    finally:
        b.close()


def test_fetch_answers_denied_topics_beside_allowed_ones(tmp_path):
    b = acl_broker(tmp_path)
    try:
        ok_topic, no_topic = unique("ok"), unique("no")
        for t in (ok_topic, no_topic):
            assert create_topic(b, t) == 0 and produce(b, t) == 0
        assert create_acls(b, (TOPIC, no_topic, LITERAL, ANON, "*", READ, DENY)) == [0]
        r = request(b, 1, 12, {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                               "session_id": 0, "session_epoch": -1, "topics": [
                                   {"topic": t, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                "partition_max_bytes": 1 << 20}]}
                                   for t in (no_topic, ok_topic)], "forgotten_topics_data": [], "rack_id": ""})
        got = {t.topic: (t.partitions[0].error_code, bool(t.partitions[0].records)) for t in r.responses}
        assert got == {no_topic: (TOPIC_DENIED, False), ok_topic: (0, True)}
    finally:
        b.close()


# --- transactions -------------------------------------------------------------------------

TXN_ID = 5
OPERATION_NOT_ATTEMPTED = 55


def init_pid(b, tid: str | None) -> tuple[int, int, int]:
    r = request(b, 22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                           "producer_id": -1, "producer_epoch": -1})
    return r.error_code, r.producer_id, r.producer_epoch


def test_transactional_id_acls(tmp_path):
    """A transactional id with ACLs for someone else: FindCoordinator, InitProducerId, EndTxn and
    DescribeTransactions answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ListTransactions leaves it
    out, and a real client's init_transactions fails with that error; an id with no ACL works."""
    from confluent_kafka import KafkaException, Producer

    b = acl_broker(tmp_path)
    try:
        locked, open_id, topic = unique("locked"), unique("open"), unique("t")
        assert create_topic(b, topic) == 0
        found = request(b, 10, 4, {"key_type": 1, "coordinator_keys": [locked]}).coordinators[0]
        assert found.error_code == 0
        assert init_pid(b, locked)[0] == 0  # no ACL yet: allowed, and the id now exists
        assert create_acls(b, (TXN_ID, locked, LITERAL, "User:alice", "*", ALL, ALLOW)) == [0]
        found = request(b, 10, 4, {"key_type": 1, "coordinator_keys": [locked, open_id]}).coordinators
        assert {c.key: (c.error_code, c.node_id) for c in found} == {locked: (TXN_DENIED, -1),
                                                                    open_id: (0, b.app.node_id)}
        assert init_pid(b, locked)[0] == TXN_DENIED
        end = request(b, 26, 3, {"transactional_id": locked, "producer_id": 0, "producer_epoch": 0,
                                 "committed": False})
        assert end.error_code == TXN_DENIED
        assert init_pid(b, open_id)[0] == 0
        states = request(b, 65, 0, {"transactional_ids": [locked, open_id]}).transaction_states
        assert {s.transactional_id: s.error_code for s in states} == {locked: TXN_DENIED, open_id: 0}
        listed = request(b, 66, 0, {"state_filters": [], "producer_id_filters": []}).transaction_states
        assert {s.transactional_id for s in listed} == {open_id}
        denied = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": locked})
        with pytest.raises(KafkaException) as failed:
            denied.init_transactions(10)
        assert failed.value.args[0].code() == TXN_DENIED
        del denied
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": open_id})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce(topic, b"in a transaction")
        producer.commit_transaction(10)
        producer.flush(5)
        del producer
    finally:
        b.close()


def test_transaction_apis_check_topics_and_groups(tmp_path):
    b = acl_broker(tmp_path)
    try:
        tid, ok_topic, no_topic, no_group = unique("tx"), unique("ok"), unique("no"), unique("g")
        assert create_topic(b, ok_topic) == 0 and create_topic(b, no_topic) == 0
        assert create_acls(b, (TOPIC, no_topic, LITERAL, ANON, "*", WRITE, DENY),
                           (TOPIC, no_topic, LITERAL, ANON, "*", READ, DENY),
                           (GROUP, no_group, LITERAL, ANON, "*", READ, DENY)) == [0, 0, 0]
        code, pid, epoch = init_pid(b, tid)
        assert code == 0
        added = request(b, 24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                   "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [
                                       {"name": no_topic, "partitions": [0]},
                                       {"name": ok_topic, "partitions": [0, 7]}]})
        codes = {(t.name, p.partition_index): p.partition_error_code
                 for t in added.results_by_topic_v3_and_below for p in t.results_by_partition}
        assert codes == {(no_topic, 0): TOPIC_DENIED, (ok_topic, 0): OPERATION_NOT_ATTEMPTED,
                         (ok_topic, 7): 3}
        offsets = request(b, 25, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                     "group_id": no_group})
        assert offsets.error_code == GROUP_DENIED
        committed = request(b, 28, 3, {"transactional_id": tid, "group_id": no_group, "producer_id": pid,
                                       "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                                       "group_instance_id": None, "topics": [
                                           {"name": ok_topic, "partitions": [
                                               {"partition_index": 0, "committed_offset": 0,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert committed.topics[0].partitions[0].error_code == GROUP_DENIED
        producers = request(b, 61, 0, {"topics": [{"name": no_topic, "partition_indexes": [0]},
                                                  {"name": ok_topic, "partition_indexes": [0]}]})
        assert {t.name: t.partitions[0].error_code for t in producers.topics} == {no_topic: TOPIC_DENIED,
                                                                                 ok_topic: 0}
        # a transactional batch needs WRITE on the transactional id
        assert create_acls(b, (TXN_ID, tid, LITERAL, ANON, "*", WRITE, DENY)) == [0]
        r = request(b, 0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": ok_topic, "partition_data": [{"index": 0, "records": encode_batch([(None, b"v")])}]}]})
        assert r.responses[0].partition_responses[0].error_code == TXN_DENIED
    finally:
        b.close()


def test_scram_credential_apis_need_the_cluster(tmp_path):
    b = acl_broker(tmp_path, allow_everyone_if_no_acl_found="false")
    try:
        assert request(b, 50, 0, {"users": None}).error_code == CLUSTER_DENIED
        altered = request(b, 51, 0, {"deletions": [], "upsertions": [
            {"name": "alice", "mechanism": 1, "iterations": 4096, "salt": b"salt", "salted_password": b"x" * 32}]})
        assert [r.error_code for r in altered.results] == [CLUSTER_DENIED]
    finally:
        b.close()
    b = acl_broker(tmp_path, allow_everyone_if_no_acl_found="false", super_users=ANON)
    try:
        assert request(b, 50, 0, {"users": None}).error_code == 0
    finally:
        b.close()


def test_unknown_codes_in_acl_requests_are_refused_not_fatal(tmp_path):
    b = acl_broker(tmp_path)
    try:
        assert create_acls(b, (99, "t", LITERAL, ANON, "*", READ, ALLOW), (TOPIC, "t", 99, ANON, "*", READ, ALLOW),
                           (TOPIC, "t", LITERAL, ANON, "*", 99, ALLOW),
                           (TOPIC, "t", LITERAL, ANON, "*", READ, -5)) == [INVALID_REQUEST] * 4
        bad = {"resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": 77,
               "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}
        assert request(b, 29, 2, bad).error_code == INVALID_REQUEST
        assert [f.error_code for f in request(b, 31, 2, {"filters": [bad]}).filter_results] == [INVALID_REQUEST]
        assert b.app.authorizer.acls.acls() == []
        assert produce(b, unique("still-serving")) == 0
    finally:
        b.close()


def test_without_an_authorizer_the_cluster_bit_field_holds_every_cluster_operation(broker):
    """As Kafka without an authorizer: everything the cluster supports, when asked (was never filled)."""
    everything = sum(1 << op for op in (CREATE, 9, 10, 11, IDEMPOTENT_WRITE, ALTER, DESCRIBE))
    assert request(broker, 60, 0, {"include_cluster_authorized_operations": True}
                   ).cluster_authorized_operations == everything
    assert request(broker, 60, 0, {"include_cluster_authorized_operations": False}
                   ).cluster_authorized_operations == -2147483648
    asked = metadata(broker, [], version=10, include_cluster_authorized_operations=True)
    assert asked.cluster_authorized_operations == everything


def test_every_api_answers_kafkas_denial_to_a_principal_with_no_rights(tmp_path):
    """allow.everyone.if.no.acl.found=false and no ACL: each API's denial where Kafka puts it,
    and nothing changes (the topic and the group made beforehand are untouched)."""
    topic, group = unique("t"), unique("g")
    b = acl_broker(tmp_path)
    try:
        assert create_topic(b, topic) == 0 and produce(b, topic) == 0 and commit(b, group, topic) == 0
    finally:
        b.close()
    b = acl_broker(tmp_path, allow_everyone_if_no_acl_found="false")
    try:
        part = {"partition_index": 0}
        assert {t.name for t in metadata(b, None).topics} == set()
        assert request(b, 2, 7, {"replica_id": -1, "isolation_level": 0, "timeout_ms": 0, "topics": [
            {"name": topic, "partitions": [{**part, "current_leader_epoch": -1, "timestamp": -1}]}]}
        ).topics[0].partitions[0].error_code == TOPIC_DENIED
        assert request(b, 9, 7, {"group_id": group, "topics": None, "require_stable": False}
                       ).error_code == GROUP_DENIED
        assert request(b, 9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False}
                       ).groups[0].error_code == GROUP_DENIED
        assert request(b, 10, 3, {"key": group, "key_type": 0}).error_code == GROUP_DENIED
        joined = request(b, 11, 5, {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                    "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                    "protocols": [{"name": "range", "metadata": b""}]})
        assert joined.error_code == GROUP_DENIED
        assert request(b, 12, 4, {"group_id": group, "generation_id": 1, "member_id": "m",
                                  "group_instance_id": None}).error_code == GROUP_DENIED
        assert request(b, 15, 5, {"groups": [group], "include_authorized_operations": True}
                       ).groups[0].error_code == GROUP_DENIED
        assert request(b, 16, 4, {"states_filter": []}).groups == []
        assert request(b, 42, 2, {"groups_names": [group]}).results[0].error_code == GROUP_DENIED
        assert request(b, 47, 0, {"group_id": group, "topics": [{"name": topic, "partitions": [part]}]}
                       ).error_code == GROUP_DENIED
        deleted = request(b, 20, 4, {"topic_names": [topic], "timeout_ms": 5000}).responses[0]
        assert (deleted.name, deleted.error_code) == (topic, TOPIC_DENIED)
        assert request(b, 21, 2, {"topics": [{"name": topic, "partitions": [{**part, "offset": 1}]}],
                                  "timeout_ms": 5000}).topics[0].partitions[0].error_code == TOPIC_DENIED
        assert request(b, 23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
        ).topics[0].partitions[0].error_code == TOPIC_DENIED
        configs = request(b, 32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                    "configuration_keys": None},
                                                   {"resource_type": 4, "resource_name": "1",
                                                    "configuration_keys": None},
                                                   {"resource_type": 16, "resource_name": "cm",  # client metrics
                                                    "configuration_keys": None}],
                                     "include_synonyms": False, "include_documentation": False}).results
        assert {r.resource_type: r.error_code for r in configs} == {2: TOPIC_DENIED, 4: CLUSTER_DENIED,
                                                                      16: CLUSTER_DENIED}
        altered = request(b, 44, 1, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}, {
            "resource_type": 16, "resource_name": "cm", "configs": [
                {"name": "metrics", "config_operation": 0, "value": "*"}]}], "validate_only": False})
        assert [r.error_code for r in altered.responses] == [TOPIC_DENIED, CLUSTER_DENIED]
        grown = request(b, 37, 3, {"topics": [{"name": topic, "count": 3, "assignments": None}],
                                   "timeout_ms": 5000, "validate_only": False})
        assert grown.results[0].error_code == TOPIC_DENIED
        assert request(b, 43, 2, {"election_type": 0, "topic_partitions": None, "timeout_ms": 1000}
                       ).error_code == CLUSTER_DENIED
        assert request(b, 35, 4, {"topics": None}).error_code == CLUSTER_DENIED
        moved = request(b, 45, 1, {"timeout_ms": 1000, "allow_replication_factor_change": True, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
        assert (moved.error_code, moved.responses[0].partitions[0].error_code) == (CLUSTER_DENIED, CLUSTER_DENIED)
        assert request(b, 46, 0, {"timeout_ms": 1000, "topics": None}).error_code == CLUSTER_DENIED
        moved = request(b, 34, 2, {"dirs": [{"path": "/nowhere", "topics": [{"name": topic, "partitions": [0]}]}]})
        assert [(t.topic_name, [p.error_code for p in t.partitions]) for t in moved.results] == [
            (topic, [CLUSTER_DENIED])]
        listed = request(b, 74, 1, {"resource_types": []})
        assert (listed.error_code, list(listed.config_resources)) == (CLUSTER_DENIED, [])
        loggers = request(b, 32, 4, {"resources": [{"resource_type": 8, "resource_name": "1",
                                                    "configuration_keys": None}],
                                     "include_synonyms": False, "include_documentation": False}).results
        assert [r.error_code for r in loggers] == [CLUSTER_DENIED]
        altered = request(b, 44, 1, {"resources": [{"resource_type": 8, "resource_name": "1", "configs": [
            {"name": "root", "config_operation": 0, "value": "DEBUG"}]}], "validate_only": False})
        assert [r.error_code for r in altered.responses] == [CLUSTER_DENIED]
        described = request(b, 75, 0, {"topics": [{"name": topic}], "response_partition_limit": 10,
                                       "cursor": None}).topics[0]
        assert described.error_code == TOPIC_DENIED
        assert request(b, 75, 0, {"topics": [], "response_partition_limit": 10, "cursor": None}).topics == []
        assert request(b, 60, 0, {"include_cluster_authorized_operations": True}
                       ).cluster_authorized_operations == 0
        # nothing changed underneath
        assert b.app.topics.get(topic).partitions == 1
    finally:
        b.close()
    b = acl_broker(tmp_path)
    try:
        assert fetch(b, topic) == 0
        fetched = request(b, 9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": False})
        assert [p.committed_offset for t in fetched.groups[0].topics for p in t.partitions] == [1]
    finally:
        b.close()


def test_reset_keeps_the_acls(tmp_path):
    b = acl_broker(tmp_path)
    try:
        assert create_acls(b, (TOPIC, "kept", LITERAL, "User:alice", "*", READ, ALLOW)) == [0]
        b.control("reset")
        assert [a.resource_name for a in b.app.authorizer.acls.acls()] == ["kept"]
        assert produce(b, "kept") == TOPIC_DENIED
    finally:
        b.close()
