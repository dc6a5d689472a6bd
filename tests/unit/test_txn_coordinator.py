"""The transaction coordinator's rules, driven without sockets (Kafka's TransactionCoordinator).

Each test states a behaviour a transactional client relies on: the state
machine per request, the codes of invalid transitions, fencing, KIP-360
epoch bumps and overflow, markers before the Complete record, timeouts,
id expiry, loading, and a reload giving the live state back.
"""

from __future__ import annotations

import pytest

from odradek.broker.runtime.promise import Promise
from odradek.broker.runtime.runtime import ShardStatus
from odradek.broker.txn import TxnConfig
from odradek.broker.txn.coordinator import COORDINATOR_EPOCH
from odradek.broker.txn_contracts import TxnMarker
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import iter_batches
from odradek.transactions.records import TxnKey, TxnValue, decode_key, decode_value
from odradek.transactions.state import TxnState

from .txn_harness import TOPIC, Harness

E = ErrorCode
TID = "txn-1"


@pytest.fixture
async def h(tmp_path):
    harness = await Harness(tmp_path).start()
    yield harness
    await harness.close()


def records(log) -> list[tuple[TxnKey, TxnValue | None]]:
    out = []
    for _header, recs in iter_batches(log.read(0, 1 << 22)):
        out.extend((decode_key(r.key), decode_value(r.value)) for r in recs)
    return out


async def ongoing(h, tid=TID, *partitions):
    error, pid, epoch = await h.init(tid)
    assert error is E.NONE
    assert await h.add(tid, pid, epoch, *(partitions or (0, 1))) is E.NONE
    return pid, epoch


# --- InitProducerId ----------------------------------------------------------------------------

async def test_a_new_id_gets_a_producer_id_at_epoch_0_written_as_an_empty_record(h):
    assert await h.init(TID) == (E.NONE, 1000, 0)
    [(key, value)] = records(h.logs[0])
    assert key == TxnKey(TID)
    assert (value.producer_id, value.producer_epoch, value.timeout_ms, value.state, value.partitions,
            value.start_ms) == (1000, 0, 60000, TxnState.EMPTY, None, -1)


async def test_reinitialising_bumps_the_epoch_and_keeps_the_producer_id(h):
    await h.init(TID)
    assert await h.init(TID) == (E.NONE, 1000, 1)
    assert await h.init(TID, pid=1000, epoch=1) == (E.NONE, 1000, 2)


async def test_kip360_retry_of_a_lost_answer_returns_the_same_epoch(h):
    await h.init(TID)
    assert await h.init(TID, pid=1000, epoch=0) == (E.NONE, 1000, 1)
    assert await h.init(TID, pid=1000, epoch=0) == (E.NONE, 1000, 1)  # the answer was lost: no bump
    error, _pid, _epoch = await h.init(TID, pid=1000, epoch=7)
    assert error is E.PRODUCER_FENCED
    error, _pid, _epoch = await h.init(TID, pid=4242, epoch=1)
    assert error is E.PRODUCER_FENCED


@pytest.mark.parametrize("timeout", [0, -1, 900001])
async def test_a_timeout_outside_1_to_the_maximum_is_invalid(h, timeout):
    assert (await h.init(TID, timeout=timeout))[0] is E.INVALID_TRANSACTION_TIMEOUT
    assert h.meta(TID) is None


async def test_an_empty_transactional_id_is_an_invalid_request(h):
    assert (await h.init(""))[0] is E.INVALID_REQUEST
    assert await h.add("", 1, 0, 0) is E.INVALID_REQUEST
    assert await h.end("", 1, 0, True) is E.INVALID_REQUEST


async def test_epoch_overflow_rotates_to_a_new_producer_id(h):
    await h.init(TID)
    shard = h.coord.shard_for(TID)
    meta = h.meta(TID)
    exhausted = meta.persisted()
    shard.replay(TxnKey(TID), TxnValue(**{**_fields(exhausted), "producer_epoch": 32766}))
    assert await h.init(TID, pid=1000, epoch=32766) == (E.NONE, 1001, 0)
    # the same request retried (its answer lost): the previous id with an exhausted epoch is recognised
    assert await h.init(TID, pid=1000, epoch=32766) == (E.NONE, 1001, 0)
    assert await h.init(TID, pid=1001, epoch=0) == (E.NONE, 1001, 1)


def _fields(value: TxnValue) -> dict:
    return {f: getattr(value, f) for f in TxnValue.__slots__}


# --- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

async def test_adding_partitions_starts_a_transaction(h):
    error, pid, epoch = await h.init(TID)
    assert await h.add(TID, pid, epoch, 0) is E.NONE
    meta = h.meta(TID)
    assert (meta.state, meta.partitions, meta.start_ms) == (TxnState.ONGOING, {(TOPIC, 0)}, h.clock.now_ms())
    await h.tick(50)
    assert await h.add(TID, pid, epoch, 1) is E.NONE
    assert h.meta(TID).partitions == {(TOPIC, 0), (TOPIC, 1)}
    assert h.meta(TID).start_ms == h.clock.now_ms() - 50  # the start is the first add's
    written = len(records(h.logs[0]))
    assert await h.add(TID, pid, epoch, 0, 1) is E.NONE
    assert len(records(h.logs[0])) == written  # nothing new: no record


async def test_add_offsets_adds_the_groups_offsets_partition(h):
    error, pid, epoch = await h.init(TID)
    assert await h.offsets(TID, pid, epoch, "g") is E.NONE
    assert h.meta(TID).partitions == {("__consumer_offsets", 0)}


async def test_add_checks_id_producer_and_epoch(h):
    assert await h.add(TID, 1000, 0, 0) is E.INVALID_PRODUCER_ID_MAPPING
    error, pid, epoch = await h.init(TID)
    assert await h.add(TID, pid + 1, epoch, 0) is E.INVALID_PRODUCER_ID_MAPPING
    assert await h.add(TID, pid, epoch + 1, 0) is E.PRODUCER_FENCED
    assert await h.offsets(TID, pid, epoch - 1) is E.PRODUCER_FENCED


# --- EndTxn ---------------------------------------------------------------------------------

async def test_commit_writes_prepare_then_markers_everywhere_then_complete(h):
    pid, epoch = await ongoing(h)
    assert await h.offsets(TID, pid, epoch) is E.NONE
    assert await h.end(TID, pid, epoch, True) is E.NONE
    await h.settle()
    marker = TxnMarker(pid, epoch, COORDINATOR_EPOCH, True)
    assert sorted(h.markers.written) == [("__consumer_offsets", 0, marker), (TOPIC, 0, marker),
                                         (TOPIC, 1, marker)]
    states = [v.state for _k, v in records(h.logs[0])]
    assert states[-2:] == [TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    last = records(h.logs[0])[-1][1]
    assert last.partitions == () and h.meta(TID).state is TxnState.COMPLETE_COMMIT


END_TABLE = [  # state, commit?, expected (Kafka's TV1 handleEndTransaction)
    ("Empty", True, E.INVALID_TXN_STATE), ("Empty", False, E.INVALID_TXN_STATE),
    ("CompleteCommit", True, E.NONE), ("CompleteCommit", False, E.INVALID_TXN_STATE),
    ("CompleteAbort", True, E.INVALID_TXN_STATE), ("CompleteAbort", False, E.NONE),
    ("PrepareCommit", True, E.CONCURRENT_TRANSACTIONS), ("PrepareCommit", False, E.INVALID_TXN_STATE),
    ("PrepareAbort", True, E.INVALID_TXN_STATE), ("PrepareAbort", False, E.CONCURRENT_TRANSACTIONS),
]


@pytest.mark.parametrize("state,commit,expected", END_TABLE)
async def test_end_txn_in_each_state(h, state, commit, expected):
    error, pid, epoch = await h.init(TID)
    if state != "Empty":
        assert await h.add(TID, pid, epoch, 0) is E.NONE
        if state.startswith("Prepare"):
            h.markers.hold()
        assert await h.end(TID, pid, epoch, "Commit" in state) is E.NONE
        if state.startswith("Complete"):
            await h.settle()
    assert h.state(TID) == state
    assert await h.end(TID, pid, epoch, commit) is expected
    assert h.state(TID) == state  # an invalid or repeated end changes nothing
    h.markers.release()
    await h.settle()


async def test_end_checks_id_producer_and_epoch(h):
    assert await h.end(TID, 1, 0, True) is E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = await ongoing(h)
    assert await h.end(TID, pid + 1, epoch, True) is E.INVALID_PRODUCER_ID_MAPPING
    assert await h.end(TID, pid, epoch + 1, True) is E.PRODUCER_FENCED
    assert await h.end(TID, pid, epoch - 1, False) is E.PRODUCER_FENCED
    assert h.state(TID) == "Ongoing"


async def test_while_markers_are_written_the_id_is_busy(h):
    pid, epoch = await ongoing(h)
    h.markers.hold()
    assert await h.end(TID, pid, epoch, True) is E.NONE
    assert await h.add(TID, pid, epoch, 2) is E.CONCURRENT_TRANSACTIONS
    assert (await h.init(TID))[0] is E.CONCURRENT_TRANSACTIONS
    assert h.coord.verify_partition(TID, pid, epoch, TOPIC, 0) is E.CONCURRENT_TRANSACTIONS
    described = h.coord.describe(TID)
    assert described["transaction_state"] == "PrepareCommit"
    assert described["topics"] == [{"topic": TOPIC, "partitions": [0, 1]}]
    h.markers.release()
    await h.settle()
    assert h.state(TID) == "CompleteCommit"
    assert h.coord.describe(TID)["topics"] == []
    assert await h.add(TID, pid, epoch, 2) is E.NONE  # the next transaction, same epoch (TV1)
    assert h.meta(TID).partitions == {(TOPIC, 2)}


# --- fencing ---------------------------------------------------------------------------------

async def test_init_on_an_open_transaction_aborts_it_with_a_bumped_epoch_and_fences_the_old_producer(h):
    pid, epoch = await ongoing(h)
    assert (await h.init(TID))[0] is E.CONCURRENT_TRANSACTIONS
    await h.settle()
    assert h.state(TID) == "CompleteAbort"
    assert {m for _t, _p, m in h.markers.written} == {TxnMarker(pid, epoch + 1, COORDINATOR_EPOCH, False)}
    assert await h.init(TID) == (E.NONE, pid, epoch + 2)  # the client's retry
    assert await h.end(TID, pid, epoch, True) is E.PRODUCER_FENCED
    assert await h.add(TID, pid, epoch, 0) is E.PRODUCER_FENCED
    assert h.coord.verify_partition(TID, pid, epoch, TOPIC, 0) is E.PRODUCER_FENCED


# --- verification (the data plane's question) ----------------------------------------------

async def test_verify_partition(h):
    assert h.coord.verify_partition(TID, 1, 0, TOPIC, 0) is E.INVALID_PRODUCER_ID_MAPPING
    error, pid, epoch = await h.init(TID)
    assert h.coord.verify_partition(TID, pid, epoch, TOPIC, 0) is E.INVALID_TXN_STATE
    assert await h.add(TID, pid, epoch, 0) is E.NONE
    assert h.coord.verify_partition(TID, pid, epoch, TOPIC, 0) is E.NONE
    assert h.coord.verify_partition(TID, pid, epoch, TOPIC, 1) is E.INVALID_TXN_STATE
    assert h.coord.verify_partition(TID, pid + 1, epoch, TOPIC, 0) is E.INVALID_PRODUCER_ID_MAPPING


# --- markers: retries and deleted partitions ------------------------------------------------

async def test_retriable_marker_errors_are_retried_and_a_deleted_partition_is_dropped(h):
    pid, epoch = await ongoing(h)
    h.markers.errors[(TOPIC, 0)] = [E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR]
    h.markers.errors[(TOPIC, 1)] = [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert await h.end(TID, pid, epoch, True) is E.NONE
    for _ in range(3):
        await h.tick(h.config.marker_retry_backoff_ms)
    await h.settle()
    assert [(t, p) for t, p, _m in h.markers.written] == [(TOPIC, 0)]
    assert h.state(TID) == "CompleteCommit"


async def test_a_failing_complete_write_is_retried_until_it_succeeds(h):
    pid, epoch = await ongoing(h)
    shard = h.coord.shard_for(TID)
    real_write, failures = shard.write, []

    def flaky(records, now=None):
        if records[0][1] is not None and records[0][1].state.is_complete and len(failures) < 2:
            failures.append(1)
            return Promise.resolved(E.NOT_ENOUGH_REPLICAS)
        return real_write(records, now)

    shard.write = flaky
    assert await h.end(TID, pid, epoch, False) is E.NONE
    for _ in range(3):
        await h.tick(h.config.marker_retry_backoff_ms)
    await h.settle()
    assert len(failures) == 2 and h.state(TID) == "CompleteAbort"


async def test_a_failed_write_answers_the_mapped_error_and_leaves_nothing_pending(h):
    pid, epoch = await ongoing(h)
    shard = h.coord.shard_for(TID)
    shard.write = lambda records, now=None: Promise.resolved(E.KAFKA_STORAGE_ERROR)
    assert await h.end(TID, pid, epoch, True) is E.NOT_COORDINATOR
    assert h.meta(TID).pending_state is None and h.state(TID) == "Ongoing"
    assert (await h.init("fresh"))[0] is E.NOT_COORDINATOR
    assert h.meta("fresh") is None  # an id whose first record failed is not kept


# --- timeouts and expiry --------------------------------------------------------------------

async def test_the_sweep_aborts_a_timed_out_transaction_and_fences_its_producer(h):
    error, pid, epoch = await h.init(TID, timeout=15000)
    assert await h.add(TID, pid, epoch, 0) is E.NONE
    await h.tick(h.config.abort_timed_out_interval_ms)  # 10 s: not yet
    assert h.state(TID) == "Ongoing"
    await h.tick(h.config.abort_timed_out_interval_ms)
    await h.settle()
    assert h.state(TID) == "CompleteAbort"
    assert h.markers.written == [(TOPIC, 0, TxnMarker(pid, epoch + 1, COORDINATOR_EPOCH, False))]
    assert await h.end(TID, pid, epoch, True) is E.PRODUCER_FENCED
    assert await h.init(TID, pid=pid, epoch=epoch) == (E.PRODUCER_FENCED, -1, -1)
    assert await h.init(TID) == (E.NONE, pid, epoch + 2)


async def test_idle_ids_expire_and_come_back_with_a_new_producer_id(tmp_path):
    config = TxnConfig(id_expiration_ms=60_000, remove_expired_interval_ms=30_000)
    h = await Harness(tmp_path, config=config).start()
    try:
        error, pid, epoch = await h.init(TID)
        await h.tick(30_000)
        assert h.meta(TID) is not None
        await h.tick(30_000)
        assert h.meta(TID) is None
        assert h.coord.describe(TID)["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
        assert records(h.logs[0])[-1] == (TxnKey(TID), None)  # a tombstone
        assert await h.init(TID) == (E.NONE, pid + 1, 0)
        await h.reload()
        assert h.meta(TID).producer_id == pid + 1
    finally:
        await h.close()


async def test_ongoing_ids_never_expire(tmp_path):
    config = TxnConfig(id_expiration_ms=60_000, remove_expired_interval_ms=30_000, max_timeout_ms=10**9)
    h = await Harness(tmp_path, config=config).start()
    try:
        error, pid, epoch = await h.init(TID, timeout=10**9)
        assert await h.add(TID, pid, epoch, 0) is E.NONE
        await h.tick(120_000)
        assert h.state(TID) == "Ongoing"
    finally:
        await h.close()


# --- loading and restarts -------------------------------------------------------------------

async def test_requests_wait_for_the_load(tmp_path):
    h = Harness(tmp_path)
    try:
        assert h.coord.shards[0].status is ShardStatus.LOADING
        assert (await h.init(TID))[0] is E.COORDINATOR_LOAD_IN_PROGRESS
        assert await h.add(TID, 1, 0, 0) is E.COORDINATOR_LOAD_IN_PROGRESS
        assert await h.end(TID, 1, 0, True) is E.COORDINATOR_LOAD_IN_PROGRESS
        assert h.coord.describe(TID)["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert h.coord.list_transactions([], [])["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
        await h.coord.load()
        assert (await h.init(TID))[0] is E.NONE
    finally:
        await h.close()


@pytest.mark.parametrize("commit", [True, False])
async def test_a_restart_completes_a_prepared_transaction(h, commit):
    pid, epoch = await ongoing(h)
    h.markers.hold()
    assert await h.end(TID, pid, epoch, commit) is E.NONE
    await h.reopen()  # the markers never got out
    h.markers.release()
    await h.settle()
    assert h.state(TID) == ("CompleteCommit" if commit else "CompleteAbort")
    assert {(t, p) for t, p, _m in h.markers.written} == {(TOPIC, 0), (TOPIC, 1)}
    assert {m.commit for _t, _p, m in h.markers.written} == {commit}


async def test_a_restart_keeps_an_open_transaction_and_its_start_time(h):
    pid, epoch = await ongoing(h)
    start = h.meta(TID).start_ms
    await h.reopen()
    meta = h.meta(TID)
    assert (meta.state, meta.start_ms, meta.partitions) == (TxnState.ONGOING, start, {(TOPIC, 0), (TOPIC, 1)})
    assert await h.end(TID, pid, epoch, True) is E.NONE


async def test_live_state_equals_the_replayed_state(h):
    for i in range(4):
        pid, epoch = await ongoing(h, f"t{i}", i)
        if i % 2:
            assert await h.end(f"t{i}", pid, epoch, i == 1) is E.NONE
    await h.settle()
    live = h.persisted()
    await h.reopen()
    assert h.persisted() == live


# --- describe and list ----------------------------------------------------------------------

async def test_list_filters_by_state_producer_and_duration(h):
    await ongoing(h, "a")
    await h.tick(1000)
    _error, pb, _eb = await h.init("b")
    listed = h.coord.list_transactions([], [])
    assert [(t["transactional_id"], t["transaction_state"]) for t in listed["transaction_states"]] == \
        [("a", "Ongoing"), ("b", "Empty")]
    only = h.coord.list_transactions(["Ongoing", "Bogus"], [])
    assert [t["transactional_id"] for t in only["transaction_states"]] == ["a"]
    assert only["unknown_state_filters"] == ["Bogus"]
    assert [t["transactional_id"] for t in h.coord.list_transactions([], [pb])["transaction_states"]] == ["b"]
    # open longer than 500 ms: "a"; "b" has no transaction (start -1) and so counts as very long
    durations = h.coord.list_transactions([], [], 500)["transaction_states"]
    assert [t["transactional_id"] for t in durations] == ["a", "b"]
    assert h.coord.list_transactions([], [], 5000)["transaction_states"] == \
        [{"transactional_id": "b", "producer_id": pb, "transaction_state": "Empty"}]


# --- bad input and durability modes -------------------------------------------------------------

async def test_an_unwritable_id_is_refused_without_a_trace(h):
    huge = "x" * 40_000  # longer than a record's int16 string length
    error, _pid, _epoch = await h.init(huge)
    assert error is E.UNKNOWN_SERVER_ERROR
    assert h.meta(huge) is None and records(h.logs[0]) == []
    assert await h.init(TID) == (E.NONE, 1001, 0)


async def test_with_fsync_always_a_transaction_completes_and_reloads(tmp_path):
    from odradek.storage.config import FsyncMode

    h = await Harness(tmp_path, fsync=FsyncMode.ALWAYS).start()
    try:
        pid, epoch = await ongoing(h)
        assert await h.end(TID, pid, epoch, True) is E.NONE
        await h.settle()
        assert h.state(TID) == "CompleteCommit"
        live = h.persisted()
        await h.reopen()
        assert h.persisted() == live
    finally:
        await h.close()
