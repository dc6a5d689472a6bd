"""ShareFetch (78) and ShareAcknowledge (79) in raw frames: acquire, acknowledge, redeliver.

What a share consumer relies on: records handed to one member at a time under a lock,
ACCEPT/REJECT ending them, RELEASE, a lock expiry (the broker clock moved forward) and a
session's end (epoch -1, or its connection closing) redelivering them with the delivery
count incremented, the delivery limit archiving a poison record, the share-partition start
offset and lag in DescribeShareGroupOffsets; and Kafka's error codes for bad sessions and
bad acknowledgements, never a closed connection.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from odradek.testing import ThreadedBroker

from .share_wire import (
    ACCEPT,
    REJECT,
    RELEASE,
    RENEW,
    acks,
    acquired,
    client,
    create_topic,
    describe_offsets,
    fetch_topics,
    init_share,
    offsets_of,
    partition_rows,
    produce,
    share_ack,
    share_fetch,
    topic_id,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

INVALID_REQUEST, INVALID_RECORD_STATE = 42, 121
SESSION_NOT_FOUND, INVALID_SESSION_EPOCH, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION = 122, 123, 100, 3


@pytest.fixture(scope="module")
def broker():
    with ThreadedBroker() as b:
        yield b


@pytest.fixture
def c(broker):
    broker.control("reset")
    with client(broker) as conn:
        yield conn


def _topic(c, name="t", partitions=1, batches=4, per_batch=5, group="g"):
    create_topic(c, name, partitions)
    produce(c, name, batches, per_batch)
    init_share(c, group, name, partitions)
    return topic_id(c, name)


def test_records_are_acquired_by_one_member_and_accept_moves_the_start_offset(c, broker):
    tid = _topic(c)
    first = share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0), max_records=10, batch_size=5)
    assert acquired(first) == [(0, 4, 1), (5, 9, 1)]
    assert first.acquisition_lock_timeout_ms == 30000
    with client(broker) as other:  # the locked records go to nobody else
        second = share_fetch(other, "g", "m2", 0, fetch_topics(tid, 0))
        assert offsets_of(second) == list(range(10, 20))
        # m2's connection stays open: once it closes, 10..19 are released (in the background)
        done = share_fetch(c, "g", "m1", 1, acks(tid, 0, (0, 9, [ACCEPT])))
        assert partition_rows(done)[0].acknowledge_error_code == 0
        assert offsets_of(done) == []  # nothing left: 10..19 are m2's
    d = describe_offsets(c, "g", "t")
    row = d.groups[0].topics[0].partitions[0]
    assert (row.start_offset, row.lag, row.error_code) == (10, 10, 0)


def test_release_redelivers_with_the_delivery_count_incremented(c, broker):
    tid = _topic(c, batches=1)
    assert acquired(share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0))) == [(0, 4, 1)]
    r = share_ack(c, "g", "m1", 1, acks(tid, 0, (0, 4, [ACCEPT, RELEASE, ACCEPT, REJECT, RELEASE])))
    assert r.error_code == 0 and partition_rows(r)[0].error_code == 0
    with client(broker) as other:
        again = share_fetch(other, "g", "m2", 0, fetch_topics(tid, 0))
        assert acquired(again) == [(1, 1, 2), (4, 4, 2)]
        share_ack(other, "g", "m2", 1, acks(tid, 0, (1, 1, [ACCEPT]), (4, 4, [ACCEPT])))
    row = describe_offsets(c, "g", "t").groups[0].topics[0].partitions[0]
    assert (row.start_offset, row.lag) == (5, 0)  # REJECT archived offset 3: never delivered again


def test_a_lock_expiry_redelivers_and_a_late_ack_is_refused(c, broker):
    tid = _topic(c, batches=1)
    assert offsets_of(share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0))) == [0, 1, 2, 3, 4]
    broker.control("advance_clock", ms=30_001)
    with client(broker) as other:
        deadline = time.monotonic() + 5
        while not (got := acquired(share_fetch(other, "g", "m2", 0, fetch_topics(tid, 0)))):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert got == [(0, 4, 2)]
    late = share_ack(c, "g", "m1", 1, acks(tid, 0, (0, 4, [ACCEPT])))
    assert partition_rows(late)[0].error_code == INVALID_RECORD_STATE


def test_renew_keeps_the_lock_on_v2(c, broker):
    tid = _topic(c, batches=1)
    share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0), version=2)
    broker.control("advance_clock", ms=20_000)
    r = share_ack(c, "g", "m1", 1, acks(tid, 0, (0, 4, [RENEW])), version=2, is_renew_ack=True)
    assert partition_rows(r)[0].error_code == 0 and r.acquisition_lock_timeout_ms == 30000
    broker.control("advance_clock", ms=20_000)  # 40 s after the fetch, 20 s after the renewal
    with client(broker) as other:
        assert acquired(share_fetch(other, "g", "m2", 0, fetch_topics(tid, 0))) == []
    v1 = share_ack(c, "g", "m1", 2, acks(tid, 0, (0, 4, [RENEW])))  # RENEW is a v2 type only
    assert partition_rows(v1)[0].error_code == INVALID_REQUEST


def test_the_delivery_limit_archives_a_poison_record(c, broker):
    tid = _topic(c, batches=1, per_batch=1)
    counts = []
    for n in range(5):  # group.share.delivery.count.limit = 5
        r = share_fetch(c, "g", f"m{n}", 0, fetch_topics(tid, 0))
        counts.append(acquired(r))
        share_ack(c, "g", f"m{n}", 1, acks(tid, 0, (0, 0, [RELEASE])))
    assert counts == [[(0, 0, n)] for n in range(1, 6)]
    assert acquired(share_fetch(c, "g", "m9", 0, fetch_topics(tid, 0))) == []
    assert describe_offsets(c, "g", "t").groups[0].topics[0].partitions[0].start_offset == 1


def _wait_released(broker, group: str, member: str, within_s: float = 10) -> None:
    """Until the broker has seen the member's connection close and written the release of its records."""
    def done() -> bool:
        app = broker.app
        return (group, member) not in app.share_sessions.sessions and not app.share_partitions.busy()
    deadline = time.monotonic() + within_s
    while not broker.call(done):
        assert time.monotonic() < deadline, "the closed connection's share session was never released"
        time.sleep(0.02)


def test_a_final_epoch_and_a_closed_connection_release_the_members_records(c, broker):
    tid = _topic(c, batches=2)
    with client(broker) as gone:
        assert offsets_of(share_fetch(gone, "g", "m1", 0, fetch_topics(tid, 0), max_records=5)) == [0, 1, 2, 3, 4]
        assert offsets_of(share_fetch(c, "g", "m2", 0, fetch_topics(tid, 0), max_records=5)) == [5, 6, 7, 8, 9]
    _wait_released(broker, "g", "m1")  # a closed connection is noticed and released in the background
    end = share_fetch(c, "g", "m2", -1, acks(tid, 0, (5, 5, [ACCEPT])))  # released before the answer
    assert end.error_code == 0
    assert acquired(share_fetch(c, "g", "m3", 0, fetch_topics(tid, 0))) == [(0, 4, 2), (6, 9, 2)]
    assert share_fetch(c, "g", "m2", 1, fetch_topics(tid, 0)).error_code == SESSION_NOT_FOUND


def test_sessions_answer_kafkas_codes(c):
    tid = _topic(c, batches=1)
    assert share_fetch(c, "g", "m1", 3, fetch_topics(tid, 0)).error_code == SESSION_NOT_FOUND
    assert share_fetch(c, "g", "m1", 0, acks(tid, 0, (0, 0, [ACCEPT]))).error_code == INVALID_REQUEST
    assert share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0)).error_code == 0
    assert share_fetch(c, "g", "m1", 5, fetch_topics(tid, 0)).error_code == INVALID_SESSION_EPOCH
    assert share_fetch(c, "g", "m1", 1, fetch_topics(tid, 0)).error_code == 0
    assert share_ack(c, "g", "m1", 0, acks(tid, 0, (0, 0, [ACCEPT]))).error_code == INVALID_SESSION_EPOCH
    assert share_ack(c, "g", "m1", 2, acks(tid, 0, (0, 4, [ACCEPT]))).error_code == 0
    assert share_fetch(c, "g", "x" * 37, 0, fetch_topics(tid, 0)).error_code == INVALID_REQUEST
    assert share_fetch(c, "g", "", 0, fetch_topics(tid, 0)).error_code == INVALID_REQUEST
    assert share_ack(c, "g", "nobody", 1, acks(tid, 0, (0, 0, [ACCEPT]))).error_code == SESSION_NOT_FOUND


@pytest.mark.parametrize("batches, code", [
    ([(3, 1, [ACCEPT])], INVALID_REQUEST),                      # first > last
    ([(0, 2, [ACCEPT]), (2, 4, [ACCEPT])], INVALID_REQUEST),    # overlapping
    ([(3, 4, [ACCEPT]), (0, 1, [ACCEPT])], INVALID_REQUEST),    # out of order
    ([(0, 4, [])], INVALID_REQUEST),                            # no type
    ([(0, 4, [ACCEPT, ACCEPT])], INVALID_REQUEST),              # a type list of the wrong length
    ([(0, 4, [9])], INVALID_REQUEST),                           # an unknown type
    ([(0, 9, [ACCEPT])], INVALID_REQUEST),                      # past every record ever acquired
    ([(0, 4, [ACCEPT])], INVALID_RECORD_STATE),                 # another member's records
])
def test_bad_acknowledgements_get_kafkas_codes_and_change_nothing(c, broker, batches, code):
    tid = _topic(c, batches=1)
    share_fetch(c, "g", "owner", 0, fetch_topics(tid, 0))
    share_fetch(c, "g", "intruder", 0, fetch_topics(tid, 0))
    r = share_fetch(c, "g", "intruder", 1, acks(tid, 0, *batches))
    assert r.error_code == 0 and partition_rows(r)[0].acknowledge_error_code == code
    ok = share_ack(c, "g", "owner", 1, acks(tid, 0, (0, 4, [ACCEPT])))
    assert partition_rows(ok)[0].error_code == 0  # the owner's lock was untouched


def test_unknown_topics_and_partitions_are_answered_per_partition(c):
    tid = _topic(c, batches=1)
    r = share_fetch(c, "g", "m1", 0, fetch_topics(uuid.uuid4(), 0) + fetch_topics(tid, 7))
    assert sorted(p.error_code for p in partition_rows(r)) == [UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID]


def test_an_uninitialized_share_partition_is_not_served(c):
    create_topic(c, "fresh")
    produce(c, "fresh", 1, 1)
    tid = topic_id(c, "fresh")
    r = share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0))
    assert partition_rows(r)[0].error_code == -1 and acquired(r) == []  # Kafka: UnknownServerException


def test_a_waiting_fetch_is_woken_by_a_produce(c, broker):
    tid = _topic(c, batches=0)
    share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0))
    with client(broker) as producer:  # the fetch below waits; the produce comes from another connection
        later = threading.Timer(0.2, produce, (producer, "t", 1, 3))
        later.start()
        started = time.monotonic()
        r = share_fetch(c, "g", "m1", 1, [], max_wait_ms=5000)
        later.join()
        assert offsets_of(r) == [0, 1, 2] and time.monotonic() - started < 4


def test_share_acknowledge_alone_and_share_groups_off(c, broker):
    tid = _topic(c, batches=1)
    share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0))
    r = share_ack(c, "g", "m1", -1, acks(tid, 0, (0, 4, [REJECT])))
    assert r.error_code == 0 and partition_rows(r)[0].error_code == 0
    assert describe_offsets(c, "g", "t").groups[0].topics[0].partitions[0].start_offset == 5
    r = c.request(57, 1, {"timeout_ms": 5000, "feature_updates": [
        {"feature": "share.version", "max_version_level": 0, "upgrade_type": 2}], "validate_only": False})
    assert r.error_code == 0, r
    assert share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0)).error_code == 35
    assert share_ack(c, "g", "m1", 1, acks(tid, 0, (0, 0, [ACCEPT]))).error_code == 35
    assert describe_offsets(c, "g", "t").groups[0].error_code == 35


def test_reset_clears_share_sessions_and_state(c, broker):
    tid = _topic(c, batches=1)
    share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0))
    broker.control("reset")
    assert share_fetch(c, "g", "m1", 1, fetch_topics(tid, 0)).error_code == SESSION_NOT_FOUND
    assert broker.call(lambda: (len(broker.app.share_sessions.sessions), len(broker.app.share_partitions.entries))) \
        == (0, 0)
    row = describe_offsets(c, "g", "t").groups[0].topics[0].partitions[0]
    assert (row.start_offset, row.lag) == (-1, -1)


def _transactions(broker, topic: str) -> None:
    """Offsets 0-2 committed (marker 3), 4-5 aborted (marker 6), 7-8 committed (marker 9)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    p.init_transactions(10)
    for values, commit in ((["a", "b", "c"], True), (["x", "y"], False), (["d", "e"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v.encode(), partition=0)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(10)


@pytest.mark.parametrize("isolation, delivered", [
    ("read_committed", [0, 1, 2, 7, 8]),                    # aborted records and markers archived
    ("read_uncommitted", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),   # markers too: clients acknowledge them GAP
])
def test_share_isolation_level_over_transactions(c, broker, isolation, delivered):
    create_topic(c, "tx")
    _transactions(broker, "tx")
    init_share(c, "g", "tx")
    broker.call(lambda: broker.app.group_configs.set_overrides("g", {"share_isolation_level": isolation}))
    try:
        tid = topic_id(c, "tx")
        got = offsets_of(share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0)))
        assert got == delivered
        ranges = [(o, o, [ACCEPT]) for o in got]
        share_fetch(c, "g", "m1", 1, acks(tid, 0, *ranges))
        assert describe_offsets(c, "g", "tx").groups[0].topics[0].partitions[0].start_offset == 10
    finally:
        broker.call(lambda: broker.app.group_configs.set_overrides("g", {}))


def test_acls_as_kafka_checks_them(tmp_path):
    """READ on the group (GROUP_AUTHORIZATION_FAILED at the top), READ on each topic
    (TOPIC_AUTHORIZATION_FAILED on its partitions); DESCRIBE on the group for its offsets."""
    anon, literal, deny = "User:ANONYMOUS", 3, 2
    topic_r, group_r, read, describe_op = 2, 3, 3, 8
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "true"}
    with ThreadedBroker(tmp_path, overrides=overrides) as b, client(b) as c:
        tid = _topic(c, "open", batches=1)
        hidden = _topic(c, "hidden", batches=1)
        acls = [(group_r, "g-denied", read), (group_r, "g-denied", describe_op), (topic_r, "hidden", read)]
        created = c.request(30, 3, {"creations": [
            {"resource_type": t, "resource_name": n, "resource_pattern_type": literal, "principal": anon,
             "host": "*", "operation": op, "permission_type": deny} for t, n, op in acls]})
        assert [r.error_code for r in created.results] == [0, 0, 0]
        assert share_fetch(c, "g-denied", "m", 0, fetch_topics(tid, 0)).error_code == 30
        assert share_ack(c, "g-denied", "m", 1, acks(tid, 0, (0, 0, [ACCEPT]))).error_code == 30
        r = share_fetch(c, "g", "m", 0, fetch_topics(tid, 0) + fetch_topics(hidden, 0))
        rows = {t.topic_id: t.partitions[0] for t in r.responses}
        assert rows[hidden].error_code == 29 and rows[hidden].acquired_records == []
        assert rows[tid].error_code == 0 and len(rows[tid].acquired_records) == 1
        assert describe_offsets(c, "g-denied", "open").groups[0].error_code == 30


def test_record_limit_mode_acquires_exactly_max_records_on_v2(c):
    tid = _topic(c, batches=2)  # two log batches of 5
    exact = share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0), version=2, max_records=3, share_acquire_mode=1)
    assert acquired(exact) == [(0, 2, 1)]
    rest = share_fetch(c, "g", "m1", 1, [], version=2, max_records=3, share_acquire_mode=1)
    assert acquired(rest) == [(3, 5, 1)]
    whole = share_fetch(c, "g", "m1", 2, [], version=2, max_records=1)  # batch_optimized: the rest of the batch
    assert acquired(whole) == [(6, 9, 1)]


def test_share_groups_off_answers_unsupported_version_before_any_acl(tmp_path):
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "false", "super.users": "User:nobody",
                 "odradek.initial.features": "share.version=0"}
    with ThreadedBroker(tmp_path, overrides=overrides) as b, client(b) as c:
        tid = uuid.uuid4()
        assert share_fetch(c, "g", "m", 0, fetch_topics(tid, 0)).error_code == 35
        assert share_ack(c, "g", "m", 1, acks(tid, 0, (0, 0, [ACCEPT]))).error_code == 35
        assert describe_offsets(c, "g", "t").groups[0].error_code == 35
        assert c.request(91, 0, {"group_id": "g", "topics": []}).error_code == 35
        assert c.request(92, 0, {"group_id": "g", "topics": []}).error_code == 35


def test_fault_rules_and_capture_reach_the_share_apis(c, broker):
    tid = _topic(c, batches=1)
    rule = broker.control("add_fault", api="ShareFetch", error="SHARE_SESSION_NOT_FOUND", group_id="g", times=1)
    broker.control("set_capture", max_requests=10)
    try:
        assert share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0)).error_code == SESSION_NOT_FOUND
        assert acquired(share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0))) == [(0, 4, 1)]
        with pytest.raises(ValueError):  # ShareAcknowledge never answers OFFSET_OUT_OF_RANGE
            broker.control("add_fault", api="ShareAcknowledge", error="OFFSET_OUT_OF_RANGE")
        seen = broker.control("captured", api="ShareFetch")
        assert [(x.body.member_id, x.body.share_session_epoch) for x in seen] == [("m1", 0), ("m1", 0)]
    finally:
        broker.control("remove_fault", rule_id=rule)
        broker.control("set_capture", max_requests=0)


def test_altering_the_offsets_of_an_absent_group_creates_an_empty_share_group(c, broker):
    """Kafka's ``alterShareGroupOffsets`` gets or creates the share group: tools can seed a
    group's start offsets before any consumer of it runs, and then see and manage it."""
    tid = _topic(c, batches=2, group="seeded")  # AlterShareGroupOffsets on an id no group has
    [d] = c.request(77, 1, {"group_ids": ["seeded"], "include_authorized_operations": False}).groups
    assert (d.error_code, d.group_state, d.group_epoch, d.members) == (0, "Empty", 0, [])
    listed = c.request(16, 5, {"states_filter": [], "types_filter": ["share"]}).groups
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
        ("seeded", "share", "Empty", "share")]
    row = describe_offsets(c, "seeded").groups[0].topics[0].partitions[0]  # Topics null: what it initialized
    assert (row.start_offset, row.lag, row.error_code) == (0, 10, 0)
    assert acquired(share_fetch(c, "seeded", "m1", 0, fetch_topics(tid, 0)))[0][0] == 0
    deleted = c.request(92, 0, {"group_id": "seeded", "topics": [{"topic_name": "t"}]})
    assert (deleted.error_code, [t.error_code for t in deleted.responses]) == (0, [0])
