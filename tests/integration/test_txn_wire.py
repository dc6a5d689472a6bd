"""The transaction coordinator over TCP with raw frames: every served version of
FindCoordinator (key_type 1), InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions and ListTransactions, with Kafka's error code per version."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import encode_batch

from . import txn_versions
from .wire_helpers import create_topic

pytestmark = pytest.mark.integration
broker = txn_versions.broker  # every test under transaction.version 1 and 2

FIND, INIT, ADD_PARTS, ADD_OFFSETS, END, DESCRIBE, LIST = 10, 22, 24, 25, 26, 65, 66


def _id(prefix: str = "txn") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port)


def init(c, tid, version=4, timeout=60000, pid=-1, epoch=-1):
    return c.request(INIT, version, {"transactional_id": tid, "transaction_timeout_ms": timeout,
                                     "producer_id": pid, "producer_epoch": epoch})


def add(c, tid, pid, epoch, topics: dict[str, list[int]], version=3) -> dict[tuple[str, int], int]:
    r = c.request(ADD_PARTS, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_offsets(c, tid, pid, epoch, group="g", version=3) -> int:
    return c.request(ADD_OFFSETS, version, {"transactional_id": tid, "producer_id": pid,
                                            "producer_epoch": epoch, "group_id": group}).error_code


def end(c, tid, pid, epoch, commit=True, version=3) -> int:
    return c.request(END, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                    "committed": commit}).error_code


def describe(c, *tids):
    return c.request(DESCRIBE, 0, {"transactional_ids": list(tids)}).transaction_states


def wait_state(c, tid, state: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while describe(c, tid)[0].transaction_state != state:
        assert time.monotonic() < deadline, describe(c, tid)[0]
        time.sleep(0.01)


def test_find_coordinator_for_a_transactional_id_every_version(broker):
    with client(broker) as c:
        ep = broker.app.endpoint
        for v in range(1, 4):
            r = c.request(FIND, v, {"key": "txn-1", "key_type": 1})
            assert (r.error_code, r.node_id, r.host, r.port) == (E.NONE, ep.node_id, ep.host, ep.port)
        for v in range(4, 7):
            r = c.request(FIND, v, {"key_type": 1, "coordinator_keys": ["a", "b"]})
            assert [(k.key, k.error_code, k.port) for k in r.coordinators] == [("a", 0, ep.port),
                                                                                 ("b", 0, ep.port)]


@pytest.mark.parametrize("versions", [(0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3), (4, 3, 3, 4)])
def test_a_transaction_at_every_version(broker, versions):
    init_v, add_v, offsets_v, end_v = versions
    topic, tid = _id("t"), _id()
    create_topic(broker, topic, 2)
    with client(broker) as c:
        r = init(c, tid, init_v)
        assert (r.error_code, r.producer_epoch) == (E.NONE, 0)
        pid = r.producer_id
        assert add(c, tid, pid, 0, {topic: [0, 1]}, add_v) == {(topic, 0): 0, (topic, 1): 0}
        assert add_offsets(c, tid, pid, 0, "g", offsets_v) == E.NONE
        [d] = describe(c, tid)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, 0)
        assert sorted((t.topic, tuple(t.partitions)) for t in d.topics) == [
            ("__consumer_offsets", (0,)), (topic, (0, 1))]
        assert end(c, tid, pid, 0, True, end_v) == E.NONE
        wait_state(c, tid, "CompleteCommit")
        assert end(c, tid, pid, 0, True, end_v) == E.NONE  # a retried commit
        assert end(c, tid, pid, 0, False, end_v) == E.INVALID_TXN_STATE


@pytest.mark.parametrize("version,fenced", [(0, E.INVALID_PRODUCER_EPOCH), (1, E.INVALID_PRODUCER_EPOCH),
                                            (2, E.PRODUCER_FENCED), (3, E.PRODUCER_FENCED)])
def test_a_fenced_producer_gets_the_code_of_its_version(broker, version, fenced):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid).producer_id
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
        assert init(c, tid).error_code == E.CONCURRENT_TRANSACTIONS  # a second producer fences the first
        wait_state(c, tid, "CompleteAbort")
        r = init(c, tid)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, 2)
        assert end(c, tid, pid, 0, True, min(version, 4)) == fenced
        assert add_offsets(c, tid, pid, 0, "g", version) == fenced
        assert add(c, tid, pid, 0, {topic: [0]}, version) == {(topic, 0): fenced}


@pytest.mark.parametrize("version,fenced", [(3, E.INVALID_PRODUCER_EPOCH), (4, E.PRODUCER_FENCED)])
def test_init_producer_id_with_a_stale_epoch(broker, version, fenced):
    tid = _id()
    with client(broker) as c:
        pid = init(c, tid).producer_id
        assert init(c, tid, 4, pid=pid, epoch=0).producer_epoch == 1
        assert init(c, tid, 4, pid=pid, epoch=1).producer_epoch == 2
        assert init(c, tid, version, pid=pid, epoch=0).error_code == fenced


def test_bad_init_requests(broker):
    with client(broker) as c:
        assert init(c, _id(), pid=5, epoch=-1).error_code == E.INVALID_REQUEST
        assert init(c, None, pid=-1, epoch=3).error_code == E.INVALID_REQUEST
        assert init(c, _id(), timeout=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert init(c, _id(), timeout=900_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert init(c, "").error_code == E.INVALID_REQUEST
        r = init(c, None, pid=77, epoch=3)  # idempotent: a new id whatever was sent
        assert r.error_code == E.NONE and r.producer_epoch == 0 and r.producer_id != 77


def test_add_partitions_refuses_unknown_and_internal_partitions_without_adding_any(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid).producer_id
        assert add(c, tid, pid, 0, {topic: [0, 5], "nope": [0]}) == {
            (topic, 0): E.OPERATION_NOT_ATTEMPTED, (topic, 5): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert add(c, tid, pid, 0, {"__consumer_offsets": [0], topic: [0]}) == {
            ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED, (topic, 0): E.OPERATION_NOT_ATTEMPTED}
        assert describe(c, tid)[0].transaction_state == "Empty"
        assert add(c, tid, pid + 1, 0, {topic: [0]}) == {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING}
        assert end(c, tid, pid, 0, True) == E.INVALID_TXN_STATE  # nothing to commit


def test_list_and_describe(broker):
    tid, other = _id(), _id()
    with client(broker) as c:
        pid = init(c, tid).producer_id
        init(c, other)
        r = c.request(LIST, 1, {"state_filters": ["Empty", "Nope"], "producer_id_filters": [pid],
                                "duration_filter": -1})
        assert (r.error_code, list(r.unknown_state_filters)) == (E.NONE, ["Nope"])
        assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in r.transaction_states] == [
            (tid, pid, "Empty")]
        r = c.request(LIST, 0, {"state_filters": [], "producer_id_filters": []})
        assert {tid, other} <= {t.transactional_id for t in r.transaction_states}
        [missing, empty] = describe(c, _id(), "")
        assert (missing.error_code, empty.error_code) == (E.TRANSACTIONAL_ID_NOT_FOUND, E.INVALID_REQUEST)


def test_the_broker_clock_times_out_an_open_transaction(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, timeout=20_000).producer_id
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
        broker.advance(seconds=31)
        wait_state(c, tid, "CompleteAbort")
        assert describe(c, tid)[0].producer_epoch == 1  # fenced
        assert end(c, tid, pid, 0, True) == E.PRODUCER_FENCED


def test_state_survives_a_restart(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid).producer_id
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
    broker.restart()
    with client(broker) as c:
        [d] = describe(c, tid)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, 0)
        assert end(c, tid, pid, 0, True) == E.NONE
        wait_state(c, tid, "CompleteCommit")


def test_reset_forgets_transactional_ids(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid).producer_id
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
        broker.reset()
        assert describe(c, tid)[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert end(c, tid, pid, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
        r = init(c, tid)
        assert r.error_code == E.NONE and r.producer_id > pid  # producer ids never repeat


def test_faults_can_target_a_transactional_id(broker):
    topic, tid, other = _id("t"), _id(), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid).producer_id
        other_pid = init(c, other).producer_id
        with broker.fault("AddPartitionsToTxn", error="CONCURRENT_TRANSACTIONS", transactional_id=tid):
            assert add(c, other, other_pid, 0, {topic: [0]}) == {(topic, 0): 0}
            assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): E.CONCURRENT_TRANSACTIONS}
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}


def test_the_next_transaction_starts_without_concurrent_transactions(broker):
    """The markers and the Complete record land before the client can ask again (no fsync wait):
    a producer that begins its next transaction right after EndTxn is not sent back to retry."""
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid).producer_id
        for seq in range(50):
            assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): E.NONE}
            batch = encode_batch([(None, b"v")], producer_id=pid, producer_epoch=0, base_sequence=seq,
                                 transactional=True)
            r = c.request(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            assert r.responses[0].partition_responses[0].error_code == E.NONE
            assert end(c, tid, pid, 0, True) == E.NONE


def test_dump_log_decodes_the_transaction_log(broker):
    import json
    import subprocess
    import sys

    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid).producer_id
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
        assert end(c, tid, pid, 0, False) == E.NONE
        wait_state(c, tid, "CompleteAbort")
    out = subprocess.run([sys.executable, "-m", "odradek.broker.cli", "dump-log", "--json",
                          str(broker.data_dir / "__transaction_state-0")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    mine = [r for line in out.stdout.splitlines() for r in json.loads(line)["records"]
            if r["key"] == {"type": "TxnKey", "transactional_id": tid}]
    assert [(r["value"]["state"], r["value"]["partitions"]) for r in mine] == [
        ("Empty", None), ("Ongoing", [[topic, 0]]), ("PrepareAbort", [[topic, 0]]), ("CompleteAbort", [])]
    assert {r["value"]["producer_id"] for r in mine} == {pid}
