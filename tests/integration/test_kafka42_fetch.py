"""Fetch v13-v18 and fetch sessions (KIP-227) over raw frames, as a single-node Kafka 4.2 broker
answers them (``KafkaApis.handleFetchRequest``, ``FetchSession.scala``): topics by id, unknown
ids, sessions opened by full fetches and read incrementally, their errors, the cache's limit
and eviction on the broker clock, and reset."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.fetch_sessions import EVICTION_MS, SHARDS
from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E
from odradek.testing import ThreadedBroker

from .wire_helpers import create_topic, produce

pytestmark = pytest.mark.integration

FETCH, METADATA, DELETE_TOPICS = 1, 3, 20
ZERO = uuid.UUID(int=0)


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def _topic(b, n: int = 0, partitions: int = 1) -> tuple[str, uuid.UUID]:
    name = f"f42-{uuid.uuid4().hex[:8]}"
    create_topic(b, name, partitions)
    if n:
        produce(b, name, n)
    with _client(b) as c:
        r = c.request(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    return name, r.topics[0].topic_id


def _part(p: int, offset: int = 0) -> dict:
    return {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20}


def _fetch(c: SyncClient, version: int, topics: list[tuple[object, list[dict]]], *, session_id: int = 0,
           epoch: int = -1, forgotten: list[tuple[object, list[int]]] = (), max_wait_ms: int = 0):
    """``topics``: (topic id from v13, else name; partitions)."""
    key = "topic_id" if version >= 13 else "topic"
    return c.request(FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "rack_id": "",
        "topics": [{key: t, "partitions": parts} for t, parts in topics],
        "forgotten_topics_data": [{key: t, "partitions": parts} for t, parts in forgotten]})


def _answered(r) -> list[tuple[object, int, int, int]]:
    """(topic id or name, partition, error, records' byte count) of each answered partition."""
    return [(t.topic_id if t.get("topic_id") not in (None, ZERO) else t.topic, p.partition_index, p.error_code,
             len(p.records or b"")) for t in r.responses for p in t.partitions]


# --- topic ids (KIP-516) -----------------------------------------------------------------------

@pytest.mark.parametrize("version", [13, 14, 15, 16, 17, 18])
def test_fetch_by_topic_id_at_every_new_version(broker, version):
    name, tid = _topic(broker, n=3)
    with _client(broker) as c:
        r = _fetch(c, version, [(tid, [_part(0)])])
    assert r.error_code == E.NONE
    [t] = r.responses
    [p] = t.partitions
    assert (t.topic_id, p.partition_index, p.error_code, p.high_watermark) == (tid, 0, E.NONE, 3)
    assert p.records and (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)
    assert list(r.node_endpoints) == []  # KIP-951's hints only beside NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("unknown", [uuid.uuid4(), ZERO], ids=["unknown", "zero"])
def test_fetch_unknown_topic_id(broker, unknown):
    name, tid = _topic(broker, n=1)
    with _client(broker) as c:
        r = _fetch(c, 16, [(unknown, [_part(0), _part(1)]), (tid, [_part(0), _part(4)])], max_wait_ms=5000)
    assert r.error_code == E.NONE
    assert [(t.topic_id, [(p.partition_index, p.error_code, p.high_watermark) for p in t.partitions])
            for t in r.responses] == [
        (unknown, [(0, E.UNKNOWN_TOPIC_ID, -1), (1, E.UNKNOWN_TOPIC_ID, -1)]),
        (tid, [(0, E.NONE, 1), (4, E.UNKNOWN_TOPIC_OR_PARTITION, -1)])]


def test_fetch_v15_follower_state_is_read_from_the_tagged_replica_state(broker):
    """v15 drops ReplicaId for the tagged ReplicaState: a consumer leaves it at -1 and reads."""
    _name, tid = _topic(broker, n=1)
    with _client(broker) as c:
        r = c.request(FETCH, 15, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                                  "session_id": 0, "session_epoch": -1, "rack_id": "",
                                  "replica_state": {"replica_id": -1, "replica_epoch": -1},
                                  "topics": [{"topic_id": tid, "partitions": [_part(0)]}],
                                  "forgotten_topics_data": []})
    assert r.responses[0].partitions[0].error_code == E.NONE


# --- sessions (KIP-227) ------------------------------------------------------------------------

@pytest.mark.parametrize("version", [7, 12, 13, 18])
def test_incremental_session_answers_only_what_changed(broker, version):
    a, aid = _topic(broker, n=2)
    b, bid = _topic(broker, n=1)
    ta, tb = (aid, bid) if version >= 13 else (a, b)
    with _client(broker) as c:
        full = _fetch(c, version, [(ta, [_part(0, 2)]), (tb, [_part(0, 1)])], epoch=0)
        sid = full.session_id
        assert sid != 0 and full.error_code == E.NONE
        assert [x[:3] for x in _answered(full)] == [(ta, 0, E.NONE), (tb, 0, E.NONE)]
        # nothing changed: an empty answer, the session kept
        r1 = _fetch(c, version, [], session_id=sid, epoch=1, max_wait_ms=50)
        assert (r1.error_code, r1.session_id, _answered(r1)) == (E.NONE, sid, [])
        produce(broker, b, 1)
        r2 = _fetch(c, version, [], session_id=sid, epoch=2)
        assert [x[:3] for x in _answered(r2)] == [(tb, 0, E.NONE)] and _answered(r2)[0][3] > 0
        # the client moves b's position on; nothing new beyond it
        r3 = _fetch(c, version, [(tb, [_part(0, 2)])], session_id=sid, epoch=3, max_wait_ms=50)
        assert _answered(r3) == []
        # a forgotten partition is read no more; one named is added
        produce(broker, a, 1)
        r4 = _fetch(c, version, [], session_id=sid, epoch=4, forgotten=[(ta, [0])], max_wait_ms=50)
        assert _answered(r4) == []
        r5 = _fetch(c, version, [(ta, [_part(0, 2)])], session_id=sid, epoch=5)
        assert [x[:3] for x in _answered(r5)] == [(ta, 0, E.NONE)]


def test_session_errors(broker):
    name, tid = _topic(broker, n=1)
    with _client(broker) as c:
        sid = _fetch(c, 16, [(tid, [_part(0)])], epoch=0).session_id
        assert sid != 0
        stale = _fetch(c, 16, [], session_id=sid, epoch=7)
        assert (stale.error_code, stale.session_id, list(stale.responses)) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
        unknown = _fetch(c, 16, [], session_id=sid + 1, epoch=1)
        assert (unknown.error_code, unknown.session_id) == (E.FETCH_SESSION_ID_NOT_FOUND, 0)
        for bad_id in (-5, 2**31 - 1):  # no shard has them: no such session, never a crash
            assert _fetch(c, 16, [], session_id=bad_id, epoch=1).error_code == E.FETCH_SESSION_ID_NOT_FOUND
        # a session made with topic ids used below v13 (and the reverse)
        wrong = _fetch(c, 12, [], session_id=sid, epoch=1)
        assert (wrong.error_code, wrong.session_id) == (E.FETCH_SESSION_TOPIC_ID_ERROR, 0)
        by_name = _fetch(c, 12, [(name, [_part(0)])], epoch=0).session_id
        assert _fetch(c, 13, [], session_id=by_name, epoch=1).error_code == E.FETCH_SESSION_TOPIC_ID_ERROR
        # the right epoch still works after the errors; the same epoch twice does not
        assert _fetch(c, 16, [], session_id=sid, epoch=1, max_wait_ms=10).error_code == E.NONE
        assert _fetch(c, 16, [], session_id=sid, epoch=1).error_code == E.INVALID_FETCH_SESSION_EPOCH


def test_full_fetch_closes_the_session_it_names(broker):
    _name, tid = _topic(broker, n=1)
    with _client(broker) as c:
        sid = _fetch(c, 16, [(tid, [_part(0)])], epoch=0).session_id
        closed = _fetch(c, 16, [(tid, [_part(0)])], session_id=sid, epoch=-1)  # FINAL: sessionless
        assert (closed.session_id, [x[:3] for x in _answered(closed)]) == (0, [(tid, 0, E.NONE)])
        assert _fetch(c, 16, [], session_id=sid, epoch=1).error_code == E.FETCH_SESSION_ID_NOT_FOUND
        again = _fetch(c, 16, [(tid, [_part(0)])], session_id=sid, epoch=0).session_id  # closed, reopened
        assert again not in (0, sid)


def test_a_session_forgetting_every_partition_ends(broker):
    _name, tid = _topic(broker, n=1)
    with _client(broker) as c:
        sid = _fetch(c, 16, [(tid, [_part(0)])], epoch=0).session_id
        r = _fetch(c, 16, [], session_id=sid, epoch=1, forgotten=[(tid, [0])])
        assert (r.error_code, r.session_id, _answered(r)) == (E.NONE, 0, [])
        assert _fetch(c, 16, [], session_id=sid, epoch=2).error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_sessions_outlive_their_connection_and_die_on_reset(broker):
    _name, tid = _topic(broker, n=1)
    with _client(broker) as c:
        sid = _fetch(c, 16, [(tid, [_part(0)])], epoch=0).session_id
    with _client(broker) as c:  # as Kafka's: a session is not tied to a connection
        assert _fetch(c, 16, [], session_id=sid, epoch=1, max_wait_ms=10).session_id == sid
    broker.control("reset")
    with _client(broker) as c:
        assert _fetch(c, 16, [], session_id=sid, epoch=2).error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_topic_recreated_under_its_name_is_inconsistent(broker):
    name, tid = _topic(broker, n=1)
    with _client(broker) as c:
        sid = _fetch(c, 16, [(tid, [_part(0)])], epoch=0).session_id
        assert c.request(DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": ZERO}],
                                            "timeout_ms": 5000}).responses[0].error_code == E.NONE
        gone = _fetch(c, 16, [], session_id=sid, epoch=1)
        assert [x[:3] for x in _answered(gone)] == [(tid, 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
        create_topic(broker, name)
        again = _fetch(c, 16, [], session_id=sid, epoch=2)
        assert [x[:3] for x in _answered(again)] == [(tid, 0, E.INCONSISTENT_TOPIC_ID)]


def test_the_cache_is_split_over_shards_and_evicts_as_kafka(tmp_path):
    """One slot per shard: a ninth session finds its shard full of young sessions (none
    evictable, no stale one) and gets id 0; two minutes of broker clock later the stale one
    goes.  A bigger session may not evict a young one either (``tryEvict``)."""
    with ThreadedBroker(tmp_path, overrides={"max.incremental.fetch.session.cache.slots": SHARDS}) as b:
        _name, tid = _topic(b, n=1, partitions=3)
        with _client(b) as c:
            ids = [_fetch(c, 16, [(tid, [_part(0)])], epoch=0).session_id for _ in range(SHARDS)]
            assert 0 not in ids and len(set(ids)) == SHARDS
            shards = {i // ((2**31 - 1) // SHARDS) for i in ids}
            assert shards == set(range(SHARDS))
            big = _fetch(c, 16, [(tid, [_part(0), _part(1), _part(2)])], epoch=0)
            assert (big.session_id, [x[:3] for x in _answered(big)]) == (
                0, [(tid, 0, E.NONE), (tid, 1, E.NONE), (tid, 2, E.NONE)])
            b.control("advance_clock", ms=EVICTION_MS + 1)
            fresh = _fetch(c, 16, [(tid, [_part(0)])], epoch=0).session_id
            assert fresh != 0
            alive = [i for i in ids if _fetch(c, 16, [], session_id=i, epoch=1, max_wait_ms=0).error_code == 0]
            assert len(alive) == SHARDS - 1  # the first shard's stale session was evicted
        with ThreadedBroker(tmp_path / "none", overrides={"max.incremental.fetch.session.cache.slots": 0}) as z:
            _name, zid = _topic(z, n=1)
            with _client(z) as c:
                assert _fetch(c, 16, [(zid, [_part(0)])], epoch=0).session_id == 0


def test_fault_error_answer_from_v13_is_the_top_level_code_only(broker):
    _name, tid = _topic(broker, n=1)
    with broker.fault("Fetch", error="NOT_LEADER_OR_FOLLOWER", times=2), _client(broker) as c:
        r16 = _fetch(c, 16, [(tid, [_part(0)])], session_id=5, epoch=3)
        assert (r16.error_code, r16.session_id, list(r16.responses)) == (E.NOT_LEADER_OR_FOLLOWER, 5, [])
        r12 = _fetch(c, 12, [(_name, [_part(0)])])
        assert r12.error_code == E.NOT_LEADER_OR_FOLLOWER
        assert [x[:3] for x in _answered(r12)] == [(_name, 0, E.NOT_LEADER_OR_FOLLOWER)]


def test_fault_rules_and_capture_filter_on_topic_names_at_id_versions(broker):
    """Fetch v16 and Produce v13 name topics only by id: a rule or a capture query by topic name
    still finds them, and a per-partition error lands on that topic's partition."""
    name, tid = _topic(broker, n=1)
    other, oid = _topic(broker, n=1)
    with broker.fault("Fetch", error="NOT_LEADER_OR_FOLLOWER", topic=name, partition=0, per_partition=True,
                      times=1), _client(broker) as c:
        r = _fetch(c, 16, [(tid, [_part(0)]), (oid, [_part(0)])])
    assert sorted(x[:3] for x in _answered(r)) == sorted([(tid, 0, E.NOT_LEADER_OR_FOLLOWER), (oid, 0, E.NONE)])
    assert [c.version for c in broker.captured("Fetch", topic=name)] == [16]
    from odradek.protocol.records import encode_batch
    with broker.fault("Produce", error="NOT_ENOUGH_REPLICAS", topic=other, times=1), _client(broker) as c:
        p = c.request(0, 13, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"topic_id": oid, "partition_data": [{"index": 0, "records": encode_batch([(None, b"x")])}]}]})
    assert [(t.topic_id, t.partition_responses[0].error_code) for t in p.responses] == [
        (oid, E.NOT_ENOUGH_REPLICAS)]
    assert [c.version for c in broker.captured("Produce", topic=other)][-1:] == [13]


def test_an_injected_not_leader_carries_kip_951_leader_hints(broker):
    """As Kafka's handleProduceRequest/handleFetchRequest: beside NOT_LEADER_OR_FOLLOWER a Produce
    v10+ / Fetch v16+ partition names the current leader and the answer its endpoint; an older
    version, or another error, has none."""
    name, tid = _topic(broker, n=1)
    node, port = broker.app.node_id, broker.app.endpoint.port
    with broker.fault("Fetch", error="NOT_LEADER_OR_FOLLOWER", topic=name, per_partition=True, times=2), \
            _client(broker) as c:
        r16 = _fetch(c, 16, [(tid, [_part(0)])])
        r15 = _fetch(c, 15, [(tid, [_part(0)])])
    p16 = r16.responses[0].partitions[0]
    assert (p16.error_code, p16.current_leader.leader_id, p16.current_leader.leader_epoch) == (
        E.NOT_LEADER_OR_FOLLOWER, node, 0)
    assert [(n.node_id, n.host, n.port) for n in r16.node_endpoints] == [(node, "127.0.0.1", port)]
    assert r15.responses[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER  # no hints below v16
    from odradek.protocol.records import encode_batch
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": name, "partition_data": [{"index": 0, "records": encode_batch([(None, b"x")])}]}]}
    with broker.fault("Produce", error="NOT_LEADER_OR_FOLLOWER", times=1), _client(broker) as c:
        p10 = c.request(0, 10, body)
    part = p10.responses[0].partition_responses[0]
    assert (part.error_code, part.current_leader.leader_id, len(p10.node_endpoints)) == (
        E.NOT_LEADER_OR_FOLLOWER, node, 1)
    with broker.fault("Produce", error="NOT_ENOUGH_REPLICAS", times=1), _client(broker) as c:
        other = c.request(0, 10, body)
    assert other.responses[0].partition_responses[0].current_leader.leader_id == -1
    assert list(other.node_endpoints) == []


def test_a_throttled_fetch_opens_no_session_and_a_session_keeps_what_it_did_not_send(broker):
    """Kafka decides on the fetch quota before it touches the session (``getThrottledResponse``):
    a throttled incremental fetch keeps its session and answers no partition, which the next
    answer then carries; a throttled full fetch answers session id 0 and opens none."""
    from odradek.broker.wire_client import decode, encode
    from odradek.protocol.records import encode_batch

    name, tid = _topic(broker)

    def produce_5k() -> None:
        with _client(broker) as c:
            c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": name, "partition_data": [{"index": 0, "records": encode_batch([(None, bytes(5000))])}]}]})

    def fetch_as_thr(offset: int, session_id: int = 0, epoch: int = -1):
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": session_id, "session_epoch": epoch, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic_id": tid, "partitions": [_part(0, offset)]}]}
        with _client(broker) as c:
            c.send_raw(encode(FETCH, 16, 7, body, client_id="thr"))
            return decode(FETCH, 16, c.recv_frame())[1]

    with _client(broker) as c:  # 600 B/s: one 5-kB answer per 10-s window gets through, two do not
        r = c.request(49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "thr"}],
                                           "ops": [{"key": "consumer_byte_rate", "value": 600.0, "remove": False}]}],
                              "validate_only": False})
        assert r.entries[0].error_code == E.NONE
    sid = fetch_as_thr(0, epoch=0).session_id  # the topic is empty: no bytes
    produce_5k()
    assert fetch_as_thr(0).responses[0].partitions[0].records  # sessionless, within the quota
    produce_5k()
    throttled = fetch_as_thr(1, sid, 1)
    assert throttled.throttle_time_ms > 0
    assert (throttled.error_code, throttled.session_id, list(throttled.responses)) == (E.NONE, sid, [])
    broker.control("advance_clock", ms=throttled.throttle_time_ms + 20_000)
    later = fetch_as_thr(1, sid, 2)
    assert later.throttle_time_ms == 0 and later.session_id == sid
    assert [x[:3] for x in _answered(later)] == [(tid, 0, E.NONE)] and later.responses[0].partitions[0].records
    sessions = broker.call(lambda: len(broker.app.fetch_sessions))
    full = fetch_as_thr(0, epoch=0)  # both batches, over the quota: no new session
    assert full.throttle_time_ms > 0 and (full.session_id, list(full.responses)) == (0, [])
    assert broker.call(lambda: len(broker.app.fetch_sessions)) == sessions
    broker.control("reset")
