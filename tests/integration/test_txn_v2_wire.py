"""Transactions v2 (KIP-890) and the Kafka 4 versions of the transactional APIs, in raw frames.

EndTxn v5 bumps the epoch at every end and answers the producer id and epoch
to continue with (a new producer id at epoch 0 once the epoch is exhausted);
a retry is recognised by its epoch; an abort with nothing added is allowed.
AddPartitionsToTxn v4/v5 is the broker-to-broker batch (verify only, or add
as a v2 client).  InitProducerId v5 and AddOffsetsToTxn v4 answer as before.
The ``__transaction_state`` values are Kafka's TransactionLogValue v1 (tag 2:
the client's transaction version) once transaction.version >= 1, v0 at 0.
"""

from __future__ import annotations

import pytest

from odradek.broker.runtime.loading import iter_log_batches
from odradek.broker.txn.coordinator import EPOCH_EXHAUSTED
from odradek.protocol.errors import ErrorCode as E
from odradek.transactions.records import decode_key

from .test_txn_wire import (
    ADD_OFFSETS,
    ADD_PARTS,
    END,
    _id,
    add,
    add_offsets,
    client,
    describe,
    init,
    wait_state,
)
from .wire_helpers import create_topic

pytestmark = pytest.mark.integration

UPDATE_FEATURES = 57


def end_v5(c, tid, pid, epoch, commit=True):
    r = c.request(END, 5, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                           "committed": commit})
    return r.error_code, r.producer_id, r.producer_epoch


def batch_add(c, version, *txns):
    """AddPartitionsToTxn v4+: [(tid, pid, epoch, verify_only, {topic: [partitions]})]."""
    r = c.request(ADD_PARTS, version, {"transactions": [
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": verify,
         "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        for tid, pid, epoch, verify, topics in txns]})
    assert r.error_code == 0
    return {x.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                 for t in x.topic_results for p in t.results_by_partition}
            for x in r.results_by_transaction}


def _markers(b, topic: str, partition: int = 0) -> list[tuple[int, int, bool]]:
    """(producer id, epoch, commit) of each control batch in the partition."""
    def read():
        log = b.app.topics.log(topic, partition)
        return [(h.producer_id, h.producer_epoch, r[0].key[3] == 1) for h, r in iter_log_batches(log)
                if h.is_control]
    return b.call(read)


def _state_values(b, tid: str) -> list[bytes]:
    """The raw ``__transaction_state`` values written for ``tid``, oldest first."""
    def read():
        shard = b.app.txn_coordinator.shard_for(tid)
        return [bytes(r.value) for _h, recs in iter_log_batches(shard.log) for r in recs
                if r.key is not None and decode_key(r.key).transactional_id == tid]
    return b.call(read)


def _produce_txn(b, topic, pid, epoch, tid, seq=0):
    from odradek.protocol.records import encode_batch  # noqa: PLC0415

    batch = encode_batch([(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         transactional=True)
    with client(b) as c:
        r = c.request(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0].error_code


def test_end_txn_v5_bumps_the_epoch_at_every_end(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        r = init(c, tid, 5)
        pid, epoch = r.producer_id, r.producer_epoch
        for commit in (True, False, True):
            assert add(c, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
            assert _produce_txn(broker, topic, pid, epoch, tid) == 0
            assert end_v5(c, tid, pid, epoch, commit) == (E.NONE, pid, epoch + 1)
            wait_state(c, tid, "CompleteCommit" if commit else "CompleteAbort")
            [d] = describe(c, tid)
            assert (d.producer_id, d.producer_epoch) == (pid, epoch + 1)
            # a retry (the answer was lost) is recognised by the old epoch: the current pair again
            assert end_v5(c, tid, pid, epoch, commit) == (E.NONE, pid, epoch + 1)
            assert end_v5(c, tid, pid, epoch, not commit)[0] == E.INVALID_TXN_STATE
            epoch += 1
    # the markers carry the bumped epochs (TV2: strictly above the data's)
    assert _markers(broker, topic) == [(pid, 1, True), (pid, 2, False), (pid, 3, True)]


def test_end_txn_v5_errors(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        assert end_v5(c, tid, pid, 0, True) == (E.INVALID_TXN_STATE, -1, -1)  # nothing to commit
        assert end_v5(c, tid, pid + 1, 0, True) == (E.INVALID_PRODUCER_ID_MAPPING, -1, -1)
        assert end_v5(c, _id(), pid, 0, True) == (E.INVALID_PRODUCER_ID_MAPPING, -1, -1)
        assert end_v5(c, "", pid, 0, True) == (E.INVALID_REQUEST, -1, -1)
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
        assert end_v5(c, tid, pid, 3, True) == (E.PRODUCER_FENCED, -1, -1)  # a newer epoch
        assert end_v5(c, tid, pid, 0, True) == (E.NONE, pid, 1)
        wait_state(c, tid, "CompleteCommit")
        assert end_v5(c, tid, pid, 2, True) == (E.PRODUCER_FENCED, -1, -1)


def test_end_txn_v5_aborts_with_nothing_added(broker):
    tid = _id()
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        assert end_v5(c, tid, pid, 0, False) == (E.NONE, pid, 1)  # Empty + abort: allowed in TV2
        wait_state(c, tid, "CompleteAbort")
        assert end_v5(c, tid, pid, 1, False) == (E.NONE, pid, 2)  # CompleteAbort + abort: a new end
        assert end_v5(c, tid, pid, 1, False) == (E.NONE, pid, 2)  # the retry of it


def test_end_txn_v5_moves_to_a_new_producer_id_when_the_epoch_is_exhausted(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id

        def exhaust():
            broker.app.txn_coordinator.shard_for(tid).txns[tid].producer_epoch = EPOCH_EXHAUSTED
        broker.call(exhaust)
        assert add(c, tid, pid, EPOCH_EXHAUSTED, {topic: [0]}) == {(topic, 0): 0}
        error, new_pid, epoch = end_v5(c, tid, pid, EPOCH_EXHAUSTED, True)
        assert (error, epoch) == (E.NONE, 0) and new_pid != pid
        wait_state(c, tid, "CompleteCommit")
        [d] = describe(c, tid)
        assert (d.producer_id, d.producer_epoch) == (new_pid, 0)
        # the retry with the old pair is recognised
        assert end_v5(c, tid, pid, EPOCH_EXHAUSTED, True) == (E.NONE, new_pid, 0)
    assert _markers(broker, topic) == [(pid, EPOCH_EXHAUSTED + 1, True)]


def test_a_v1_end_after_v2_still_works(broker):
    """The version is the request's: EndTxn v4 after v5 ends without a bump."""
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
        assert end_v5(c, tid, pid, 0, True) == (E.NONE, pid, 1)
        wait_state(c, tid, "CompleteCommit")
        assert add(c, tid, pid, 1, {topic: [0]}) == {(topic, 0): 0}
        assert c.request(END, 4, {"transactional_id": tid, "producer_id": pid, "producer_epoch": 1,
                                  "committed": True}).error_code == E.NONE
        wait_state(c, tid, "CompleteCommit")
        assert describe(c, tid)[0].producer_epoch == 1


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_batch(broker, version):
    topic, a, b = _id("t"), _id(), _id()
    create_topic(broker, topic, 2)
    with client(broker) as c:
        pa, pb = init(c, a, 5).producer_id, init(c, b, 5).producer_id
        assert add(c, a, pa, 0, {topic: [0]}) == {(topic, 0): 0}
        got = batch_add(c, version, (a, pa, 0, True, {topic: [0, 1]}), (b, pb, 0, False, {topic: [1]}))
        assert got == {a: {(topic, 0): E.NONE, (topic, 1): E.TRANSACTION_ABORTABLE}, b: {(topic, 1): E.NONE}}
        [d] = describe(c, b)
        assert (d.transaction_state, [(t.topic, list(t.partitions)) for t in d.topics]) == (
            "Ongoing", [(topic, [1])])
        # errors per transaction: fenced, unknown id, unknown partition (the others then 55)
        got = batch_add(c, version, (a, pa, 7, True, {topic: [0]}), (_id(), 1, 0, False, {topic: [0]}),
                        (b, pb, 0, False, {topic: [0, 9], "nope": [0]}))
        assert list(got.values()) == [
            {(topic, 0): E.PRODUCER_FENCED}, {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING},
            {(topic, 0): E.OPERATION_NOT_ATTEMPTED, (topic, 9): E.UNKNOWN_TOPIC_OR_PARTITION,
             ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}]
        assert batch_add(c, version) == {}


def test_init_producer_id_v5_and_add_offsets_v4(broker):
    tid = _id()
    with client(broker) as c:
        r = init(c, tid, 5)
        assert (r.error_code, r.producer_epoch) == (E.NONE, 0)
        assert add_offsets(c, tid, r.producer_id, 0, "g", 4) == E.NONE
        assert add_offsets(c, tid, r.producer_id, 5, "g", 4) == E.PRODUCER_FENCED
        r = init(c, tid, 5, pid=r.producer_id, epoch=0)  # fences the open transaction
        assert r.error_code == E.CONCURRENT_TRANSACTIONS
        assert c.request(ADD_OFFSETS, 4, {"transactional_id": "", "producer_id": 1, "producer_epoch": 0,
                                          "group_id": "g"}).error_code == E.INVALID_REQUEST


def test_transaction_log_values_follow_the_transaction_version(broker):
    topic, tid, tid0 = _id("t"), _id(), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        assert add(c, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
        assert end_v5(c, tid, pid, 0, True)[0] == E.NONE
        wait_state(c, tid, "CompleteCommit")
        values = _state_values(broker, tid)
        assert [v[:2] for v in values] == [b"\x00\x01"] * 4  # Empty, Ongoing, PrepareCommit, CompleteCommit
        # Kafka's TransactionLogValue v1: the classic client's records carry no tag; the v2 end's
        # carry ClientTransactionVersion (tag 2) = 2
        assert [v[-1:] for v in values[:2]] == [b"\x00"] * 2
        assert [v[-5:] for v in values[2:]] == [b"\x01\x02\x02\x00\x02"] * 2
        r = c.request(UPDATE_FEATURES, 1, {"timeout_ms": 1000, "validate_only": False, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 0, "upgrade_type": 2}]})
        assert r.error_code == 0
        init(c, tid0, 4)
        assert [v[:2] for v in _state_values(broker, tid0)] == [b"\x00\x00"]  # v0 at transaction.version 0


# --- a Kafka 4 producer under transactions v2: Produce v12 adds, EndTxn v5 bumps ------------------------

def produce_v(b, version, topic, batches: dict[int, bytes], tid):
    with client(b) as c:
        r = c.request(0, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": p, "records": d} for p, d in batches.items()]}]})
    return {p.index: p.error_code for t in r.responses for p in t.partition_responses}


def tbatch(pid, epoch, seq, *values: bytes) -> bytes:
    from odradek.protocol.records import encode_batch  # noqa: PLC0415

    return encode_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=True)


def read_committed(b, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed confluent-kafka consumer sees, by partition then offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: PLC0415

    with client(b) as c:
        r = c.request(2, 5, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                           for p in range(partitions)]}]})
        ends = [p.offset for p in r.topics[0].partitions]
    consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": _id("reader"),
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                seen[msg.partition()].append(msg.value())
            positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
            if all(tp.offset >= end for tp, end in zip(positions, ends, strict=True)):
                break
    finally:
        consumer.close()
    return [v for p in range(partitions) for v in seen[p]]


def test_a_kafka_4_producer_commits_and_aborts_with_implicit_adds(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic, 2)
    with client(broker) as c:
        r = init(c, tid, 5)
        pid, epoch = r.producer_id, r.producer_epoch
        values = {}
        for n, commit in enumerate([True, False, True]):
            got = produce_v(broker, 12, topic, {0: tbatch(pid, epoch, 0, b"a%d" % n), 1: tbatch(pid, epoch, 0, b"b%d" % n)},
                            tid)
            assert got == {0: E.NONE, 1: E.NONE}
            # a second batch of the same transaction goes straight in (the partition is in it)
            assert produce_v(broker, 12, topic, {0: tbatch(pid, epoch, 1, b"c%d" % n)}, tid) == {0: E.NONE}
            [d] = describe(c, tid)
            assert (d.transaction_state, sorted(d.topics[0].partitions)) == ("Ongoing", [0, 1])
            error, pid2, epoch2 = end_v5(c, tid, pid, epoch, commit)
            assert (error, pid2, epoch2) == (E.NONE, pid, epoch + 1)
            values[n] = commit
            epoch = epoch2
            wait_state(c, tid, "CompleteCommit" if commit else "CompleteAbort")
    assert read_committed(broker, topic, 2) == [b"a0", b"c0", b"a2", b"c2", b"b0", b"b2"]
    assert _markers(broker, topic, 0) == [(pid, 1, True), (pid, 2, False), (pid, 3, True)]


def test_fencing_under_transactions_v2(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic, 2)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 0, 0, b"zombie")}, tid) == {0: E.NONE}
        assert init(c, tid, 5).error_code == E.CONCURRENT_TRANSACTIONS  # a new instance fences the open one
        wait_state(c, tid, "CompleteAbort")
        r = init(c, tid, 5)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, 2)
        # the fenced instance: its produce (an add the coordinator refuses) and its end
        assert produce_v(broker, 12, topic, {1: tbatch(pid, 0, 0, b"late")}, tid) == {1: E.INVALID_PRODUCER_EPOCH}
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 0, 1, b"late")}, tid) == {0: E.INVALID_PRODUCER_EPOCH}
        assert end_v5(c, tid, pid, 0, True) == (E.PRODUCER_FENCED, -1, -1)
        # the new instance carries on
        assert produce_v(broker, 12, topic, {1: tbatch(pid, 2, 0, b"new")}, tid) == {1: E.NONE}
        assert end_v5(c, tid, pid, 2, True) == (E.NONE, pid, 3)
        wait_state(c, tid, "CompleteCommit")
    assert read_committed(broker, topic, 2) == [b"new"]
    assert _markers(broker, topic, 0) == [(pid, 1, False)]  # the fence's abort, at the bumped epoch


@pytest.mark.parametrize(("version", "code"), [(9, E.INVALID_TXN_STATE), (10, E.INVALID_TXN_STATE),
                                               (11, E.TRANSACTION_ABORTABLE), (12, E.NONE), (13, E.NONE)])
def test_a_partition_not_in_the_transaction_per_produce_version(broker, version, code):
    """Before v12 Kafka only verifies (48, then 120 from v11); from v12 the produce adds it."""
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        if version == 13:
            from .test_kafka42_versions import _topic_id  # noqa: PLC0415

            topic_id = _topic_id(broker, topic)
            r = c.request(0, 13, {"transactional_id": tid, "acks": -1, "timeout_ms": 1000, "topic_data": [
                {"topic_id": topic_id, "partition_data": [{"index": 0, "records": tbatch(pid, 0, 0, b"x")}]}]})
            got = r.responses[0].partition_responses[0].error_code
        else:
            got = produce_v(broker, version, topic, {0: tbatch(pid, 0, 0, b"x")}, tid)[0]
        assert got == code
        [d] = describe(c, tid)
        assert d.transaction_state == ("Ongoing" if code == E.NONE else "Empty")


def test_implicit_add_errors(broker):
    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        # a transactions-v2 producer's first batch in a partition starts at sequence 0
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 0, 5, b"x")}, tid) == {0: E.OUT_OF_ORDER_SEQUENCE_NUMBER}
        assert produce_v(broker, 12, topic, {0: tbatch(pid + 1, 0, 0, b"x")}, tid) == {
            0: E.INVALID_PRODUCER_ID_MAPPING}
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 0, 0, b"x")}, _id()) == {0: E.INVALID_PRODUCER_ID_MAPPING}
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 3, 0, b"x")}, tid) == {0: E.INVALID_PRODUCER_EPOCH}
        # a partition that does not exist is not added; the others of the request are
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 0, 0, b"x"), 7: tbatch(pid, 0, 0, b"y")}, tid) == {
            0: E.NONE, 7: E.UNKNOWN_TOPIC_OR_PARTITION}
        [d] = describe(c, tid)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]


def test_txn_offset_commit_v5_adds_the_offsets_partition(broker):
    topic, tid, group = _id("t"), _id(), _id("g")
    create_topic(broker, topic)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        r = c.request(28, 5, {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": 0,
                              "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                                  {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                                  "committed_leader_epoch": -1,
                                                                  "committed_metadata": None}]}]})
        assert r.topics[0].partitions[0].error_code == E.NONE
        [d] = describe(c, tid)
        assert [t.topic for t in d.topics] == ["__consumer_offsets"]
        assert end_v5(c, tid, pid, 0, True) == (E.NONE, pid, 1)
        wait_state(c, tid, "CompleteCommit")
        r = c.request(9, 8, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
                             "require_stable": True})
        assert r.groups[0].topics[0].partitions[0].committed_offset == 42


def test_add_partitions_to_txn_v4_wants_cluster_action():
    """v4+ come from brokers: CLUSTER_ACTION on the cluster, else a top-level CLUSTER_AUTHORIZATION_FAILED."""
    from odradek.testing import ThreadedBroker  # noqa: PLC0415

    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with ThreadedBroker(overrides=overrides) as b, client(b) as c:
        r = c.request(ADD_PARTS, 4, {"transactions": [{"transactional_id": "t", "producer_id": 1,
                                                       "producer_epoch": 0, "verify_only": True, "topics": []}]})
        assert (r.error_code, list(r.results_by_transaction)) == (E.CLUSTER_AUTHORIZATION_FAILED, [])


@pytest.mark.parametrize(("tid_known", "epoch", "code"), [(True, 4, E.INVALID_PRODUCER_EPOCH),
                                                          (False, 0, E.INVALID_PRODUCER_ID_MAPPING)])
def test_txn_offset_commit_v5_bad_producers(broker, tid_known, epoch, code):
    """The add's refusal on every partition, as the group coordinator rewrites it (90 -> 47)."""
    topic, tid = _id("t"), _id()
    create_topic(broker, topic, 2)
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        r = c.request(28, 5, {"transactional_id": tid if tid_known else _id(), "group_id": "g", "producer_id": pid,
                              "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                              "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                  {"partition_index": p, "committed_offset": 1, "committed_leader_epoch": -1,
                                   "committed_metadata": None} for p in (0, 1)]}]})
        assert [p.error_code for p in r.topics[0].partitions] == [code, code]
        assert describe(c, tid)[0].transaction_state == "Empty"


def test_produce_v12_meets_the_previous_end_still_completing(broker):
    """While the previous end's markers are being written the add meets CONCURRENT_TRANSACTIONS:
    the broker retries it (20 ms apart, up to 100 ms) and then answers 51 (unconverted for TV2)."""
    import asyncio  # noqa: PLC0415

    topic, tid = _id("t"), _id()
    create_topic(broker, topic)
    coordinator = broker.app.txn_coordinator
    real = coordinator.markers
    gate: dict = {}

    class Held:
        async def write_txn_marker(self, *args):
            gate.setdefault("event", asyncio.Event())
            await gate["event"].wait()
            return await real.write_txn_marker(*args)

    broker.call(setattr, coordinator, "markers", Held())
    with client(broker) as c:
        pid = init(c, tid, 5).producer_id
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 0, 0, b"a")}, tid) == {0: E.NONE}
        assert end_v5(c, tid, pid, 0, True) == (E.NONE, pid, 1)
        assert describe(c, tid)[0].transaction_state == "PrepareCommit"
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 1, 0, b"b")}, tid) == {0: E.CONCURRENT_TRANSACTIONS}
        broker.call(setattr, coordinator, "markers", real)
        broker.call(lambda: gate.setdefault("event", asyncio.Event()).set())
        wait_state(c, tid, "CompleteCommit")
        assert produce_v(broker, 12, topic, {0: tbatch(pid, 1, 0, b"b")}, tid) == {0: E.NONE}
