"""ACLs with authenticated principals: real clients log in over SASL_PLAINTEXT (PLAIN) as
different users and meet Kafka's authorization: a topic with ACLs denies a principal
without them (produce, fetch, commit, describe) and allows the one granted; DENY overrides
ALLOW; prefixed patterns; super users; ``allow.everyone.if.no.acl.found`` both ways.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def sasl_broker(tmp_path, allow_everyone: bool = False) -> ThreadedBroker:
    return ThreadedBroker(tmp_path, overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": str(allow_everyone).lower(),
    }).start()


def kp(user: str) -> dict:
    """kafka-python settings for ``user``."""
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def ck(b, user: str, **extra) -> dict:
    """confluent-kafka settings for ``user``."""
    return {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user], **extra}


@pytest.fixture
def admin_of():
    """An admin client (kafka-python) for a user, closed at the end."""
    opened = []

    def make(b, user: str = "admin"):
        from kafka.admin import KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp(user))
        opened.append(client)
        return client
    yield make
    for client in opened:
        client.close()


def grant(admin, *acls: tuple) -> None:
    """Each acl: (principal, operation, permission, resource type, name[, pattern])."""
    from kafka.admin import ACL, ACLResourcePatternType, ResourcePattern

    made = [ACL(principal, "*", op, perm,
                ResourcePattern(rtype, name, pattern[0] if pattern else ACLResourcePatternType.LITERAL))
            for principal, op, perm, rtype, name, *pattern in acls]
    result = admin.create_acls(made)
    assert result["failed"] == [] and len(result["succeeded"]) == len(made)


def group_ids(admin) -> set[str]:
    return {g["group_id"] if isinstance(g, dict) else g[0] for g in admin.list_groups()}


def produce(b, user: str, topic: str, value: bytes = b"v") -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=5000, **kp(user))
    try:
        producer.send(topic, value).get(10)
    finally:
        producer.close(5)


def fetch_code(b, user: str, topic: str) -> int:
    """The error code of a raw Fetch v12 of partition 0, authenticated as ``user``."""
    with SyncClient("127.0.0.1", b.app.endpoint.port, sasl_plain=(user, USERS[user])) as c:
        r = c.request(1, 12, {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                              "session_id": 0, "session_epoch": -1, "topics": [
                                  {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                   "partition_max_bytes": 1 << 20}]}],
                              "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0].error_code


def consume_one(b, user: str, topic: str, group: str) -> bytes:
    """Subscribe with a group, read one record, commit it."""
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer(ck(b, user, **{"group.id": group, "auto.offset.reset": "earliest",
                                       "enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        for _ in range(20):
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            consumer.commit(msg, asynchronous=False)
            return msg.value()
        raise AssertionError("no record within 20 s")
    finally:
        consumer.close()


def test_topic_with_acls_denies_other_principals_and_allows_the_granted_one(tmp_path, admin_of):
    from confluent_kafka import KafkaException
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType
    from kafka.errors import TopicAuthorizationFailedError

    b = sasl_broker(tmp_path)
    try:
        topic, group = unique("orders"), unique("billing")
        admin = admin_of(b)
        grant(admin, ("User:alice", ACLOperation.ALL, ACLPermissionType.ALLOW, ResourceType.TOPIC, topic),
              ("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.GROUP, group))
        produce(b, "alice", topic, b"for alice")
        assert consume_one(b, "alice", topic, group) == b"for alice"
        with pytest.raises(TopicAuthorizationFailedError):
            produce(b, "bob", topic)
        assert fetch_code(b, "bob", topic) == 29 and fetch_code(b, "alice", topic) == 0
        with pytest.raises(KafkaException) as denied:  # a group of his own: still no topic
            consume_one(b, "bob", topic, unique("bob-group"))
        assert denied.value.args[0].code() in (29, 30)
        # bob can describe neither the topic nor alice's group
        bob = admin_of(b, "bob")
        assert topic not in bob.list_topics()
        assert group not in group_ids(bob)
        assert group in group_ids(admin)
    finally:
        b.close()


def test_commit_needs_read_on_the_group(tmp_path, admin_of):
    from confluent_kafka import KafkaException
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType

    b = sasl_broker(tmp_path)
    try:
        topic, group = unique("t"), unique("g")
        admin = admin_of(b)
        grant(admin, ("User:alice", ACLOperation.ALL, ACLPermissionType.ALLOW, ResourceType.TOPIC, topic),
              ("User:bob", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, topic))
        produce(b, "alice", topic)
        with pytest.raises(KafkaException) as denied:
            consume_one(b, "bob", topic, group)  # READ on the topic, nothing on the group
        assert denied.value.args[0].code() == 30
    finally:
        b.close()


def test_deny_overrides_allow_and_prefixed_patterns(tmp_path, admin_of):
    from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourceType
    from kafka.errors import TopicAuthorizationFailedError

    b = sasl_broker(tmp_path)
    try:
        prefix = unique("team") + "-"
        admin = admin_of(b)
        # WRITE for everyone under the prefix, and CREATE so that producing creates the topics
        grant(admin, ("User:*", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, prefix,
                      ACLResourcePatternType.PREFIXED),
              ("User:*", ACLOperation.CREATE, ACLPermissionType.ALLOW, ResourceType.TOPIC, prefix,
               ACLResourcePatternType.PREFIXED),
              ("User:bob", ACLOperation.WRITE, ACLPermissionType.DENY, ResourceType.TOPIC, prefix + "secret"))
        produce(b, "alice", prefix + "secret")
        produce(b, "bob", prefix + "public")
        with pytest.raises(TopicAuthorizationFailedError):
            produce(b, "bob", prefix + "secret")
        with pytest.raises(TopicAuthorizationFailedError):
            produce(b, "alice", unique("elsewhere"))  # outside the prefix, no ACL, allow-everyone off
    finally:
        b.close()


def test_super_users_ignore_deny(tmp_path, admin_of):
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType

    b = sasl_broker(tmp_path)
    try:
        topic = unique("t")
        grant(admin_of(b), ("User:*", ACLOperation.ALL, ACLPermissionType.DENY, ResourceType.TOPIC, "*"))
        produce(b, "admin", topic, b"admin writes")
        assert consume_one(b, "admin", topic, unique("g")) == b"admin writes"
    finally:
        b.close()


@pytest.mark.parametrize("allow_everyone", [True, False])
def test_allow_everyone_if_no_acl_found(tmp_path, admin_of, allow_everyone):
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType
    from kafka.errors import TopicAuthorizationFailedError

    b = sasl_broker(tmp_path, allow_everyone=allow_everyone)
    try:
        free, owned = unique("free"), unique("owned")
        grant(admin_of(b), ("User:alice", ACLOperation.ALL, ACLPermissionType.ALLOW, ResourceType.TOPIC, owned))
        if allow_everyone:
            produce(b, "bob", free)  # no ACL names it (auto-created: CREATE on the cluster is open too)
        else:
            with pytest.raises(TopicAuthorizationFailedError):
                produce(b, "bob", free)
        with pytest.raises(TopicAuthorizationFailedError):
            produce(b, "bob", owned)  # named by an ACL: closed to bob either way
        produce(b, "alice", owned)
    finally:
        b.close()


def test_describe_acls_by_principal_with_confluent_admin(tmp_path, admin_of):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    b = sasl_broker(tmp_path)
    try:
        admin = AdminClient(ck(b, "admin"))
        acls = [AclBinding(ResourceType.TOPIC, unique("t"), ResourcePatternType.LITERAL, f"User:{u}", "*",
                           AclOperation.READ, AclPermissionType.ALLOW) for u in ("alice", "bob")]
        for f in admin.create_acls(acls, request_timeout=10).values():
            assert f.result(10) is None
        only_bob = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
        assert [a.principal for a in admin.describe_acls(only_bob, request_timeout=10).result(10)] == ["User:bob"]
        # bob may not describe ACLs: that needs DESCRIBE on the cluster (kafka-python raises the
        # top-level error; librdkafka 2.16 hands back an empty list)
        from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType
        from kafka.admin import ResourcePatternFilter as KpPatternFilter
        from kafka.admin import ResourceType as KpResourceType
        from kafka.errors import ClusterAuthorizationFailedError

        with pytest.raises(ClusterAuthorizationFailedError):
            admin_of(b, "bob").describe_acls(ACLFilter(
                "User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                KpPatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        b.close()


async def test_aiokafka_producer_and_consumer_meet_the_acls(tmp_path):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType

    def settings(user: str) -> dict:
        return {"bootstrap_servers": b.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": USERS[user]}

    b = sasl_broker(tmp_path)
    try:
        topic = unique("t")
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp("admin"))
        grant(admin, ("User:alice", ACLOperation.ALL, ACLPermissionType.ALLOW, ResourceType.TOPIC, topic))
        admin.close()
        producer = AIOKafkaProducer(**settings("alice"))
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from aiokafka")
        finally:
            await producer.stop()
        for user, allowed in (("alice", True), ("bob", False)):
            consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings(user))
            try:
                if allowed:
                    await consumer.start()
                    got = await consumer.getmany(timeout_ms=10000)
                    assert [m.value for batch in got.values() for m in batch] == [b"from aiokafka"]
                else:
                    with pytest.raises(TopicAuthorizationFailedError):  # its metadata is refused
                        await consumer.start()
            finally:
                await consumer.stop()
    finally:
        b.close()


def test_scram_user_made_with_the_admin_api_gets_exactly_its_acls(tmp_path, admin_of):
    """The principal of a SCRAM login is ``User:<name>`` too: carol, created through
    AlterUserScramCredentials by the super user, may write where an ACL says and nowhere else."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType

    b = ThreadedBroker(tmp_path, overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS, "authorizer.class.name": STANDARD,
        "super.users": "User:admin"}).start()
    try:
        mine, theirs = unique("carol"), unique("alice")
        admin = AdminClient(ck(b, "admin"))
        made = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret", b"carol-salt")])
        assert made["carol"].result(10) is None
        grant(admin_of(b), ("User:carol", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, mine),
              ("User:carol", ACLOperation.CREATE, ACLPermissionType.ALLOW, ResourceType.TOPIC, mine),
              ("User:alice", ACLOperation.ALL, ACLPermissionType.ALLOW, ResourceType.TOPIC, theirs))
        carol = {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol", "sasl.password": "carol-secret"}
        reports: list = []
        producer = Producer({**carol, "on_delivery": lambda err, msg: reports.append((msg.topic(), err))})
        producer.produce(mine, b"carol's")
        producer.produce(theirs, b"not carol's")
        assert producer.flush(30) == 0
        outcome = {t: (e.code() if e else None) for t, e in reports}
        assert outcome == {mine: None, theirs: KafkaError.TOPIC_AUTHORIZATION_FAILED}
    finally:
        b.close()


def test_authorized_operations_as_confluents_describe_operations_test(tmp_path, admin_of):
    """confluent-kafka's ``test_describe_operations``: with allow-everyone on, a user may do
    everything on a topic, group and the cluster; one ALLOW READ for the user on the topic
    leaves READ and DESCRIBE only."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType

    b = sasl_broker(tmp_path, allow_everyone=True)
    try:
        topic, group = unique("t"), unique("g")
        produce(b, "alice", topic)
        consume_one(b, "alice", topic, group)
        alice = AdminClient(ck(b, "alice"))

        def topic_ops() -> set:
            described = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
            return set(described[topic].result(10).authorized_operations)
        assert topic_ops() == {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                               AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                               AclOperation.ALTER_CONFIGS}
        groups = alice.describe_consumer_groups([group], include_authorized_operations=True)
        assert {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE} <= set(
            groups[group].result(10).authorized_operations)
        cluster = alice.describe_cluster(include_authorized_operations=True).result(10)
        assert AclOperation.ALTER in set(cluster.authorized_operations)
        grant(admin_of(b), ("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, topic))
        assert topic_ops() == {AclOperation.READ, AclOperation.DESCRIBE}
    finally:
        b.close()


def test_offset_commit_and_fetch_v10_resolve_topic_ids_before_the_acls(tmp_path, admin_of):
    """Kafka's handleOffsetCommitRequest / fetchOffsetsForGroup: an id no topic has is UNKNOWN_TOPIC_ID (never an ACL
    error), a topic without READ is TOPIC_AUTHORIZATION_FAILED, answered under its id."""
    from kafka.admin import ACLOperation, ACLPermissionType, ResourceType

    b = sasl_broker(tmp_path)
    try:
        readable, hidden, group = unique("t"), unique("t"), unique("g")
        grant(admin_of(b), ("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, readable),
              ("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.GROUP, group))
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            c.authenticate_plain("admin", USERS["admin"])
            for name in (readable, hidden):
                assert c.request(19, 5, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": -1,
                                                     "assignments": [], "configs": []}],
                                         "timeout_ms": 5000, "validate_only": False}).topics[0].error_code == 0
            md = c.request(3, 12, {"topics": [{"name": readable}, {"name": hidden}],
                                   "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            ids = {t.name: t.topic_id for t in md.topics}
        unknown = uuid.uuid4()
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            c.authenticate_plain("alice", USERS["alice"])
            r = c.request(8, 10, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                  "group_instance_id": None, "topics": [
                                      {"topic_id": tid, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                        "committed_leader_epoch": -1,
                                                                        "committed_metadata": None}]}
                                      for tid in (ids[readable], unknown, ids[hidden])]})
            fetched = c.request(9, 10, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                    "topics": [{"topic_id": tid, "partition_indexes": [0]}
                                                               for tid in (ids[readable], unknown, ids[hidden])]}],
                                        "require_stable": False}).groups[0]
        assert {t.topic_id: t.partitions[0].error_code for t in r.topics} == {
            ids[readable]: 0, unknown: 100, ids[hidden]: 29}
        assert {t.topic_id: (t.partitions[0].error_code, t.partitions[0].committed_offset)
                for t in fetched.topics} == {ids[readable]: (0, 0), unknown: (100, -1), ids[hidden]: (29, -1)}
    finally:
        b.close()


def test_fetch_v16_by_topic_id_checks_read_on_every_partition_it_reads(tmp_path, admin_of):
    """Kafka's handleFetchRequest: ids are resolved first (an unknown one is UNKNOWN_TOPIC_ID, never an ACL
    error), a topic without READ is TOPIC_AUTHORIZATION_FAILED with the top-level code 0, and an incremental
    fetch checks the session's cached partitions too: READ revoked after the session opened refuses them."""
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    b = sasl_broker(tmp_path)
    try:
        readable, hidden = unique("t"), unique("t")
        admin = admin_of(b)
        read = ("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, readable)
        grant(admin, read)
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            c.authenticate_plain("admin", USERS["admin"])
            for name in (readable, hidden):
                assert c.request(19, 5, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": -1,
                                                     "assignments": [], "configs": []}],
                                         "timeout_ms": 5000, "validate_only": False}).topics[0].error_code == 0
            md = c.request(3, 12, {"topics": [{"name": readable}, {"name": hidden}],
                                   "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
            ids = {t.name: t.topic_id for t in md.topics}
        unknown = uuid.uuid4()

        def fetch(c, topic_ids, session_id=0, epoch=0):
            return c.request(1, 16, {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                                     "session_id": session_id, "session_epoch": epoch, "rack_id": "",
                                     "forgotten_topics_data": [], "topics": [
                                         {"topic_id": tid, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                           "partition_max_bytes": 1 << 20}]}
                                         for tid in topic_ids]})

        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            c.authenticate_plain("alice", USERS["alice"])
            r = fetch(c, [ids[readable], unknown, ids[hidden]])
            assert r.error_code == 0 and r.session_id != 0
            assert {t.topic_id: t.partitions[0].error_code for t in r.responses} == {
                ids[readable]: 0, unknown: 100, ids[hidden]: 29}
            rule = ACLFilter(read[0], "*", read[1], read[2], ResourcePattern(read[3], read[4]))
            admin.delete_acls([rule])
            again = fetch(c, [], r.session_id, 1)  # names nothing: the session's partitions are read
            assert {t.topic_id: t.partitions[0].error_code for t in again.responses} == {
                ids[readable]: 29, unknown: 100, ids[hidden]: 29}
    finally:
        b.close()
