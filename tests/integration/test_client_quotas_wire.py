"""DescribeClientQuotas (48) and AlterClientQuotas (49) in raw frames, v0 and v1.

Kafka's entity rules (user, client-id, ip; null = the default entity), its
three match types with and without ``strict``, its INVALID_REQUEST answers
for bad entities, keys and values, ``validate_only``, the quotas surviving a
restart and going with a test-control reset.
"""

from __future__ import annotations

import math

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

DESCRIBE, ALTER = 48, 49
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
VERSIONS = [0, 1]


@pytest.fixture(scope="module")
def broker():
    with ThreadedBroker() as b:
        yield b


@pytest.fixture(autouse=True)
def _empty(broker):
    broker.control("reset")


def _client(b) -> SyncClient:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    return SyncClient(host, int(port))


def _entity(**names) -> list[dict]:
    return [{"entity_type": t.replace("_", "-"), "entity_name": n} for t, n in names.items()]


def _alter(c, v, entries, validate_only=False):
    return c.request(ALTER, v, {"entries": entries, "validate_only": validate_only})


def _set(entity, **values) -> dict:
    return {"entity": entity, "ops": [{"key": k, "value": float(x), "remove": False} for k, x in values.items()]}


def _describe(c, v, components, strict=False):
    return c.request(DESCRIBE, v, {"components": [
        {"entity_type": t, "match_type": m, "match": s} for t, m, s in components], "strict": strict})


def _found(r) -> set:
    assert r.error_code == 0, r
    return {(tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)),
             tuple(sorted((x.key, x.value) for x in entry["values"]))) for entry in r.entries}


SEEDED = [
    _set(_entity(user="alice"), producer_byte_rate=1024),
    _set(_entity(user=None), consumer_byte_rate=2048),
    _set(_entity(user="alice", client_id="app"), request_percentage=50.5),
    _set(_entity(client_id=None), producer_byte_rate=4096),
    _set(_entity(ip="10.0.0.1"), connection_creation_rate=7),
]
ALICE = ((("user", "alice"),), (("producer_byte_rate", 1024.0),))
DEFAULT_USER = ((("user", None),), (("consumer_byte_rate", 2048.0),))
ALICE_APP = ((("client-id", "app"), ("user", "alice")), (("request_percentage", 50.5),))
DEFAULT_CLIENT = ((("client-id", None),), (("producer_byte_rate", 4096.0),))
IP_ONE = ((("ip", "10.0.0.1"),), (("connection_creation_rate", 7.0),))


@pytest.mark.parametrize("v", VERSIONS)
def test_alter_then_describe_with_each_match_type(broker, v):
    with _client(broker) as c:
        r = _alter(c, v, SEEDED)
        assert [e.error_code for e in r.entries] == [0] * len(SEEDED)
        assert _found(_describe(c, v, [])) == {ALICE, DEFAULT_USER, ALICE_APP, DEFAULT_CLIENT, IP_ONE}
        assert _found(_describe(c, v, [("user", 0, "alice")])) == {ALICE, ALICE_APP}
        assert _found(_describe(c, v, [("user", 0, "alice")], strict=True)) == {ALICE}
        assert _found(_describe(c, v, [("user", 1, None)])) == {DEFAULT_USER}
        assert _found(_describe(c, v, [("user", 2, None)])) == {ALICE, DEFAULT_USER, ALICE_APP}
        assert _found(_describe(c, v, [("user", 2, None), ("client-id", 2, None)], strict=True)) == {ALICE_APP}
        assert _found(_describe(c, v, [("client-id", 1, None)], strict=True)) == {DEFAULT_CLIENT}
        assert _found(_describe(c, v, [("ip", 2, None)])) == {IP_ONE}
        assert _found(_describe(c, v, [], strict=True)) == set()
        # removing the last value removes the entity
        r = _alter(c, v, [{"entity": _entity(user="alice"),
                           "ops": [{"key": "producer_byte_rate", "value": 0.0, "remove": True}]}])
        assert r.entries[0].error_code == 0
        assert _found(_describe(c, v, [("user", 0, "alice")])) == {ALICE_APP}


@pytest.mark.parametrize("v", VERSIONS)
@pytest.mark.parametrize(("components", "code"), [
    ([("", 0, "x")], INVALID_REQUEST),
    ([("user", 0, None)], INVALID_REQUEST),
    ([("user", 1, "x")], INVALID_REQUEST),
    ([("user", 2, "x")], INVALID_REQUEST),
    ([("user", 7, None)], INVALID_REQUEST),
    ([("user", 2, None), ("user", 1, None)], INVALID_REQUEST),
    ([("ip", 2, None), ("client-id", 2, None)], INVALID_REQUEST),
    ([("group", 2, None)], UNSUPPORTED_VERSION),
])
def test_bad_describe_filters_get_kafkas_codes(broker, v, components, code):
    with _client(broker) as c:
        r = _describe(c, v, components)
        assert (r.error_code, r.entries) == (code, None)
        assert r.error_message


@pytest.mark.parametrize("v", VERSIONS)
@pytest.mark.parametrize("entry", [
    _set([], producer_byte_rate=1),                                          # empty entity
    _set(_entity(user=""), producer_byte_rate=1),                            # empty name
    _set(_entity(group="g"), producer_byte_rate=1),                          # unknown type
    _set(_entity(user="a") + _entity(user="b"), producer_byte_rate=1),       # duplicate type
    _set(_entity(ip="10.0.0.1", user="a"), connection_creation_rate=1),      # ip with user
    _set(_entity(ip="not an ip"), connection_creation_rate=1),               # bad ip
    _set(_entity(user="a"), no_such_key=1),                                  # unknown key
    _set(_entity(ip="10.0.0.2"), producer_byte_rate=1),                      # key of the other kind
    _set(_entity(user="a"), producer_byte_rate=-5),                          # negative
    _set(_entity(user="a"), producer_byte_rate=0),                           # zero
    _set(_entity(user="a"), producer_byte_rate=1.5),                         # fraction for a LONG
    _set(_entity(user="a"), producer_byte_rate=2.0**64),                     # too large for a LONG
    _set(_entity(user="a"), request_percentage=math.nan),                    # NaN
    _set(_entity(user="a"), request_percentage=math.inf),                    # infinity
], ids=lambda e: repr(e)[:60])
def test_bad_alterations_get_invalid_request_per_entity(broker, v, entry):
    good = _set(_entity(client_id="ok"), consumer_byte_rate=100)
    with _client(broker) as c:
        r = _alter(c, v, [entry, good])
        assert [e.error_code for e in r.entries] == [INVALID_REQUEST, 0]
        assert r.entries[0].error_message
        assert [(x.entity_type, x.entity_name) for x in r.entries[0].entity] == \
            [(x["entity_type"], x["entity_name"]) for x in entry["entity"]]
        # the good entity of the same request is applied, the bad one is not
        assert _found(_describe(c, v, [])) == {((("client-id", "ok"),), (("consumer_byte_rate", 100.0),))}


@pytest.mark.parametrize("v", VERSIONS)
def test_validate_only_changes_nothing(broker, v):
    with _client(broker) as c:
        r = _alter(c, v, [_set(_entity(user="bob"), producer_byte_rate=10),
                          _set(_entity(user="bob", ip="1.2.3.4"), producer_byte_rate=10)], validate_only=True)
        assert [e.error_code for e in r.entries] == [0, INVALID_REQUEST]
        assert _found(_describe(c, v, [])) == set()


def test_quotas_survive_a_restart_and_go_with_a_reset(broker):
    with _client(broker) as c:
        _alter(c, 1, SEEDED)
    broker.restart()
    with _client(broker) as c:
        assert _found(_describe(c, 0, [])) == {ALICE, DEFAULT_USER, ALICE_APP, DEFAULT_CLIENT, IP_ONE}
    broker.control("reset")
    with _client(broker) as c:
        assert _found(_describe(c, 1, [])) == set()
    broker.restart()
    with _client(broker) as c:
        assert _found(_describe(c, 1, [])) == set()


def test_both_apis_are_advertised_at_v0_to_v1(broker):
    with _client(broker) as c:
        r = c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert keys[DESCRIBE] == (0, 1) and keys[ALTER] == (0, 1)
