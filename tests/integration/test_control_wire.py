"""Fault rules and request capture over TCP with raw requests: each act, each filter, validation.

The client-behaviour scenarios (what kafka-python, aiokafka and
confluent-kafka do with each fault) are in ``test_control_clients.py``.
"""

from __future__ import annotations

import time

import pytest

from odradek.broker.wire_client import SyncClient, encode
from odradek.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

HEARTBEAT = {"group_id": "g", "generation_id": 1, "member_id": "m"}


def _commit(group: str, topic: str = "t", partition: int = 0, offset: int = 5) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset,
                                                       "committed_metadata": ""}]}]}


def _fetch_offsets(group: str, topic: str = "t") -> dict:
    return {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port)


def _codes(r) -> list[int]:
    return [p.error_code for t in r.topics for p in t.partitions]


def test_an_error_rule_answers_kafkas_error_response_and_fires_the_given_times(broker):
    with _client(broker) as c:
        c.request(3, 9, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
        with broker.fault("OffsetCommit", error="NOT_COORDINATOR", times=2) as f:
            assert _codes(c.request(8, 8, _commit("g"))) == [ErrorCode.NOT_COORDINATOR]
            assert _codes(c.request(8, 2, _commit("g"))) == [ErrorCode.NOT_COORDINATOR]
            assert _codes(c.request(8, 8, _commit("g"))) == [ErrorCode.NONE]  # spent
            assert broker.faults() == []
            assert f.remove() is False
        # the faulted commits never ran: only the third is stored
        r = c.request(9, 5, _fetch_offsets("g"))
        assert r.topics[0].partitions[0].committed_offset == 5


def test_filters_match_group_topic_partition_version_and_client_id(broker):
    with _client(broker) as c:
        c.request(3, 9, {"topics": [{"name": "t"}, {"name": "u"}], "allow_auto_topic_creation": True})
        with broker.fault("OffsetCommit", error="REBALANCE_IN_PROGRESS", group_id="g1", topic="t",
                          partition=0, versions="2-7"):
            assert _codes(c.request(8, 2, _commit("g1"))) == [ErrorCode.REBALANCE_IN_PROGRESS]
            assert _codes(c.request(8, 8, _commit("g1"))) == [ErrorCode.NONE]  # version outside
            assert _codes(c.request(8, 2, _commit("g2"))) == [ErrorCode.NONE]  # other group
            assert _codes(c.request(8, 2, _commit("g1", topic="u"))) == [ErrorCode.NONE]
            assert _codes(c.request(8, 2, _commit("g1", partition=1))) in ([ErrorCode.NONE],
                                                                            [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
        with broker.fault("Heartbeat", error="REBALANCE_IN_PROGRESS", client_id="someone-else"):
            assert c.request(12, 3, HEARTBEAT).error_code != ErrorCode.REBALANCE_IN_PROGRESS
        with broker.fault("Heartbeat", error="REBALANCE_IN_PROGRESS", client_id="odradek-wire"):
            assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_rules_apply_in_the_order_added_and_a_timed_rule_expires(broker):
    with _client(broker) as c:
        first = broker.fault("Heartbeat", error="NOT_COORDINATOR", seconds=0.3)
        broker.fault("Heartbeat", error="COORDINATOR_NOT_AVAILABLE")
        assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.NOT_COORDINATOR
        time.sleep(0.4)
        assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert first.remove() is False  # it expired
        assert broker.clear_faults() == 1
        assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_an_expired_timed_rule_leaves_the_listing_at_once_and_cannot_be_removed(broker):
    """No request of its API has to arrive: ``faults()`` stops listing it when its time is up,
    and ``remove()`` says False, as for a spent rule."""
    timed = broker.fault("Heartbeat", error="NOT_COORDINATOR", seconds=0.2)
    kept = broker.fault("OffsetCommit", error="NOT_COORDINATOR")
    assert [f["id"] for f in broker.faults()] == [timed.id, kept.id]
    time.sleep(0.3)
    assert [f["id"] for f in broker.faults()] == [kept.id]
    assert timed.remove() is False
    assert kept.remove() is True
    again = broker.fault("Heartbeat", error="NOT_COORDINATOR", seconds=0.2)
    time.sleep(0.3)
    assert again.remove() is False  # expired and never listed after: still False


def test_a_delayed_answer_comes_after_the_delay_and_holds_no_other_connection(broker):
    with _client(broker) as slow, _client(broker) as other:
        with broker.fault("Heartbeat", delay_ms=600, client_id="odradek-wire", times=1):
            t0 = time.monotonic()
            slow.send_raw(encode(12, 3, 99, HEARTBEAT))
            assert other.request(18, 3, {"client_software_name": "x", "client_software_version": "1"}
                                 ).error_code == 0
            answered_other = time.monotonic() - t0
            slow.recv_frame()
            answered_slow = time.monotonic() - t0
    assert answered_slow >= 0.6 > answered_other


def test_close_before_loses_the_commit_and_close_after_keeps_it(broker):
    with _client(broker) as c:
        c.request(3, 9, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    broker.fault("OffsetCommit", close="before", times=1)
    with _client(broker) as c, pytest.raises(ConnectionError):
        c.request(8, 8, _commit("gb", offset=7))
    broker.fault("OffsetCommit", close="after", times=1)
    with _client(broker) as c, pytest.raises(ConnectionError):
        c.request(8, 8, _commit("ga", offset=9))
    with _client(broker) as c:
        assert c.request(9, 5, _fetch_offsets("gb")).topics[0].partitions[0].committed_offset == -1
        assert c.request(9, 5, _fetch_offsets("ga")).topics[0].partitions[0].committed_offset == 9


def test_throttle_sets_throttle_time_on_the_real_answer(broker):
    with _client(broker) as c, broker.fault("Metadata", throttle_ms=250):
        r = c.request(3, 9, {"topics": None, "allow_auto_topic_creation": False})
        assert r.throttle_time_ms == 250 and r.brokers  # the handler's own answer, throttled


@pytest.mark.parametrize("kwargs, message", [
    ({"api": "OfsetCommit", "error": "NOT_COORDINATOR"}, "unknown API 'OfsetCommit'; did you mean OffsetCommit"),
    ({"api": 99, "error": 16}, "unknown API key 99"),
    ({"api": "Produce", "error": "NOT_COORDINATOR"}, "NOT_COORDINATOR (16) is not an error Produce can return"),
    ({"api": "Heartbeat", "error": "NOT_A_THING"}, "unknown error 'NOT_A_THING'"),
    ({"api": "Heartbeat", "error": 4242}, "unknown error code 4242"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "versions": "2-9"}, "Heartbeat v2-9 is not served"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "topic": "t"}, "Heartbeat requests carry no topic"),
    ({"api": "Heartbeat"}, "the rule does nothing"),
    ({"api": "Heartbeat", "close": "during"}, "close must be one of before, after"),
])
def test_bad_rules_are_refused_at_the_call(broker, kwargs, message):
    api = kwargs.pop("api")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        broker.fault(api, **kwargs)
    assert broker.faults() == []


def test_capture_records_decoded_requests_and_filters_them(broker):
    broker.clear_capture()
    with _client(broker) as c:
        c.request(3, 9, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
        c.request(8, 8, _commit("cap", offset=42))
        c.request(8, 8, _commit("other", offset=1))
    commits = broker.captured("OffsetCommit", group_id="cap")
    assert [(r.api, r.version, r.client_id) for r in commits] == [("OffsetCommit", 8, "odradek-wire")]
    assert commits[0].body.topics[0].partitions[0].committed_offset == 42
    assert len(broker.captured("OffsetCommit")) == 2
    assert len(broker.captured(["Metadata", "OffsetCommit"], topic="t")) == 3
    assert broker.captured("OffsetCommit", partition=3) == []
    assert broker.clear_capture() == 3


def test_the_fixture_handle_removes_a_block_rule_and_refuses_non_operations():
    from odradek.testing.handle import BrokerHandle

    with BrokerHandle() as handle, SyncClient(handle.host, handle.port) as c:
        with handle.fault("Heartbeat", error="NOT_COORDINATOR") as fault:
            assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.NOT_COORDINATOR
            assert [f["id"] for f in handle.faults()] == [fault.id]
        assert handle.faults() == []  # the block ended: the rule is gone
        assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        for name in ("on_request", "_sync"):
            with pytest.raises(AttributeError, match="no control operation"):
                handle.control(name)
