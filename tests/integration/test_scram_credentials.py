"""DescribeUserScramCredentials / AlterUserScramCredentials over TCP: raw frames, kafka-python's
and confluent-kafka's admin clients, survival across restarts, and users made without a client
(``odradek format --add-scram``, the testing helper)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid

import pytest
from scramp import ScramClient

from odradek.broker.security.mechanism import MECHANISMS, SaslSettings
from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

NONE, CLUSTER_AUTHZ, UNSUPPORTED_MECH, NOT_FOUND, DUPLICATE, UNACCEPTABLE = 0, 31, 33, 91, 92, 93
SHA256, SHA512 = 1, 2
HASH = {SHA256: "sha256", SHA512: "sha512"}


@pytest.fixture
def broker():
    with ThreadedBroker() as b:
        yield b


def upsert(name: str, password: str = "pw", mechanism: int = SHA256, iterations: int = 4096,
           salt: bytes = b"salt-of-the-earth") -> dict:
    salted = hashlib.pbkdf2_hmac(HASH.get(mechanism, "sha256"), password.encode(), salt, max(iterations, 1))
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": salted}


def alter(b, upsertions=(), deletions=()) -> dict[str, tuple[int, str | None]]:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(51, 0, {"deletions": [{"name": n, "mechanism": m} for n, m in deletions],
                              "upsertions": list(upsertions)})
    return {x.user: (x.error_code, x.error_message) for x in r.results}


def describe(b, users: list[str] | None):
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(50, 0, {"users": None if users is None else [{"name": u} for u in users]})
    assert r.error_code == NONE
    return r


def infos(result) -> list[tuple[int, int]]:
    return [(i.mechanism, i.iterations) for i in result.credential_infos]


def authenticates(b, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> bool:
    """Run the broker's SCRAM server (what a SASL listener drives) with scramp's client."""
    def run():
        server = MECHANISMS[mechanism](SaslSettings("SASL_PLAINTEXT", credentials=b.app.scram_credentials))
        client = ScramClient([mechanism], user, password)
        try:
            client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
            client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
        except Exception:
            return False
        return server.principal() == f"User:{user}"
    return b.call(run)


def test_api_versions_lists_both_apis_at_v0(broker):
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        keys = {k.api_key: (k.min_version, k.max_version) for k in c.request(18, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert keys[50] == (0, 0) and keys[51] == (0, 0)


def test_upsert_describe_authenticate_and_survive_restart(broker):
    assert alter(broker, [upsert("alice", "alice-secret", SHA256, 8192),
                          upsert("bob", "bob-secret", SHA512, 4096)]) == {"alice": (NONE, None), "bob": (NONE, None)}
    assert alter(broker, [upsert("alice", "alice-512", SHA512, 16384)]) == {"alice": (NONE, None)}
    r = describe(broker, ["alice"])
    assert [(x.user, x.error_code, infos(x)) for x in r.results] == [("alice", NONE, [(SHA256, 8192), (SHA512, 16384)])]
    assert authenticates(broker, "alice", "alice-secret")
    assert authenticates(broker, "alice", "alice-512", "SCRAM-SHA-512")
    assert not authenticates(broker, "alice", "wrong")
    broker.restart()
    everyone = {x.user: infos(x) for x in describe(broker, None).results}
    assert everyone == {"alice": [(SHA256, 8192), (SHA512, 16384)], "bob": [(SHA512, 4096)]}
    assert {x.user for x in describe(broker, []).results} == {"alice", "bob"}  # empty list = all
    assert authenticates(broker, "bob", "bob-secret", "SCRAM-SHA-512")


def test_describe_unknown_and_duplicate_users(broker):
    alter(broker, [upsert("alice")])
    r = {x.user: x for x in describe(broker, ["alice", "ghost", "dup", "dup"]).results}
    assert (r["alice"].error_code, infos(r["alice"])) == (NONE, [(SHA256, 4096)])
    assert (r["ghost"].error_code, r["ghost"].error_message) == (
        NOT_FOUND, "Attempt to describe a user credential that does not exist: ghost")
    assert (r["dup"].error_code, r["dup"].error_message) == (
        DUPLICATE, "Cannot describe SCRAM credentials for the same user twice in a single request: dup")
    assert len(describe(broker, ["dup", "dup", "dup"]).results) == 1


def test_alter_errors_are_per_user_and_the_rest_is_applied(broker):
    alter(broker, [upsert("keep"), upsert("both")])
    got = alter(broker, upsertions=[upsert("ok"), upsert("", mechanism=SHA256), upsert("m0", mechanism=0),
                                    upsert("m3", mechanism=3), upsert("few", iterations=4095),
                                    upsert("many", iterations=16385), upsert("twice"), upsert("twice"),
                                    upsert("both")],
                deletions=[("ghost", SHA256), ("both", SHA256), ("keep", SHA512)])
    assert got == {
        "ok": (NONE, None),
        "": (UNACCEPTABLE, "Username must not be empty"),
        "m0": (UNSUPPORTED_MECH, "Unknown SCRAM mechanism"),
        "m3": (UNSUPPORTED_MECH, "Unknown SCRAM mechanism"),
        "few": (UNACCEPTABLE, "Too few iterations"),
        "many": (UNACCEPTABLE, "Too many iterations"),
        "twice": (DUPLICATE, "A user credential cannot be altered twice in the same request"),
        "both": (DUPLICATE, "A user credential cannot be altered twice in the same request"),
        "ghost": (NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "keep": (NOT_FOUND, "Attempt to delete a user credential that does not exist"),
    }
    # "both" was neither deleted nor replaced
    assert {x.user for x in describe(broker, None).results} == {"keep", "ok", "both"}


def test_delete_removes_one_mechanism_then_the_user(broker):
    alter(broker, [upsert("carol", mechanism=SHA256)])
    alter(broker, [upsert("carol", mechanism=SHA512)])
    assert alter(broker, deletions=[("carol", SHA256)]) == {"carol": (NONE, None)}
    assert infos(describe(broker, ["carol"]).results[0]) == [(SHA512, 4096)]
    assert alter(broker, deletions=[("carol", SHA512)]) == {"carol": (NONE, None)}
    broker.restart()
    assert describe(broker, ["carol"]).results[0].error_code == NOT_FOUND
    assert not authenticates(broker, "carol", "pw", "SCRAM-SHA-512")


def test_denied_principal_gets_cluster_authorization_failed(broker):
    """The authorizer's hook (``authorize_cluster``): DESCRIBE / ALTER on CLUSTER."""
    alter(broker, [upsert("alice")])
    broker.app.authorize_cluster = lambda ctx, operation: False
    try:
        with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
            r = c.request(50, 0, {"users": [{"name": "alice"}]})
            assert r.error_code == CLUSTER_AUTHZ and [x.error_code for x in r.results] == [CLUSTER_AUTHZ]
        assert alter(broker, [upsert("eve")], [("alice", SHA256)]) == {
            "eve": (CLUSTER_AUTHZ, "Cluster authorization failed."), "alice": (CLUSTER_AUTHZ, "Cluster authorization failed.")}
    finally:
        del broker.app.authorize_cluster
    assert {x.user for x in describe(broker, None).results} == {"alice"}


def test_kafka_python_admin_client(broker):
    from kafka.admin import (
        KafkaAdminClient,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        user = f"kp-{uuid.uuid4().hex[:6]}"
        assert admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(user, "SCRAM-SHA-256", "kp-secret", iterations=8192)]) == {user: None}
        got = admin.describe_user_scram_credentials([user, "nobody"])
        assert got[user] == {"error": None, "credential_infos": [
            {"mechanism": ScramMechanism.SCRAM_SHA_256, "iterations": 8192}]}
        assert "does not exist" in got["nobody"]["error"]
        assert authenticates(broker, user, "kp-secret")
        assert admin.alter_user_scram_credentials([
            UserScramCredentialDeletion(user, "SCRAM-SHA-256")]) == {user: None}
        assert admin.describe_user_scram_credentials(None) == {}
    finally:
        admin.close()


def test_confluent_kafka_admin_client(broker):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    user = f"ck-{uuid.uuid4().hex[:6]}"
    # confluent-kafka's own test: one request per mechanism (KRaft refuses a user twice in one)
    for mech, iterations in ((ScramMechanism.SCRAM_SHA_256, 10000), (ScramMechanism.SCRAM_SHA_512, 4096)):
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(mech, iterations), b"ck-secret", b"confluent-salt")])
        assert futures[user].result(10) is None
    description = admin.describe_user_scram_credentials([user])[user].result(10)
    assert sorted((i.mechanism, i.iterations) for i in description.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 10000), (ScramMechanism.SCRAM_SHA_512, 4096)]
    assert authenticates(broker, user, "ck-secret", "SCRAM-SHA-512")
    with pytest.raises(KafkaException) as exc:
        admin.describe_user_scram_credentials(["nobody-here"])["nobody-here"].result(10)
    assert exc.value.args[0].code() == NOT_FOUND
    broker.restart()
    everyone = admin.describe_user_scram_credentials().result(10)
    assert user in everyone
    futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])
    assert futures[user].result(10) is None
    with pytest.raises(KafkaException) as exc:
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])[
            user].result(10)
    assert exc.value.args[0].code() == NOT_FOUND


def test_testing_helper_adds_users_before_start_and_while_running(tmp_path):
    b = ThreadedBroker(tmp_path / "data")
    try:
        b.add_scram_user("early", "early-secret", "SCRAM-SHA-512", iterations=8192)
        b.start()
        b.add_scram_user("late", "late-secret")
        assert authenticates(b, "early", "early-secret", "SCRAM-SHA-512")
        assert authenticates(b, "late", "late-secret")
        b.restart()
        assert {x.user: infos(x) for x in describe(b, None).results} == {
            "early": [(SHA512, 8192)], "late": [(SHA256, 4096)]}
    finally:
        b.close()


def test_odradek_format_add_scram_then_serve(tmp_path):
    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "odradek.broker.cli", "format", "--data-dir", str(data),
           "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
           "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "alice-secret" not in done.stdout + done.stderr
    with ThreadedBroker(data) as b:
        assert infos(describe(b, ["alice"]).results[0]) == [(SHA256, 4096), (SHA512, 8192)]
        assert authenticates(b, "alice", "alice-secret")
        # while a broker runs on the dir, format refuses (it would lose the broker's changes)
        busy = subprocess.run(cmd[:6] + ["--add-scram", "SCRAM-SHA-256=[name=x,password=y]"],
                              capture_output=True, text=True, timeout=60)
        assert busy.returncode != 0 and "x" not in {r.user for r in describe(b, None).results}
    bad = subprocess.run(cmd[:6] + ["--add-scram", "SCRAM-SHA-256=[name=x,password=y,iterations=10]"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "iterations" in bad.stderr


@pytest.mark.parametrize("super_users, allowed", [("", False), ("User:ANONYMOUS", True)])
def test_the_authorizer_guards_both_apis(super_users, allowed):
    """With Kafka's authorizer and no ACLs, only a super user may describe or alter credentials."""
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": super_users}
    with ThreadedBroker(overrides=overrides) as b:
        expected = NONE if allowed else CLUSTER_AUTHZ
        assert alter(b, [upsert("alice")])["alice"][0] == expected
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            r = c.request(50, 0, {"users": None})
        assert r.error_code == expected
        assert [x.user for x in r.results] == (["alice"] if allowed else [])


def test_reset_keeps_scram_users(broker):
    """A shared test broker's reset empties topics and groups, not its users (as the README says)."""
    alter(broker, [upsert("alice", "alice-secret", SHA512, 8192)])
    broker.reset()
    assert infos(describe(broker, ["alice"]).results[0]) == [(SHA512, 8192)]
    assert authenticates(broker, "alice", "alice-secret", "SCRAM-SHA-512")
    broker.restart()
    assert authenticates(broker, "alice", "alice-secret", "SCRAM-SHA-512")
