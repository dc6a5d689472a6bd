"""The authorization decision, sans I/O: Kafka's ``StandardAuthorizerData`` rules.

Prefixed and literal patterns, the ``*`` resource, ``User:*`` and host
wildcards, implied operations, DENY over ALLOW, super users,
``allow.everyone.if.no.acl.found``, the any-resource-of-a-type check used by
InitProducerId, filters (ANY/MATCH) and the durable store.
"""

from __future__ import annotations

import json

import pytest

from odradek.broker.config import Config, ConfigError, parse_super_users
from odradek.broker.security.acl_store import AclStore, AclStoreError
from odradek.broker.security.acls import (
    AclAuthorizer,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    InvalidAcl,
    PatternType,
    ResourceType,
    bit_field,
    validate_binding,
)

Op, R, P, A = AclOperation, ResourceType, PatternType, AclPermission
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name: str, op: AclOperation = Op.READ, perm: AclPermission = A.ALLOW, principal: str = ALICE,
        rtype: ResourceType = R.TOPIC, pattern: PatternType = P.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*acls: AclBinding, supers: tuple[str, ...] = (), allow_if_none: bool = False) -> AclAuthorizer:
    a = AclAuthorizer(supers, allow_if_none)
    a.add(acls)
    return a


def ok(a: AclAuthorizer, name: str, op: AclOperation = Op.READ, principal: str = ALICE,
       rtype: ResourceType = R.TOPIC, host: str = HOST) -> bool:
    return a.authorize(principal, host, op, rtype, name, "Test", audit=False)


def test_literal_acl_allows_only_its_principal_operation_and_name():
    a = authz(acl("orders"))
    assert ok(a, "orders")
    assert not ok(a, "orders", principal=BOB)
    assert not ok(a, "orders", Op.WRITE)
    assert not ok(a, "orders2")  # no ACL on it, allow-everyone off


def test_prefixed_acl_covers_names_that_start_with_it_case_sensitively():
    a = authz(acl("app-", pattern=P.PREFIXED))
    assert ok(a, "app-orders") and ok(a, "app-")
    assert not ok(a, "App-orders") and not ok(a, "ap")


def test_wildcard_resource_principal_and_host():
    assert ok(authz(acl("*")), "anything")
    assert ok(authz(acl("t", principal="User:*")), "t", principal=BOB)
    assert ok(authz(acl("t", host=HOST)), "t")
    assert not ok(authz(acl("t", host="10.0.0.2")), "t")


def test_deny_wins_over_allow_from_any_pattern():
    a = authz(acl("app-", Op.ALL, pattern=P.PREFIXED), acl("app-secret", Op.READ, A.DENY))
    assert ok(a, "app-public")
    assert not ok(a, "app-secret")
    assert ok(a, "app-secret", Op.WRITE)  # the DENY names READ only
    assert not ok(authz(acl("t", Op.ALL), acl("*", Op.ALL, A.DENY, principal="User:*")), "t")


def test_implied_operations_come_from_allows_only():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert ok(authz(acl("t", op)), "t", Op.DESCRIBE)
    assert not ok(authz(acl("t", Op.CREATE)), "t", Op.DESCRIBE)
    assert ok(authz(acl("t", Op.ALTER_CONFIGS)), "t", Op.DESCRIBE_CONFIGS)
    assert not ok(authz(acl("t", Op.DESCRIBE_CONFIGS)), "t", Op.ALTER_CONFIGS)
    # DENY READ does not deny DESCRIBE
    assert ok(authz(acl("t", Op.DESCRIBE), acl("t", Op.READ, A.DENY)), "t", Op.DESCRIBE)
    assert ok(authz(acl("t", Op.ALL)), "t", Op.IDEMPOTENT_WRITE)


def test_super_users_bypass_even_deny():
    a = authz(acl("t", Op.ALL, A.DENY), supers=(ALICE,))
    assert ok(a, "t") and ok(a, "kafka-cluster", Op.ALTER, rtype=R.CLUSTER)
    assert not ok(a, "t", principal=BOB)


def test_allow_everyone_only_where_no_acl_names_the_resource():
    a = authz(acl("t", principal=BOB), allow_if_none=True)
    assert ok(a, "other")          # no ACL at all: allowed
    assert not ok(a, "t")          # ACLs exist, none for alice: denied
    assert ok(a, "t", principal=BOB)
    assert not ok(authz(allow_if_none=False), "other")


def test_any_resource_of_a_type_for_idempotent_producers():
    assert authz(acl("x", Op.WRITE)).authorize_any(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert authz(acl("p-", Op.WRITE, pattern=P.PREFIXED)).authorize_any(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert not authz(acl("x", Op.READ)).authorize_any(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert not authz(acl("x", Op.WRITE), acl("x", Op.WRITE, A.DENY)).authorize_any(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert not authz(acl("p-x", Op.WRITE), acl("p-", Op.WRITE, A.DENY, pattern=P.PREFIXED)).authorize_any(
        ALICE, HOST, Op.WRITE, R.TOPIC)
    assert not authz(acl("x", Op.WRITE), acl("*", Op.WRITE, A.DENY)).authorize_any(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert authz(allow_if_none=True).authorize_any(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert authz(supers=(ALICE,)).authorize_any(ALICE, HOST, Op.WRITE, R.TOPIC)


def test_authorized_operations_bit_field():
    a = authz(acl("t", Op.READ))
    assert a.authorized_operations(ALICE, HOST, R.TOPIC, "t") == bit_field([Op.READ, Op.DESCRIBE])
    assert a.authorized_operations(BOB, HOST, R.TOPIC, "t") == 0


def test_decisions_follow_changes_to_the_acl_set():
    a = authz()
    assert not ok(a, "t")
    a.add([acl("t")])
    assert ok(a, "t")
    a.remove([acl("t")])
    assert not ok(a, "t")


def flt(rtype=R.ANY, name=None, pattern=P.ANY, principal=None, host=None, op=Op.ANY, perm=A.ANY) -> AclFilter:
    return AclFilter(rtype, name, pattern, principal, host, op, perm)


def test_filters_any_and_exact_and_match():
    lit, star, pre = acl("orders"), acl("*"), acl("ord", pattern=P.PREFIXED)
    group = acl("orders", rtype=R.GROUP)
    a = authz(lit, star, pre, group)
    assert set(a.matching(flt())) == {lit, star, pre, group}
    assert set(a.matching(flt(R.TOPIC, "orders"))) == {lit}  # ANY with a name: exact name, any pattern
    assert set(a.matching(flt(R.TOPIC, "ord", P.PREFIXED))) == {pre}
    assert set(a.matching(flt(R.TOPIC, "orders", P.MATCH))) == {lit, star, pre}
    assert set(a.matching(flt(R.TOPIC, None, P.LITERAL))) == {lit, star}
    assert a.matching(flt(host="10.0.0.1")) == []  # host filters are exact strings
    assert set(a.matching(flt(host="*", principal=ALICE, op=Op.READ, perm=A.ALLOW))) == {lit, star, pre, group}


def test_filter_with_unknown_fields_is_refused():
    assert AclFilter.of(0, None, 1, None, None, 1, 1).unknown_field() is not None
    assert AclFilter.of(1, None, 1, None, None, 99, 1).unknown_field() is not None  # unknown code
    assert AclFilter.of(1, None, 1, None, None, 1, 1).unknown_field() is None


@pytest.mark.parametrize("bad", [
    acl("x", rtype=R.ANY), acl("x", pattern=P.MATCH), acl("x", Op.ANY), acl("x", perm=A.ANY),
    acl(""), acl("my-cluster", Op.ALTER, rtype=R.CLUSTER), acl("x", principal="alice"),
])
def test_bindings_kafka_refuses(bad):
    with pytest.raises(InvalidAcl):
        validate_binding(bad)


def test_super_users_setting():
    assert parse_super_users(" User:a ; User:b;") == ["User:a", "User:b"]
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_authorizer_class_setting():
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "kafka.security.authorizer.AclAuthorizer"):
        assert Config.load(None, overrides=[f"authorizer.class.name={name}"], environ={})[
            "authorizer.class.name"] == name
    with pytest.raises(ConfigError, match="authorizer.class.name.*StandardAuthorizer"):
        Config.load(None, overrides=["authorizer.class.name=com.example.MyAuthorizer"], environ={})
    with pytest.raises(ConfigError, match="super.users"):
        Config.load(None, overrides=["super.users=admin"], environ={})


def test_store_round_trip_and_refuses_a_damaged_file(tmp_path):
    store = AclStore(tmp_path)
    assert store.load() == []
    acls = [acl("a"), acl("p-", Op.WRITE, A.DENY, pattern=P.PREFIXED, host="1.2.3.4")]
    store.save(acls)
    assert sorted(store.load(), key=str) == sorted(acls, key=str)
    assert json.loads(store.path.read_text())["version"] == 1
    store.path.write_text("{not json")
    with pytest.raises(AclStoreError):
        store.load()


NO_CHECK = {17, 18, 36, 71, 72}  # SaslHandshake, ApiVersions, SaslAuthenticate, telemetry: Kafka checks nothing
# the ACL APIs check the cluster themselves (they also answer without ACLs), the SCRAM
# credential APIs through BrokerApp.authorize_cluster
SELF_CHECKING = {29, 30, 31, 50, 51}


def test_every_served_api_is_guarded(tmp_path):
    """A new API must say what Kafka authorizes for it (``security/guards.py``)."""
    from odradek.broker.app import BrokerApp
    from odradek.broker.security.guards import GUARDS

    config = Config.load(None, overrides=[f"log.dirs={tmp_path}"], environ={})
    served = {key for key, _lo, _hi in BrokerApp(config).handlers.served()}
    assert served - set(GUARDS) - NO_CHECK - SELF_CHECKING == set()


def test_audit_line_reads_like_kafkas_authorizer_logger():
    from structlog.testing import capture_logs

    a = authz(acl("t", Op.READ, A.DENY, principal=BOB))
    with capture_logs() as logs:
        a.authorize(BOB, HOST, Op.READ, R.TOPIC, "t", "Fetch")
        a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t", "Fetch", audit=False)
    (line,) = logs
    assert line["log_level"] == "info"
    assert line["message"] == (
        "Principal = User:bob is Denied operation = READ from host = 10.0.0.1 on resource = "
        "Topic:LITERAL:t for request = Fetch with resourceRefCount = 1 based on rule MatchingAcl(acl="
        "StandardAcl(resourceType=TOPIC, resourceName=t, patternType=LITERAL, principal=User:bob, "
        "host=*, operation=READ, permissionType=DENY))")


def test_ipv6_peers_are_matched_in_javas_text_form():
    """ACL hosts are compared with Java's ``getHostAddress()`` of the peer, as on Kafka."""
    from odradek.broker.security.authorizer import java_host_address

    assert java_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert java_host_address("fe80::a:1%eth0") == "fe80:0:0:0:0:0:a:1%eth0"
    assert java_host_address("::ffff:10.0.0.1") == "10.0.0.1"
    assert java_host_address("not-an-address:") == "not-an-address:"
