"""Share groups (KIP-932) on the group coordinator's side, raw over TCP: ShareGroupHeartbeat v1 and
ShareGroupDescribe v1 as Kafka 4.2 answers them -- join, the two-heartbeat initialization of
share-partitions, sharing, leave, session expiry on the broker clock, Kafka's error codes for bad
requests, group ids of another kind, ListGroups/DeleteGroups/offset APIs on a share group, gating,
test control, and the state after a restart equal to the live one."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E
from odradek.shares.records import STATE_TOPIC
from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import create_topic_kafka_python

pytestmark = pytest.mark.integration

HEARTBEAT, DESCRIBE = 76, 77


def hb(group: str, member: str, epoch: int, topics: list[str] | None = None, rack: str | None = None) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack,
            "subscribed_topic_names": topics}


def describe(c: SyncClient, *groups: str, ops: bool = False) -> list:
    return c.request(DESCRIBE, 1, {"group_ids": list(groups), "include_authorized_operations": ops}).groups


def parts(r) -> set[int]:
    return {p for tp in r.assignment.topic_partitions for p in tp.partitions}


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    with ThreadedBroker(tmp_path_factory.mktemp("share-groups"),
                        overrides={"group.share.max.size": 3}) as b:
        yield b


@pytest.fixture
def topic(kbroker):
    name = f"t-{uuid.uuid4().hex[:8]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, name, 4)
    return name


def client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def join(c: SyncClient, group: str, member: str, topic: str):
    """Join, then heartbeat once more: the second answer carries the initialized partitions."""
    first = c.request(HEARTBEAT, 1, hb(group, member, 0, [topic]))
    assert first.error_code == E.NONE, first
    second = c.request(HEARTBEAT, 1, hb(group, member, first.member_epoch))
    assert second.error_code == E.NONE, second
    return first, second


def test_join_initializes_share_partitions_then_assigns_them(kbroker, topic):
    with client(kbroker) as c:
        first, second = join(c, "sg-join", "m1", topic)
        assert (first.member_id, first.member_epoch, first.heartbeat_interval_ms) == ("m1", 1, 5000)
        assert first.assignment.topic_partitions == []  # nothing initialized yet
        assert second.member_epoch == 2 and parts(second) == {0, 1, 2, 3}
        steady = c.request(HEARTBEAT, 1, hb("sg-join", "m1", 2))
        assert (steady.error_code, steady.member_epoch, steady.assignment) == (E.NONE, 2, None)
        [d] = describe(c, "sg-join")
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
            E.NONE, "Stable", 2, 2, "simple")
        [m] = d.members
        assert (m.member_id, m.member_epoch, m.client_host, m.subscribed_topic_names) == ("m1", 2, "/127.0.0.1", [topic])
        assert [(tp.topic_name, sorted(tp.partitions)) for tp in m.assignment.topic_partitions] == [(topic, [0, 1, 2, 3])]
    states = {k for shard in kbroker.app.share_coordinator.shards for k in shard.states if k[0] == "sg-join"}
    assert {p for _g, _t, p in states} == {0, 1, 2, 3}  # a durable snapshot per share-partition


def test_members_split_partitions_and_share_when_more_than_partitions(kbroker, topic):
    with client(kbroker) as c:
        _f, a = join(c, "sg-split", "a", topic)
        b = c.request(HEARTBEAT, 1, hb("sg-split", "b", 0, [topic]))
        a2 = c.request(HEARTBEAT, 1, hb("sg-split", "a", a.member_epoch))
        assert len(parts(b)) == 2 and len(parts(a2)) == 2 and parts(a2) | parts(b) == {0, 1, 2, 3}
        one = f"one-{uuid.uuid4().hex[:6]}"
        create_topic_kafka_python(kbroker.bootstrap_servers, one, 1)
        join(c, "sg-share", "x", one)
        for m in ("y", "z"):
            assert parts(c.request(HEARTBEAT, 1, hb("sg-share", m, 0, [one]))) == {0}  # all three share it


def test_leave_and_session_expiry_bump_the_epoch(kbroker, topic):
    with client(kbroker) as c:
        join(c, "sg-leave", "a", topic)
        b = c.request(HEARTBEAT, 1, hb("sg-leave", "b", 0, [topic]))
        left = c.request(HEARTBEAT, 1, hb("sg-leave", "b", b.member_epoch))
        gone = c.request(HEARTBEAT, 1, hb("sg-leave", "b", -1))
        assert (gone.error_code, gone.member_id, gone.member_epoch) == (E.NONE, "b", -1)
        [d] = describe(c, "sg-leave")
        assert [m.member_id for m in d.members] == ["a"] and d.group_epoch == left.member_epoch + 1
        assert c.request(HEARTBEAT, 1, hb("sg-leave", "b", -1)).error_code == E.UNKNOWN_MEMBER_ID
        kbroker.advance(ms=46_000)  # group.share.session.timeout.ms: a is fenced
        [d] = describe(c, "sg-leave")
        assert (d.group_state, d.members) == ("Empty", [])
        assert c.request(HEARTBEAT, 1, hb("sg-leave", "a", 3)).error_code == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize(("request_", "error"), [
    (hb("g", "m", 0, None), E.INVALID_REQUEST),  # first request without topics
    (hb("g", "m", 0, []), E.INVALID_REQUEST),  # ... or with none
    (hb("g", "m", -2, ["t"]), E.INVALID_REQUEST),
    (hb("g", "m" * 37, 0, ["t"]), E.INVALID_REQUEST),
    (hb("g", "", 0, ["t"]), E.INVALID_REQUEST),
    (hb("g", "  ", 0, ["t"]), E.INVALID_REQUEST),
    (hb(" ", "m", 0, ["t"]), E.INVALID_REQUEST),
    (hb("g", "m", 0, ["t"], rack=" "), E.INVALID_REQUEST),
    (hb("absent", "m", 5, ["t"]), E.GROUP_ID_NOT_FOUND),
    (hb("absent", "m", -1), E.GROUP_ID_NOT_FOUND),
])
def test_bad_requests_get_kafkas_codes(kbroker, request_, error):
    with client(kbroker) as c:
        r = c.request(HEARTBEAT, 1, request_)
        assert (r.error_code, r.assignment) == (error, None)
        assert r.error_message


def test_member_epochs_unknown_members_and_max_size(kbroker, topic):
    with client(kbroker) as c:
        _f, s = join(c, "sg-epochs", "m", topic)
        assert c.request(HEARTBEAT, 1, hb("sg-epochs", "m", s.member_epoch + 1)).error_code == E.FENCED_MEMBER_EPOCH
        assert c.request(HEARTBEAT, 1, hb("sg-epochs", "m", s.member_epoch - 1)).error_code == E.NONE  # previous
        assert c.request(HEARTBEAT, 1, hb("sg-epochs", "other", 5)).error_code == E.UNKNOWN_MEMBER_ID
        rejoin = c.request(HEARTBEAT, 1, hb("sg-epochs", "m", 0, [topic]))  # epoch 0 again: same state
        assert (rejoin.error_code, rejoin.member_epoch, parts(rejoin)) == (E.NONE, s.member_epoch, {0, 1, 2, 3})
        for m in ("b", "c"):
            assert c.request(HEARTBEAT, 1, hb("sg-epochs", m, 0, [topic])).error_code == E.NONE
        full = c.request(HEARTBEAT, 1, hb("sg-epochs", "d", 0, [topic]))
        assert full.error_code == E.GROUP_MAX_SIZE_REACHED


def test_group_ids_of_other_kinds(kbroker, topic):
    with client(kbroker) as c:
        classic = c.request(8, 8, {"group_id": "classic-1", "generation_id_or_member_epoch": -1, "member_id": "",
                                   "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                       {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]}]})
        assert classic.topics[0].partitions[0].error_code == E.NONE
        r = c.request(HEARTBEAT, 1, hb("classic-1", "m", 0, [topic]))
        assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic-1 is not a share group.")
        [d] = describe(c, "classic-1")
        assert (d.error_code, d.error_message, d.group_state) == (
            E.GROUP_ID_NOT_FOUND, "Group classic-1 is not a share group.", "")
        join(c, "sg-kind", "m", topic)
        commit = c.request(8, 9, {"group_id": "sg-kind", "generation_id_or_member_epoch": -1, "member_id": "",
                                  "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                      {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                       "committed_metadata": ""}]}]})
        assert commit.topics[0].partitions[0].error_code == E.GROUP_ID_NOT_FOUND
        fetched = c.request(9, 9, {"groups": [{"group_id": "sg-kind", "member_id": None, "member_epoch": -1,
                                               "topics": None}], "require_stable": False})
        assert fetched.groups[0].error_code == E.GROUP_ID_NOT_FOUND
        cg = c.request(68, 1, {"group_id": "sg-kind", "member_id": "x", "member_epoch": 0, "instance_id": None,
                               "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
                               "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
        assert cg.error_code == E.GROUP_ID_NOT_FOUND
        [v6] = c.request(15, 6, {"groups": ["sg-kind"], "include_authorized_operations": False}).groups
        assert (v6.error_code, v6.error_message, v6.group_state) == (
            E.GROUP_ID_NOT_FOUND, "Group sg-kind is not a classic group.", "Dead")
        [v5] = c.request(15, 5, {"groups": ["sg-kind"], "include_authorized_operations": False}).groups
        assert (v5.error_code, v5.group_state) == (E.NONE, "Dead")
        [cgd] = c.request(69, 1, {"group_ids": ["sg-kind"], "include_authorized_operations": False}).groups
        assert (cgd.error_code, cgd.error_message) == (E.GROUP_ID_NOT_FOUND, "Group sg-kind is not a consumer group.")
        join_group = c.request(11, 9, {"group_id": "sg-kind", "session_timeout_ms": 10000,
                                       "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                                       "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
                                       "reason": None})
        assert (join_group.error_code, join_group.member_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "")
        listed = c.request(16, 5, {"states_filter": [], "types_filter": ["share"]}).groups
        assert ("sg-kind", "share", "Stable", "share") in {(g.group_id, g.protocol_type, g.group_state, g.group_type)
                                                            for g in listed}
        assert "classic-1" not in {g.group_id for g in listed}
        listed = c.request(16, 5, {"states_filter": ["empty"], "types_filter": ["share"]}).groups
        assert "sg-kind" not in {g.group_id for g in listed}


def test_delete_groups_needs_an_empty_group_and_deletes_its_state(kbroker, topic):
    with client(kbroker) as c:
        join(c, "sg-del", "m", topic)
        assert c.request(42, 2, {"groups_names": ["sg-del"]}).results[0].error_code == E.NON_EMPTY_GROUP
        assert c.request(HEARTBEAT, 1, hb("sg-del", "m", -1)).error_code == E.NONE
        assert c.request(42, 2, {"groups_names": ["sg-del"]}).results[0].error_code == E.NONE
        [d] = describe(c, "sg-del")
        assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND, "Group sg-del not found.")
    assert not [k for shard in kbroker.app.share_coordinator.shards for k in shard.states if k[0] == "sg-del"]
    with client(kbroker) as c:  # the id is free again: a new group starts at epoch 1
        assert c.request(HEARTBEAT, 1, hb("sg-del", "n", 0, [topic])).member_epoch == 1


def test_unknown_topics_join_without_partitions_until_created(kbroker):
    name = f"later-{uuid.uuid4().hex[:6]}"
    with client(kbroker) as c:
        r = c.request(HEARTBEAT, 1, hb("sg-later", "m", 0, [name]))
        assert (r.error_code, r.assignment.topic_partitions) == (E.NONE, [])
        create_topic_kafka_python(kbroker.bootstrap_servers, name, 2)
        epoch = r.member_epoch
        for _ in range(3):  # the topic's creation is noticed, initialized, then assigned
            r = c.request(HEARTBEAT, 1, hb("sg-later", "m", epoch))
            epoch = r.member_epoch
        assert parts(c.request(HEARTBEAT, 1, hb("sg-later", "m", 0, [name]))) == {0, 1}


def test_faults_capture_and_reset_reach_share_groups(topic):
    with ThreadedBroker() as b:
        b.wait_loaded()
        create_topic_kafka_python(b.bootstrap_servers, topic, 2)
        b.fault("ShareGroupHeartbeat", error="GROUP_MAX_SIZE_REACHED", group_id="faulted", times=1)
        with client(b) as c:
            assert c.request(HEARTBEAT, 1, hb("faulted", "m", 0, [topic])).error_code == E.GROUP_MAX_SIZE_REACHED
            join(c, "kept", "m", topic)
        [captured] = b.captured("ShareGroupHeartbeat", group_id="kept")[-1:]
        assert captured.answer["member_epoch"] == 2
        b.reset()
        with client(b) as c:
            [d] = describe(c, "kept")
            assert d.error_code == E.GROUP_ID_NOT_FOUND


def test_share_groups_off_answer_unsupported_version_but_stay_listed():
    with ThreadedBroker(overrides={"odradek.initial.features": "share.version=0"}) as b, client(b) as c:
        assert c.request(HEARTBEAT, 1, hb("g", "m", 0, ["t"])).error_code == E.UNSUPPORTED_VERSION
        assert describe(c, "g")[0].error_code == E.UNSUPPORTED_VERSION
        keys = {a.api_key for a in c.request(18, 3, {"client_software_name": "t",
                                                      "client_software_version": "1"}).api_keys}
        assert {76, 77} <= keys
    with ThreadedBroker(overrides={"odradek.initial.features": "share.version=0", "group.share.enable": "true"}) as b, \
            client(b) as c:  # the legacy switch turns them on whatever share.version says
        b.wait_loaded()  # it serves while it loads: a heartbeat gets COORDINATOR_LOAD_IN_PROGRESS until then
        assert c.request(HEARTBEAT, 1, hb("g", "m", 0, ["t"])).error_code == E.NONE


def test_an_emulated_older_release_hides_them():
    with ThreadedBroker(overrides={"odradek.emulate.kafka.version": "3.9"}) as b, client(b) as c:
        keys = {a.api_key for a in c.request(18, 3, {"client_software_name": "t",
                                                      "client_software_version": "1"}).api_keys}
        assert not {76, 77} & keys


def test_restart_replays_the_live_state(tmp_path):
    topic = "restart-t"
    with ThreadedBroker(tmp_path) as b:
        b.wait_loaded()
        create_topic_kafka_python(b.bootstrap_servers, topic, 3)
        with client(b) as c:
            _f, a = join(c, "sg-r", "a", topic)
            bm = c.request(HEARTBEAT, 1, hb("sg-r", "b", 0, [topic]))
            c.request(HEARTBEAT, 1, hb("sg-r", "c", 0, [topic]))
            c.request(HEARTBEAT, 1, hb("sg-r", "c", -1))
            join(c, "sg-empty", "x", topic)
            c.request(HEARTBEAT, 1, hb("sg-empty", "x", -1))
        live = {s.partition: s.share_view() for s in b.app.coordinator.shards}
        described = None
        with client(b) as c:
            described = describe(c, "sg-r", "sg-empty")
        b.restart()
        b.wait_loaded()
        assert {s.partition: s.share_view() for s in b.app.coordinator.shards} == live
        with client(b) as c:
            assert describe(c, "sg-r", "sg-empty") == described
            again = c.request(HEARTBEAT, 1, hb("sg-r", "b", bm.member_epoch))  # no UNKNOWN_MEMBER_ID
            assert again.error_code == E.NONE
            assert c.request(HEARTBEAT, 1, hb("sg-r", "a", a.member_epoch)).error_code == E.NONE
    assert (tmp_path / f"{STATE_TOPIC}-0").is_dir()


def test_acls_as_kafka_checks_them(tmp_path):
    """READ on the group for a heartbeat, DESCRIBE on its topics; DESCRIBE on the group for a describe,
    whose members' topics must be DESCRIBE-able too (TOPIC_AUTHORIZATION_FAILED without members)."""
    anon, literal, allow, deny = "User:ANONYMOUS", 3, 3, 2
    topic_r, group_r, read, describe_op = 2, 3, 3, 8
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "true"}
    with ThreadedBroker(tmp_path, overrides=overrides) as b:
        b.wait_loaded()
        create_topic_kafka_python(b.bootstrap_servers, "open", 1)
        create_topic_kafka_python(b.bootstrap_servers, "hidden", 1)
        with client(b) as c:
            join(c, "sg-acl", "m", "open")
            c.request(HEARTBEAT, 1, hb("sg-acl", "m", 0, ["open", "hidden"]))
            assert c.request(HEARTBEAT, 1, hb("sg-acl", "m", 3)).error_code == E.NONE  # both assigned now
            acls = [(group_r, "sg-denied", read), (group_r, "sg-denied", describe_op), (topic_r, "hidden", describe_op)]
            created = c.request(30, 3, {"creations": [
                {"resource_type": t, "resource_name": n, "resource_pattern_type": literal, "principal": anon,
                 "host": "*", "operation": op, "permission_type": deny} for t, n, op in acls]})
            assert [r.error_code for r in created.results] == [0, 0, 0]
            assert c.request(HEARTBEAT, 1, hb("sg-denied", "m", 0, ["open"])).error_code == \
                E.GROUP_AUTHORIZATION_FAILED
            assert c.request(HEARTBEAT, 1, hb("sg-other", "m", 0, ["hidden"])).error_code == \
                E.TOPIC_AUTHORIZATION_FAILED
            found = {d.group_id: d for d in describe(c, "sg-denied", "sg-acl", ops=True)}
            assert found["sg-denied"].error_code == E.GROUP_AUTHORIZATION_FAILED
            held = found["sg-acl"]
            assert (held.error_code, held.members, held.group_epoch) == (E.TOPIC_AUTHORIZATION_FAILED, [], 0)
            c.request(31, 3, {"filters": [{"resource_type_filter": topic_r, "resource_name_filter": "hidden",
                                           "pattern_type_filter": literal, "principal_filter": anon,
                                           "host_filter": "*", "operation": describe_op,
                                           "permission_type": deny}]})  # DeleteAcls: hidden is visible again
            [held] = describe(c, "sg-acl", ops=True)
            assert held.error_code == E.NONE and held.authorized_operations & (1 << read)
            assert allow  # (ALLOW is the default here: allow.everyone.if.no.acl.found)


def test_a_deleted_topic_leaves_the_assignment_once(kbroker):
    """A subscribed topic deleted: one epoch bump takes its partitions away, and later heartbeats
    write nothing (no bump on every heartbeat for the initialized state it left behind)."""
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    create_topic_kafka_python(kbroker.bootstrap_servers, name, 2)
    with client(kbroker) as c:
        _f, s = join(c, "sg-doomed", "m", name)
        assert parts(s) == {0, 1}
        assert c.request(20, 4, {"topic_names": [name], "timeout_ms": 10000}).responses[0].error_code == 0
        after = c.request(HEARTBEAT, 1, hb("sg-doomed", "m", s.member_epoch))
        assert (after.member_epoch, after.assignment.topic_partitions) == (s.member_epoch + 1, [])
        for _ in range(3):
            steady = c.request(HEARTBEAT, 1, hb("sg-doomed", "m", after.member_epoch))
            assert (steady.error_code, steady.member_epoch, steady.assignment) == (E.NONE, after.member_epoch, None)
        group = kbroker.app.coordinator.shard_for("sg-doomed").share_groups["sg-doomed"]
        assert not [i for i in group.initialized.values() if i.topic_name == name]  # forgotten
        assert not [k for shard in kbroker.app.share_coordinator.shards for k in shard.states if k[0] == "sg-doomed"]
        create_topic_kafka_python(kbroker.bootstrap_servers, name, 3)  # the same name again: a new topic
        epoch = after.member_epoch
        for _ in range(3):
            r = c.request(HEARTBEAT, 1, hb("sg-doomed", "m", epoch))
            epoch = r.member_epoch
        assert parts(c.request(HEARTBEAT, 1, hb("sg-doomed", "m", 0, [name]))) == {0, 1, 2}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_membership_then_restart_replays_the_live_state(tmp_path, seed):
    """Random joins, heartbeats (stale ones too), leaves, session expiries and topic changes; after
    a restart every share group is what the live coordinator held, and no heartbeat ever failed
    with anything but the codes a client expects."""
    import random
    rnd = random.Random(seed)
    with ThreadedBroker(tmp_path) as b:
        b.wait_loaded()
        names = [f"r{i}" for i in range(3)]
        for i, n in enumerate(names):
            create_topic_kafka_python(b.bootstrap_servers, n, i + 1)
        epochs: dict[tuple[str, str], int] = {}
        with client(b) as c:
            for _ in range(120):
                group, member = rnd.choice(["ga", "gb"]), rnd.choice("abcde")
                action = rnd.random()
                known = (group, member) in epochs
                if not known or action < 0.15:
                    r = c.request(HEARTBEAT, 1, hb(group, member, 0, rnd.sample(names, rnd.randint(1, 3))))
                elif action < 0.25:
                    r = c.request(HEARTBEAT, 1, hb(group, member, -1))
                    epochs.pop((group, member), None)
                    assert r.error_code in (E.NONE, E.UNKNOWN_MEMBER_ID)
                    continue
                elif action < 0.3:
                    b.advance(ms=46_000)
                    epochs.clear()
                    continue
                else:
                    r = c.request(HEARTBEAT, 1, hb(group, member, epochs[(group, member)]))
                assert r.error_code in (E.NONE, E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH), r
                if r.error_code == E.NONE:
                    epochs[(group, member)] = r.member_epoch
                else:
                    epochs.pop((group, member), None)
        live = {s.partition: s.share_view() for s in b.app.coordinator.shards}
        assert any(live.values())
        b.restart()
        b.wait_loaded()
        assert {s.partition: s.share_view() for s in b.app.coordinator.shards} == live


def test_share_groups_off_answer_before_acls(tmp_path):
    """KafkaApis checks that share groups are on before it checks any ACL."""
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "false", "odradek.initial.features": "share.version=0"}
    with ThreadedBroker(tmp_path, overrides=overrides) as b, client(b) as c:
        assert c.request(HEARTBEAT, 1, hb("g", "m", 0, ["t"])).error_code == E.UNSUPPORTED_VERSION
        assert describe(c, "g")[0].error_code == E.UNSUPPORTED_VERSION
