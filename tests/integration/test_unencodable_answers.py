"""Requests whose natural answer cannot be encoded get a well-formed answer, over TCP.

A request that decodes is answered -- with Kafka's refusal where Kafka
refuses -- and the connection stays: a client that sent a 32 KiB name or a
null topic name must not lose its other in-flight requests to a closed
socket, and the broker must not log a traceback for it.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.dispatch import HandlerTable
from odradek.broker.error_answers import error_answer
from odradek.broker.wire_client import SyncClient, decode, encode
from odradek.protocol.errors import ErrorCode
from odradek.protocol.registry import APIS
from odradek.testing import ThreadedBroker
from tests.hostile_requests import error_lines, present_error_codes, sample

pytestmark = pytest.mark.integration

LONG = 32767  # the longest protocol string


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port)


@pytest.fixture
def tracebacks(capsys):
    """The broker's error-level log lines so far (a traceback is one): must stay empty."""
    return lambda: error_lines(capsys.readouterr().err)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_null_topic_name_before_v12_is_invalid_request(broker, version, tracebacks):
    with _client(broker) as c:
        r = c.request(3, version, {"topics": [{"name": None, "topic_id": uuid.UUID(int=0)},
                                              {"name": "t", "topic_id": uuid.UUID(int=0)}]})
        assert [(t.name, t.error_code) for t in r.topics] == [("", ErrorCode.INVALID_REQUEST),
                                                             ("t", ErrorCode.INVALID_REQUEST)]
        r = c.request(3, version, {"topics": [{"name": "t", "topic_id": uuid.UUID(int=7)}]})
        assert r.topics[0].error_code == ErrorCode.INVALID_REQUEST  # topic ids are refused too
        assert c.request(3, version, {"topics": None}).brokers  # the connection still serves
    assert tracebacks() == []


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("resource_type, code", [(2, ErrorCode.INVALID_TOPIC_EXCEPTION),
                                                 (4, ErrorCode.INVALID_REQUEST)])
def test_describe_configs_with_a_32k_resource_name_is_refused_in_an_answer(broker, version, resource_type,
                                                                          code, tracebacks):
    name = "é" * (LONG // 2)  # 32,766 bytes of UTF-8: the message must be cut by bytes, not characters
    with _client(broker) as c:
        r = c.request(32, version, {"resources": [{"resource_type": resource_type, "resource_name": name,
                                                   "configuration_keys": None}]})
        (res,) = r.results
        assert (res.error_code, res.resource_name) == (code, name)
        assert len(res.error_message.encode()) < 8192
        assert c.request(18, 0, {}).error_code == 0
    assert tracebacks() == []


@pytest.mark.parametrize("api_key, version, body", [
    (19, 5, {"topics": [{"name": "y" * LONG, "num_partitions": 1, "replication_factor": 1,
                         "assignments": [], "configs": []}], "timeout_ms": 1000}),
    (20, 5, {"topic_names": ["z" * LONG], "timeout_ms": 1000}),
])
def test_topic_admin_with_a_32k_name_is_refused_in_an_answer(broker, api_key, version, body, tracebacks):
    with _client(broker) as c:
        r = c.request(api_key, version, body)
        (t,) = r.topics if api_key == 19 else r.responses
        assert t.error_code in (ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert tracebacks() == []


@pytest.mark.parametrize("api_key, version, body, codes", [
    (37, 3, {"topics": [{"name": "p" * LONG, "count": 2, "assignments": None}], "timeout_ms": 1000},
     lambda r: [t.error_code for t in r.results]),
    (43, 2, {"election_type": 0, "topic_partitions": [{"topic": "e" * LONG, "partitions": [0]}],
             "timeout_ms": 1000}, lambda r: [p.error_code for p in r.replica_election_results[0].partition_result]),
    (21, 2, {"topics": [{"name": "d" * LONG, "partitions": [{"partition_index": 0, "offset": 1}]}],
             "timeout_ms": 1000}, lambda r: [p.error_code for p in r.topics[0].partitions]),
    (23, 4, {"replica_id": -1, "topics": [{"topic": "o" * LONG, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
     lambda r: [p.error_code for p in r.topics[0].partitions]),
    (75, 0, {"topics": [{"name": "t" * LONG}], "response_partition_limit": 10, "cursor": None},
     lambda r: [t.error_code for t in r.topics]),
])
def test_partition_admin_with_a_32k_name_is_answered(broker, api_key, version, body, codes, tracebacks):
    with _client(broker) as c:
        r = c.request(api_key, version, body)
        assert codes(r) and all(code in (ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                                for code in codes(r))
        assert c.request(18, 0, {}).error_code == 0
    assert tracebacks() == []


def test_a_32k_group_instance_id_joins_describes_and_survives_a_restart(tmp_path, tracebacks):
    instance = "i" * LONG
    join = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
    with ThreadedBroker(tmp_path) as b:
        with _client(b) as c:
            r = c.request(11, 5, join)
            assert r.error_code == ErrorCode.NONE
            assert len(r.member_id.encode()) <= LONG and r.leader == r.member_id
            member = r.member_id
            s = c.request(14, 3, {"group_id": "g", "generation_id": r.generation_id, "member_id": member,
                                  "group_instance_id": instance, "assignments": []})
            assert s.error_code == ErrorCode.NONE
            for v in range(0, 5):
                (g,) = c.request(15, v, {"groups": ["g"]}).groups
                assert g.error_code == ErrorCode.NONE and [m.member_id for m in g.members] == [member]
                if v >= 4:
                    assert g.members[0].group_instance_id == instance
        b.restart()
        with _client(b) as c:
            (g,) = c.request(15, 4, {"groups": ["g"]}).groups
            assert [(m.member_id, m.group_instance_id) for m in g.members] == [(member, instance)]
    assert tracebacks() == []


def test_a_32k_client_id_still_gets_a_member_id_that_encodes(broker, tracebacks):
    join = {"group_id": "g2", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    broker.wait_loaded()  # a raw JoinGroup during the load would get COORDINATOR_LOAD_IN_PROGRESS
    with _client(broker) as c:
        c.send_raw(encode(11, 4, 1, join, client_id="c" * LONG))
        _cid, r = decode(11, 4, c.recv_frame())  # v4+: MEMBER_ID_REQUIRED hands out the id
        assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert r.member_id.startswith("ccc") and len(r.member_id.encode()) <= LONG
    assert tracebacks() == []


# --- the general guard --------------------------------------------------------------------

SERVED = [(k, v) for k, spec in sorted(APIS.items()) for v in spec.request.valid
          if k in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 32, 42, 47, 60)]


@pytest.mark.parametrize("api_key, version", SERVED)
def test_every_api_has_an_error_answer_that_encodes(api_key, version):
    """Kafka's getErrorResponse shape for every served request: the one guard must never fail itself."""
    for seed in range(4):
        spec = APIS[api_key]
        req = spec.request.parse(spec.request.build(sample(api_key, version, seed), version), version)
        body = error_answer(api_key, version, req)
        if body is None:
            assert api_key == 0 and req.acks == 0  # acks=0 Produce: Kafka closes instead
            continue
        back = spec.response.parse(spec.response.build(body, version), version)
        codes = present_error_codes(spec.response.fields, back, version)
        assert set(codes) <= {ErrorCode.UNKNOWN_SERVER_ERROR}, (body, back)
        if api_key in (0, 2, 8) and any(_partitions(t) for t in _topics(api_key, req)):
            assert codes  # every named partition carries the error


def _topics(api_key: int, req) -> list:
    return req.topic_data if api_key == 0 else req.topics


def _partitions(t) -> list:
    return t.partition_data if hasattr(t, "partition_data") else t.partitions


@pytest.mark.parametrize("failure", ["raises", "unencodable", "raises later"])
def test_a_failing_handler_gets_kafkas_error_answer_and_the_connection_stays(broker, failure, tracebacks):
    table: HandlerTable = broker.app.handlers

    def heartbeat(ctx, req):
        if failure == "raises":
            raise RuntimeError("a bug")
        if failure == "unencodable":
            return {"error_code": 2**20}  # out of int16 range
        async def later():
            raise RuntimeError("a later bug")
        return later()

    broker.call(table.register, 12, heartbeat)
    with _client(broker) as c:
        r = c.request(12, 3, {"group_id": "g", "generation_id": 1, "member_id": "m"})
        assert r.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert c.request(18, 0, {}).error_code == 0
    assert any("request.handler_failed" in line for line in tracebacks())  # the bug is still logged
