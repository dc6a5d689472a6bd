"""The data plane of transactions over raw frames: transactional Produce and its verification,
markers written through ``DataPlane.write_txn_marker``, the last stable offset, read_committed
Fetch and ListOffsets, the aborted-transaction index across restarts, DescribeProducers.

The transaction coordinator's answer to verification is replaced by a fake ``TxnVerifier``
(``verify_partition`` of ``app.txn_coordinator``); markers are written the way the coordinator
writes them, by calling the data plane.
"""

from __future__ import annotations

import struct
import threading

import pytest

from odradek.broker.txn_contracts import TxnMarker
from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import (
    ControlRecordType,
    encode_batch,
    iter_batches,
    iter_records,
    parse_control_key,
    parse_end_txn_marker,
)
from odradek.storage import producer_snapshot
from odradek.storage.files import txn_index_path
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

PRODUCE, FETCH, LIST_OFFSETS, DESCRIBE_PRODUCERS = 0, 1, 2, 61
TXN = "txn-1"


class FakeVerifier:
    """Stands in for the transaction coordinator: answers ``code`` and counts the questions."""

    def __init__(self, code: E = E.NONE):
        self.code = code
        self.calls: list[tuple] = []

    def verify_partition(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.calls.append((transactional_id, producer_id, producer_epoch, topic, partition))
        return self.code


def fake(b, code: E = E.NONE) -> FakeVerifier:
    """Answer verifications of ``b``'s transaction coordinator with ``code`` from now on."""
    verifier = FakeVerifier(code)
    b.app.txn_coordinator.verify_partition = verifier.verify_partition
    return verifier


@pytest.fixture
def txb():
    with ThreadedBroker() as b:
        b.verifier = fake(b)
        yield b


def client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def create(c, name, partitions=1, configs=None):
    r = c.request(19, 5, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                                      "assignments": [],
                                      "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                          "timeout_ms": 5000, "validate_only": False})
    assert r.topics[0].error_code == E.NONE


def tbatch(pid, seq, n=1, epoch=0, key=b"k", value=b"v", transactional=True) -> bytes:
    return encode_batch([(key, value + str(i).encode()) for i in range(n)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=transactional)


def produce(c, topic, records, partition=0, txn=TXN, version=9):
    r = c.request(PRODUCE, version, {"transactional_id": txn, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def fetch(c, topic, offset, isolation=1, partition=0, max_wait=0, version=12):
    r = c.request(FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait, "min_bytes": 1, "max_bytes": 50 << 20,
        "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0]


def list_offset(c, topic, ts, isolation, partition=0, version=7):
    r = c.request(LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": ts}]}]})
    return r.topics[0].partitions[0]


def marker(b, topic, pid, commit, epoch=0, coordinator_epoch=0, partition=0) -> E:
    return b._call(b.app.dataplane.write_txn_marker(topic, partition, TxnMarker(pid, epoch, coordinator_epoch,
                                                                                 commit)))


def offsets_of(records: bytes) -> list[int]:
    return [r.offset for r in iter_records(records, verify_crc=False)]


def aborted(p) -> list[tuple[int, int]]:
    return [(a.producer_id, a.first_offset) for a in p.aborted_transactions]


# --- Produce -----------------------------------------------------------------------------

@pytest.mark.parametrize("coordinator, version, code", [
    (E.INVALID_TXN_STATE, 9, E.INVALID_TXN_STATE),  # partition not added, Produce <= v10
    (E.INVALID_TXN_STATE, 10, E.INVALID_TXN_STATE),
    (E.INVALID_TXN_STATE, 11, E.TRANSACTION_ABORTABLE),  # KIP-890: from v11 (GENERIC_ERROR_SUPPORTED)
    (E.TRANSACTION_ABORTABLE, 11, E.TRANSACTION_ABORTABLE),
    (E.PRODUCER_FENCED, 9, E.INVALID_PRODUCER_EPOCH),
    (E.INVALID_PRODUCER_EPOCH, 9, E.INVALID_PRODUCER_EPOCH),
    (E.INVALID_PRODUCER_ID_MAPPING, 9, E.INVALID_PRODUCER_ID_MAPPING),
    (E.CONCURRENT_TRANSACTIONS, 9, E.NOT_ENOUGH_REPLICAS),  # retriable coordinator errors
    (E.COORDINATOR_LOAD_IN_PROGRESS, 7, E.NOT_ENOUGH_REPLICAS),
    (E.NOT_COORDINATOR, 3, E.NOT_ENOUGH_REPLICAS),
])
def test_unverified_transactional_batches_get_the_versions_code(txb, coordinator, version, code):
    txb.verifier.code = coordinator
    with client(txb) as c:
        create(c, "t")
        r = produce(c, "t", tbatch(5, 0), version=version)
        assert r.error_code == code
        assert list_offset(c, "t", -1, 0).offset == 0  # nothing appended
    assert txb.verifier.calls == [(TXN, 5, 0, "t", 0)]


def test_verification_only_before_the_first_batch_of_a_transaction(txb):
    verifier = txb.verifier
    with client(txb) as c:
        create(c, "t", 2)
        assert produce(c, "t", tbatch(5, 0, n=2)).base_offset == 0
        assert produce(c, "t", tbatch(5, 2)).base_offset == 2
        assert produce(c, "t", tbatch(5, 0), partition=1).base_offset == 0
        assert len(verifier.calls) == 2  # one per partition
        assert marker(txb, "t", 5, commit=True) == E.NONE
        verifier.code = E.INVALID_TXN_STATE  # the next transaction has not added the partition
        assert produce(c, "t", tbatch(5, 3)).error_code == E.INVALID_TXN_STATE
        verifier.code = E.NONE
        assert produce(c, "t", tbatch(5, 3)).base_offset == 4  # sequences continue across transactions


def test_a_new_epoch_is_verified_even_while_the_old_one_has_a_transaction_open(txb):
    """Kafka's hasOngoingTransaction compares the epoch: a bumped producer asks the coordinator."""
    verifier = txb.verifier
    with client(txb) as c:
        create(c, "t")
        assert produce(c, "t", tbatch(5, 0, epoch=0)).error_code == E.NONE
        verifier.code = E.PRODUCER_FENCED
        assert produce(c, "t", tbatch(5, 0, epoch=1)).error_code == E.INVALID_PRODUCER_EPOCH
        assert verifier.calls[-1] == (TXN, 5, 1, "t", 0)


def test_without_a_transaction_coordinator_transactional_batches_are_refused(txb):
    coordinator, txb.app.txn_coordinator = txb.app.txn_coordinator, None
    try:
        with client(txb) as c:
            create(c, "t")
            assert produce(c, "t", tbatch(5, 0)).error_code == E.INVALID_TXN_STATE
    finally:
        txb.app.txn_coordinator = coordinator


def test_request_wide_refusals_of_transactional_batches(txb):
    with client(txb) as c:
        create(c, "t", 2)
        assert produce(c, "t", tbatch(5, 0), txn=None).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        r = c.request(PRODUCE, 9, {"transactional_id": TXN, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": tbatch(5, 0)},
                                             {"index": 1, "records": tbatch(6, 0)}]}]})
        assert [p.error_code for p in r.responses[0].partition_responses] == \
            [E.INVALID_PRODUCER_ID_MAPPING] * 2
        control = encode_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], producer_id=5,
                               producer_epoch=0, transactional=True, control=True)
        assert produce(c, "t", control).error_code == E.INVALID_RECORD  # clients never write markers
        assert list_offset(c, "t", -1, 0).offset == 0


def test_plain_batch_while_the_producers_transaction_is_open_is_refused(txb):
    with client(txb) as c:
        create(c, "t")
        assert produce(c, "t", tbatch(5, 0)).error_code == E.NONE
        assert produce(c, "t", tbatch(5, 1, transactional=False)).error_code == E.INVALID_TXN_STATE
        assert marker(txb, "t", 5, commit=False) == E.NONE
        assert produce(c, "t", tbatch(5, 1, transactional=False)).error_code == E.NONE


def test_retried_transactional_batch_is_deduplicated(txb):
    with client(txb) as c:
        create(c, "t")
        assert produce(c, "t", tbatch(5, 0, n=3)).base_offset == 0
        again = produce(c, "t", tbatch(5, 0, n=3))
        assert (again.error_code, again.base_offset) == (E.NONE, 0)
        assert list_offset(c, "t", -1, 0).offset == 3
        assert produce(c, "t", tbatch(5, 5)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER


# --- markers -------------------------------------------------------------------------------

def test_marker_is_a_control_batch_as_kafka_writes_it(txb):
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", tbatch(5, 0, epoch=3))
        assert marker(txb, "t", 5, commit=True, epoch=3, coordinator_epoch=7) == E.NONE
        p = fetch(c, "t", 1, isolation=0)
    [(h, records)] = list(iter_batches(p.records))
    assert h.base_offset == 1 and h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (5, 3, -1, 1)
    assert parse_control_key(records[0].key) == (0, ControlRecordType.COMMIT)
    assert parse_end_txn_marker(records[0].value) == (0, 7)
    assert records[0].value == struct.pack(">hi", 0, 7) and records[0].headers == ()


def test_marker_epoch_checks(txb):
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", tbatch(5, 0, epoch=2))
        assert marker(txb, "t", 5, commit=False, epoch=1) == E.INVALID_PRODUCER_EPOCH
        assert marker(txb, "t", 5, commit=False, epoch=2, coordinator_epoch=4) == E.NONE
        assert marker(txb, "t", 5, commit=True, epoch=2, coordinator_epoch=3) == E.TRANSACTION_COORDINATOR_FENCED
        # a fencing marker raises the epoch: the old epoch is refused, the next one starts at 0
        assert marker(txb, "t", 5, commit=False, epoch=3, coordinator_epoch=4) == E.NONE
        assert produce(c, "t", tbatch(5, 1, epoch=2)).error_code == E.INVALID_PRODUCER_EPOCH
        assert produce(c, "t", tbatch(5, 1, epoch=4)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "t", tbatch(5, 0, epoch=4)).error_code == E.NONE
        assert marker(txb, "nope", 5, commit=True) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert marker(txb, "t", 5, commit=True, partition=3) == E.UNKNOWN_TOPIC_OR_PARTITION


def test_marker_without_an_open_transaction_is_still_written(txb):
    with client(txb) as c:
        create(c, "t")
        assert marker(txb, "t", 9, commit=True) == E.NONE
        p = fetch(c, "t", 0, isolation=1)
        assert (p.last_stable_offset, p.high_watermark, offsets_of(p.records)) == (1, 1, [0])
        assert aborted(p) == []


# --- LSO, read_committed ---------------------------------------------------------------------

def test_read_committed_stops_at_the_open_transaction(txb):
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", encode_batch([(b"a", b"0")]), txn=None)
        produce(c, "t", tbatch(5, 0, n=2))  # offsets 1-2, open
        produce(c, "t", encode_batch([(b"b", b"3")]), txn=None)  # offset 3
        committed = fetch(c, "t", 0)
        assert offsets_of(committed.records) == [0]
        assert (committed.high_watermark, committed.last_stable_offset) == (4, 1)
        assert fetch(c, "t", 1).records == b""  # at the LSO: nothing yet
        uncommitted = fetch(c, "t", 0, isolation=0)
        assert offsets_of(uncommitted.records) == [0, 1, 2, 3]
        assert uncommitted.last_stable_offset == 1 and uncommitted.aborted_transactions is None
        assert fetch(c, "t", 0, version=4).last_stable_offset == 1
        assert (list_offset(c, "t", -1, 1).offset, list_offset(c, "t", -1, 0).offset) == (1, 4)
        assert list_offset(c, "t", -1, 1, version=2).offset == 1
        assert marker(txb, "t", 5, commit=True) == E.NONE
        after = fetch(c, "t", 1)
        assert offsets_of(after.records) == [1, 2, 3, 4] and aborted(after) == []
        assert after.last_stable_offset == after.high_watermark == 5
        assert list_offset(c, "t", -1, 1).offset == 5


def test_read_committed_read_in_a_worker_thread_stops_at_the_stable_offset_it_answers(txb):
    """A reader far behind reads in a worker thread; a transaction opened meanwhile must not leak
    into the answer past the last stable offset computed before the read (clients do not cut at it)."""
    with client(txb) as c:
        create(c, "t")
        for i in range(100):  # more than BIG_READ_LAG behind: the read goes to a worker thread
            produce(c, "t", encode_batch([(b"k", b"%d" % i)]), txn=None)
        log = txb.app.topics.log("t", 0)
        entered, go = threading.Event(), threading.Event()
        original = log.read_span

        def held_read_span(*args, **kwargs):
            if threading.current_thread() is not txb._thread:
                entered.set()
                go.wait(10)
            return original(*args, **kwargs)

        log.read_span = held_read_span
        answer: list = []

        def read() -> None:
            with client(txb) as reader_client:
                answer.append(fetch(reader_client, "t", 0))

        reader = threading.Thread(target=read)
        reader.start()
        try:
            assert entered.wait(10)
            produce(c, "t", tbatch(5, 0))  # offset 100: an open transaction
        finally:
            go.set()
            reader.join(15)
        p = answer[0]
        assert p.last_stable_offset == 100
        assert offsets_of(p.records) == list(range(100))


def test_last_stable_offset_is_never_below_the_log_start(txb):
    """DeleteRecords past an open transaction's first batch: Kafka's first unstable offset
    moves up to the log start, so readers there are not stuck until the marker."""
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", tbatch(5, 0))  # 0: open
        produce(c, "t", encode_batch([(b"a", b"1")]), txn=None)  # 1
        produce(c, "t", encode_batch([(b"a", b"2")]), txn=None)  # 2
        r = c.request(21, 2, {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 2}]}],
                              "timeout_ms": 5000})
        assert r.topics[0].partitions[0].error_code == E.NONE
        p = fetch(c, "t", 2)
        assert (p.last_stable_offset, offsets_of(p.records)) == (2, [])
        assert list_offset(c, "t", -1, 1).offset == 2


def test_timestamp_lookups_stop_at_the_last_stable_offset(txb):
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", encode_batch([(b"a", b"0")], base_timestamp=1000), txn=None)
        produce(c, "t", encode_batch([(b"k", b"1")], base_timestamp=2000, producer_id=5, producer_epoch=0,
                                     base_sequence=0, transactional=True))
        assert (list_offset(c, "t", 1500, 0).offset, list_offset(c, "t", 1500, 1).offset) == (1, -1)
        late = list_offset(c, "t", -3, 1)
        assert (late.error_code, late.offset, late.timestamp) == (E.NONE, -1, -1)
        assert list_offset(c, "t", 500, 1).offset == 0


def test_aborted_transactions_are_listed_for_the_returned_range(txb):
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", tbatch(5, 0, n=2))  # 0-1 aborted later
        produce(c, "t", tbatch(6, 0))  # 2, committed
        assert marker(txb, "t", 5, commit=False) == E.NONE  # 3
        produce(c, "t", encode_batch([(b"x", b"y")]), txn=None)  # 4, still below the LSO (6 is open)
        p = fetch(c, "t", 0)
        assert (p.last_stable_offset, offsets_of(p.records)) == (2, [0, 1])
        assert aborted(p) == [(5, 0)]
        assert marker(txb, "t", 6, commit=True) == E.NONE  # 5
        p = fetch(c, "t", 0)
        assert offsets_of(p.records) == [0, 1, 2, 3, 4, 5] and aborted(p) == [(5, 0)]
        assert aborted(fetch(c, "t", 4)) == []  # the marker is before the range
        assert fetch(c, "t", 0, isolation=0).aborted_transactions is None
    entries = txn_index_path(txb.app.topics.log("t", 0).directory, 0).read_bytes()
    # Kafka's AbortedTxn: version, producer id, first offset, last offset, last stable offset
    assert entries == struct.pack(">hqqqq", 0, 5, 0, 3, 2)


def test_marker_wakes_a_read_committed_long_poll(txb):
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", tbatch(5, 0))
        out = {}
        with client(txb) as c2:
            t = threading.Thread(target=lambda: out.setdefault("p", fetch(c2, "t", 0, max_wait=60_000)))
            t.start()
            while txb.call(txb.app.dataplane.waiters.waiting) == 0:
                t.join(0.01)
            assert marker(txb, "t", 5, commit=True) == E.NONE
            t.join(10)  # the client's own timeout is 15 s: without the wake-up the fetch fails
        assert offsets_of(out["p"].records) == [0, 1]


def test_marker_under_fsync_always_is_durable_when_written(tmp_path):
    with ThreadedBroker(data_dir=tmp_path, overrides={"log.fsync.mode": "always"}) as b:
        fake(b)
        with client(b) as c:
            create(c, "t")
            produce(c, "t", tbatch(5, 0))
            assert marker(b, "t", 5, commit=False) == E.NONE
            assert b.app.topics.log("t", 0).recovery_point == 2


# --- restart ----------------------------------------------------------------------------------

def _txn_history(b) -> None:
    with client(b) as c:
        create(c, "t")
        produce(c, "t", tbatch(5, 0))  # 0: aborted
        produce(c, "t", tbatch(6, 0))  # 1: stays open
        assert marker(b, "t", 5, commit=False) == E.NONE  # 2
        for i in range(30):  # many segments later
            produce(c, "t", encode_batch([(b"k", b"x" * 100 + bytes([i]))]), txn=None)
    assert len(b.app.topics.log("t", 0).segments) > 3


def _check_after_restart(b) -> None:
    fake(b, E.INVALID_TXN_STATE)
    with client(b) as c:
        p = fetch(c, "t", 0)
        assert (p.last_stable_offset, p.high_watermark) == (1, 33)
        assert offsets_of(p.records) == [0] and aborted(p) == [(5, 0)]
        assert list_offset(c, "t", -1, 1).offset == 1
        # the open transaction goes on without a new verification, and its sequence continues
        assert produce(c, "t", tbatch(6, 2)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, "t", tbatch(6, 1)).base_offset == 33
        assert marker(b, "t", 6, commit=True) == E.NONE
        p = fetch(c, "t", 0)
        assert p.last_stable_offset == 35 and aborted(p) == [(5, 0)]


def test_restart_loads_the_producer_snapshot(tmp_path):
    with ThreadedBroker(data_dir=tmp_path, overrides={"log.segment.bytes": "1024"}) as b:
        fake(b)
        _txn_history(b)
        directory = b.app.topics.log("t", 0).directory
        b.restart()
        # a clean stop snapshotted the state at the log end (Kafka's format and name)
        assert producer_snapshot.offsets(directory)[-1] == 33
        entries = {e.producer_id: e for e in producer_snapshot.latest(directory, 33)[1]}
        assert (entries[6].txn_first_offset, entries[5].txn_first_offset) == (1, -1)
        _check_after_restart(b)


def test_a_partition_without_producers_is_snapshotted_too(tmp_path):
    """Else every start would replay its whole log again on its first fetch."""
    with ThreadedBroker(data_dir=tmp_path) as b:
        with client(b) as c:
            create(c, "plain")
            for i in range(3):
                produce(c, "plain", encode_batch([(b"k", b"%d" % i)]), txn=None)
            assert fetch(c, "plain", 0).last_stable_offset == 3  # loads the (empty) producer state
        directory = b.app.topics.log("plain", 0).directory
        b.restart()
        assert producer_snapshot.latest(directory, 3) == (3, [])


def test_open_and_aborted_transactions_survive_a_restart_without_snapshots(tmp_path):
    """As after a crash with no snapshot: the whole log is replayed, the index rewritten."""
    with ThreadedBroker(data_dir=tmp_path, overrides={"log.segment.bytes": "1024"}) as b:
        fake(b)
        _txn_history(b)
        directory = b.app.topics.log("t", 0).directory
        b.stop()
        for o in producer_snapshot.offsets(directory):
            producer_snapshot.snapshot_path(directory, o).unlink()
        txn_index_path(directory, 0).unlink()
        b.start()
        _check_after_restart(b)
        assert txn_index_path(directory, 0).read_bytes() == struct.pack(">hqqqq", 0, 5, 0, 2, 1)


# --- DescribeProducers ---------------------------------------------------------------------------

def test_describe_producers(txb):
    with client(txb) as c:
        create(c, "t")
        produce(c, "t", encode_batch([(b"a", b"0")], producer_id=4, producer_epoch=1, base_sequence=0,
                                     base_timestamp=1234), txn=None)
        produce(c, "t", encode_batch([(b"a", b"0"), (b"b", b"1")], producer_id=5, producer_epoch=2,
                                     base_sequence=0, transactional=True, base_timestamp=5678))
        assert marker(txb, "t", 4, commit=True, epoch=1, coordinator_epoch=3) == E.NONE
        r = c.request(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "t", "partition_indexes": [0, 7]},
                                                         {"name": "nope", "partition_indexes": [0]}]})
    t, missing = r.topics
    p0, p7 = t.partitions
    assert p0.error_code == E.NONE
    got = {p.producer_id: (p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
           for p in p0.active_producers}
    assert got == {4: (1, 0, 3, -1), 5: (2, 1, -1, 1)}
    assert {p.producer_id: p.last_timestamp for p in p0.active_producers}[5] == 5678
    assert p7.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


# --- cleaner ----------------------------------------------------------------------------------

def test_cleaner_drops_aborted_data_and_stops_at_the_open_transaction(tmp_path):
    with ThreadedBroker(data_dir=tmp_path) as b:
        fake(b)
        with client(b) as c:
            create(c, "cmp", configs={"cleanup.policy": "compact", "segment.bytes": "200",
                                      "min.cleanable.dirty.ratio": "0.01"})
            produce(c, "cmp", tbatch(5, 0, key=b"a", value=b"good"))  # 0
            assert marker(b, "cmp", 5, commit=True) == E.NONE  # 1
            produce(c, "cmp", tbatch(6, 0, key=b"a", value=b"bad"))  # 2
            assert marker(b, "cmp", 6, commit=False) == E.NONE  # 3
            produce(c, "cmp", tbatch(7, 0, key=b"a", value=b"open"))  # 4, stays open
            for i in range(3):
                produce(c, "cmp", encode_batch([(b"z", b"%d" % i)]), txn=None)  # 5-7
        b.restart()  # the cleaner's bound comes from producer state rebuilt from the log
        fake(b)
        assert b._call(b.app.logs.run_cleaner(force=True)) == 1
        with client(b) as c:
            p = fetch(c, "cmp", 0, isolation=0)
    kept = [(h.base_offset, h.is_control, [r.value for r in recs]) for h, recs in iter_batches(p.records)]
    assert (2, False, [b"bad0"]) not in kept
    assert (0, False, [b"good0"]) in kept and (3, True, [b"\x00\x00\x00\x00\x00\x00"]) in kept
    assert (4, False, [b"open0"]) in kept  # at the LSO: not cleaned although key a is newer later


def _read_committed_values(b, topic: str, want: int) -> list[bytes]:
    """What kafka-python's read_committed consumer delivers from the start (it filters with the
    aborted transactions listed, skipping a producer's batches until that producer's ABORT marker)."""
    import time

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, enable_auto_commit=False,
                             isolation_level="read_committed")
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and consumer.position(tp) < want:
            got += [m.value for msgs in consumer.poll(timeout_ms=200).values() for m in msgs]
        return got
    finally:
        consumer.close()


def test_an_abort_marker_the_cleaner_removed_is_no_longer_listed(tmp_path):
    """Once the cleaner has removed an aborted transaction's data and then (past its delete
    horizon) its ABORT marker, Fetch must not list that transaction any more: a client marks the
    producer aborted from the listed first offset until it meets the producer's ABORT marker, so
    it would skip the producer's later committed batches.  (The cleaned ``.txnindex`` drops the
    entry; the running broker's aborted list must too.)"""
    with ThreadedBroker(data_dir=tmp_path) as b:
        fake(b)
        with client(b) as c:
            create(c, "cmp", configs={"cleanup.policy": "compact", "segment.bytes": "200",
                                      "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
            produce(c, "cmp", tbatch(5, 0, key=b"a", value=b"bad"))  # 0
            assert marker(b, "cmp", 5, commit=False) == E.NONE  # 1
            produce(c, "cmp", tbatch(5, 1, key=b"b", value=b"good"))  # 2: the same producer, committed
            assert marker(b, "cmp", 5, commit=True) == E.NONE  # 3
            for i in range(6):
                produce(c, "cmp", encode_batch([(b"z%d" % i, b"%d" % i)]), txn=None)  # 4-9
            for _ in range(3):  # drops the aborted data, then the ABORT marker past its horizon
                b._call(b.app.logs.run_cleaner(force=True))
            p = fetch(c, "cmp", 0)
        kept = [h.base_offset for h, _recs in iter_batches(p.records)]
        assert 0 not in kept and 1 not in kept and 2 in kept  # as the cleaner left it
        assert aborted(p) == []
        assert _read_committed_values(b, "cmp", 10) == [b"good0"] + [b"%d" % i for i in range(6)]


def test_aborted_data_whose_marker_is_past_the_cleaned_range_never_replaces_a_committed_value(tmp_path):
    """The ABORT marker (and its ``.txnindex`` entry) can sit in a segment the pass does not clean
    (the active one) while the transaction's data is in the cleaned range: the cleaner must still
    know that data is aborted, as Kafka's ``collectAbortedTransactions`` reads the later segments'
    indexes too.  Else the aborted value wins the key map and the committed one is deleted."""
    with ThreadedBroker(data_dir=tmp_path) as b:
        fake(b)
        with client(b) as c:
            create(c, "cmp", configs={"cleanup.policy": "compact", "segment.bytes": "200",
                                      "min.cleanable.dirty.ratio": "0.01"})
            produce(c, "cmp", encode_batch([(b"a", b"good")]), txn=None)  # 0
            produce(c, "cmp", tbatch(6, 0, key=b"a", value=b"bad"))  # 1
            for i in range(4):
                produce(c, "cmp", encode_batch([(b"z%d" % i, b"%d" % i)]), txn=None)  # 2-5
            assert marker(b, "cmp", 6, commit=False) == E.NONE  # 6
            log = b.app.topics.log("cmp", 0)
            assert log.active_segment.base_offset > 1 and log.active_segment.base_offset <= 6
            b._call(b.app.logs.run_cleaner(force=True))
        assert _read_committed_values(b, "cmp", 7)[:1] == [b"good"]
