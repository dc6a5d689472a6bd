"""The share-partition state machine on an injected clock: acquire, acknowledge, lock expiry,
delivery limit, start offset, auto offset reset, read_committed, and Kafka's errors for bad acks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from odradek.shares.partition import (
    INVALID_RECORD_STATE,
    INVALID_REQUEST,
    AckBatch,
    AckType,
    AcquiredRecords,
    LogBatch,
    RecordState,
    ShareAckError,
    ShareConfig,
    SharePartition,
    initial_start_offset,
    parse_duration_ms,
)
from odradek.shares.records import StateBatch
from odradek.shares.state import PersistedState

LOCK = 1000
CONFIG = ShareConfig(delivery_count_limit=3, record_lock_duration_ms=LOCK, max_record_locks=100)
A = AckType


def batches(*ranges):
    return [LogBatch(a, b) for a, b in ranges]


def fresh(start=0, **kw):
    return SharePartition(replace(CONFIG, **kw), start)


def ack(sp, member, first, last, *types, now=0):
    return sp.acknowledge(member, [AckBatch(first, last, tuple(types))], now)


def test_acquire_takes_whole_log_batches_and_cuts_entries_at_batch_size():
    sp = fresh()
    got, write = sp.acquire("m1", batches((0, 3), (4, 7), (8, 11)), max_records=5, batch_size=4, now=0)
    # 5 records asked: the second batch is taken whole (MaxRecords is soft), in entries of ~4
    assert got == [AcquiredRecords(0, 3, 1), AcquiredRecords(4, 7, 1)]
    assert write is None  # acquisition is never persisted
    assert sp.fetch_offset() == 8 and sp.end_offset == 8
    assert sp.acquired_by("m1") == list(range(8))


def test_second_member_gets_the_next_records_not_the_locked_ones():
    sp = fresh()
    sp.acquire("m1", batches((0, 4)), max_records=5, batch_size=10, now=0)
    got, _ = sp.acquire("m2", batches((0, 4), (5, 9)), max_records=5, batch_size=10, now=0)
    assert got == [AcquiredRecords(5, 9, 1)]


def test_accept_moves_the_start_offset_past_terminal_records():
    sp = fresh()
    sp.acquire("m1", batches((0, 9)), max_records=10, batch_size=10, now=0)
    write = ack(sp, "m1", 2, 4, A.ACCEPT)
    assert sp.start_offset == 0  # 0-1 still acquired
    assert write.state_batches == [StateBatch(2, 4, 2, 1)] and write.delivery_complete_count == 3
    write = ack(sp, "m1", 0, 1, A.REJECT)
    assert sp.start_offset == 5 and write.start_offset == 5
    assert write.state_batches == []  # 0-1 are below the new start: nothing left to record
    assert write.delivery_complete_count == 0


def test_release_redelivers_with_a_higher_delivery_count():
    sp = fresh()
    sp.acquire("m1", batches((0, 2)), max_records=10, batch_size=10, now=0)
    write = ack(sp, "m1", 1, 1, A.RELEASE)
    assert write.state_batches == [StateBatch(1, 1, 0, 1)]
    assert sp.fetch_offset() == 1
    got, _ = sp.acquire("m2", batches((0, 2)), max_records=10, batch_size=10, now=0)
    assert got == [AcquiredRecords(1, 1, 2)]


def test_per_offset_types_in_one_batch():
    sp = fresh()
    sp.acquire("m1", batches((0, 3)), max_records=10, batch_size=10, now=0)
    write = ack(sp, "m1", 0, 3, A.ACCEPT, A.RELEASE, A.REJECT, A.GAP)
    assert write.state_batches == [StateBatch(1, 1, 0, 1), StateBatch(2, 3, 4, 1)]
    assert sp.start_offset == 1


def test_lock_expiry_on_the_clock_makes_records_available_again():
    sp = fresh()
    sp.acquire("m1", batches((0, 4)), max_records=10, batch_size=10, now=100)
    assert sp.next_deadline() == 100 + LOCK
    assert sp.expire(100 + LOCK - 1) is None
    write = sp.expire(100 + LOCK)
    assert write.state_batches == [StateBatch(0, 4, 0, 1)]
    assert sp.next_deadline() is None
    # a late ack from the first member: INVALID_RECORD_STATE
    with pytest.raises(ShareAckError) as err:
        ack(sp, "m1", 0, 4, A.ACCEPT)
    assert err.value.code == INVALID_RECORD_STATE
    got, _ = sp.acquire("m2", [], max_records=10, batch_size=10, now=2000)
    assert got == [AcquiredRecords(0, 4, 2)]


def test_renew_restarts_the_lock_and_writes_nothing():
    sp = fresh()
    sp.acquire("m1", batches((0, 1)), max_records=10, batch_size=10, now=0)
    assert ack(sp, "m1", 0, 1, A.RENEW, now=900) is None
    assert sp.expire(LOCK) is None and sp.next_deadline() == 900 + LOCK


def test_delivery_limit_archives_a_poison_record():
    sp = fresh()  # limit 3
    for delivery in range(1, 4):
        got, _ = sp.acquire("m1", batches((0, 0)), max_records=1, batch_size=1, now=0)
        assert got == [AcquiredRecords(0, 0, delivery)]
        write = sp.expire(LOCK) if delivery % 2 else ack(sp, "m1", 0, 0, A.RELEASE)
    assert write.state_batches == [] and write.start_offset == 1  # archived at 3, start moved past it
    got, _ = sp.acquire("m1", batches((0, 0)), max_records=1, batch_size=1, now=0)
    assert got == []


def test_session_end_releases_only_that_members_records():
    sp = fresh()
    sp.acquire("m1", batches((0, 1)), max_records=2, batch_size=10, now=0)
    sp.acquire("m2", batches((2, 3)), max_records=2, batch_size=10, now=0)
    write = sp.release_member("m1")
    assert write.state_batches == [StateBatch(0, 1, 0, 1)]
    assert sp.acquired_by("m2") == [2, 3] and sp.fetch_offset() == 0


def test_in_flight_cap_bounds_new_records():
    sp = fresh(max_record_locks=10)
    got, _ = sp.acquire("m1", batches((0, 5), (6, 11), (12, 17)), max_records=100, batch_size=100, now=0)
    assert got == [AcquiredRecords(0, 11, 1)]  # the batch that crosses the cap is taken whole
    got, _ = sp.acquire("m2", batches((12, 17)), max_records=100, batch_size=100, now=0)
    assert got == []


def test_throttled_redelivery_hands_a_much_delivered_run_out_alone():
    sp = fresh(delivery_count_limit=4)  # throttle at 2 deliveries
    sp.acquire("m1", batches((0, 3)), max_records=10, batch_size=10, now=0)
    ack(sp, "m1", 0, 3, A.RELEASE)
    sp.acquire("m1", [], max_records=10, batch_size=10, now=0)
    ack(sp, "m1", 0, 3, A.RELEASE, A.RELEASE, A.ACCEPT, A.RELEASE)
    # 0-1 and 3 were delivered twice: handed out alone, run by run, with no new records
    got, _ = sp.acquire("m2", batches((4, 5)), max_records=10, batch_size=10, now=0)
    assert got == [AcquiredRecords(0, 1, 3)]
    got, _ = sp.acquire("m2", batches((4, 5)), max_records=10, batch_size=10, now=0)
    assert got == [AcquiredRecords(3, 3, 3)]
    got, _ = sp.acquire("m2", batches((4, 5)), max_records=10, batch_size=10, now=0)
    assert got == [AcquiredRecords(4, 5, 1)]


@pytest.mark.parametrize("batches_, code", [
    ([AckBatch(3, 2, (1,))], INVALID_REQUEST),                       # first > last
    ([AckBatch(0, 2, (1,)), AckBatch(2, 3, (1,))], INVALID_REQUEST),  # overlapping
    ([AckBatch(2, 3, (1,)), AckBatch(0, 1, (1,))], INVALID_REQUEST),  # out of order
    ([AckBatch(0, 2, (1, 1))], INVALID_REQUEST),                      # types length mismatch
    ([AckBatch(0, 0, (9,))], INVALID_REQUEST),                        # unknown type
    ([AckBatch(5, 20, (1,))], INVALID_REQUEST),                       # past anything acquired
    ([AckBatch(4, 4, (1,))], INVALID_RECORD_STATE),                   # acquired by another member
])
def test_bad_acks_answer_kafkas_codes_and_change_nothing(batches_, code):
    sp = fresh()
    sp.acquire("m1", batches((0, 3)), max_records=4, batch_size=10, now=0)
    sp.acquire("m2", batches((4, 5)), max_records=2, batch_size=10, now=0)
    before = {o: (r.state, r.count, r.member) for o, r in sp.records.items()}
    with pytest.raises(ShareAckError) as err:
        sp.acknowledge("m1", batches_, 0)
    assert err.value.code == code
    assert {o: (r.state, r.count, r.member) for o, r in sp.records.items()} == before


def test_acks_all_or_nothing_and_ranges_below_start_ignored():
    sp = fresh()
    sp.acquire("m1", batches((0, 3)), max_records=4, batch_size=10, now=0)
    with pytest.raises(ShareAckError):  # the first batch is fine, the second was never acquired by m1
        sp.acknowledge("m1", [AckBatch(0, 1, (1,)), AckBatch(2, 2, (1,)), AckBatch(7, 7, (1,))], 0)
    assert sp.records[0].state == RecordState.ACQUIRED
    ack(sp, "m1", 0, 1, A.ACCEPT)
    assert sp.start_offset == 2
    assert ack(sp, "m1", 0, 1, A.ACCEPT) is None  # already done: ignored, no error


def test_read_committed_archives_aborted_ranges_and_never_returns_them():
    sp = fresh()
    got, write = sp.acquire("m1", batches((0, 2), (3, 5), (6, 6)), max_records=10, batch_size=10, now=0,
                            aborted=[(3, 6)])  # an aborted transaction's records and its marker
    assert got == [AcquiredRecords(0, 2, 1)]
    assert write.state_batches == [StateBatch(3, 6, 4, 1)]
    ack(sp, "m1", 0, 2, A.ACCEPT)
    assert sp.start_offset == 7


def test_log_start_moving_past_the_start_offset():
    sp = fresh()
    sp.acquire("m1", batches((0, 3)), max_records=4, batch_size=10, now=0)
    ack(sp, "m1", 0, 3, A.RELEASE)
    write = sp.move_log_start(2)
    assert sp.start_offset == 2 and write.start_offset == 2 and sp.fetch_offset() == 2


def test_reload_from_persisted_state_redelivers_only_unfinished_records():
    state = PersistedState(state_epoch=1, start_offset=10, state_batches=[
        StateBatch(8, 11, 2, 1),   # partly below the start
        StateBatch(12, 12, 0, 2),
        StateBatch(14, 15, 4, 5),
    ])
    sp = SharePartition.from_persisted(replace(CONFIG, delivery_count_limit=10), state)
    assert sp.start_offset == 12 and sp.end_offset == 16
    assert sp.fetch_offset() == 12
    got, _ = sp.acquire("m1", batches((16, 17)), max_records=10, batch_size=10, now=0)
    # 12 redelivered (3rd time), 13 is in the gap window (never delivered), then new records
    assert got == [AcquiredRecords(12, 12, 3), AcquiredRecords(13, 13, 1), AcquiredRecords(16, 17, 1)]


def test_auto_offset_reset():
    def lookup(ts):
        return 40 if ts <= 1_000_000 else None

    kw = dict(log_start=5, log_end=50, offset_for_timestamp=lookup)
    assert initial_start_offset("earliest", now=0, **kw) == 5
    assert initial_start_offset("latest", now=0, **kw) == 50
    assert initial_start_offset("by_duration:PT1H", now=1_000_000 + 3_600_000, **kw) == 40
    assert initial_start_offset("by_duration:PT1S", now=10_000_000, **kw) == 50
    with pytest.raises(ValueError):
        initial_start_offset("smallest", now=0, **kw)
    assert parse_duration_ms("P1DT2H3M4.5S") == 86_400_000 + 7_200_000 + 180_000 + 4_500
    with pytest.raises(ValueError):
        parse_duration_ms("PT")


def test_a_state_without_a_start_offset_starts_where_the_reset_says():
    state = PersistedState(state_epoch=0, start_offset=-1)
    with pytest.raises(ValueError):
        SharePartition.from_persisted(CONFIG, state)
    sp = SharePartition.from_persisted(CONFIG, state, reset_start=40)
    assert sp.start_offset == 40 and sp.fetch_offset() == 40
    got, _ = sp.acquire("m1", batches((30, 39), (40, 44)), max_records=10, batch_size=10, now=0)
    assert got == [AcquiredRecords(40, 44, 1)]


@pytest.mark.timeout(10)
def test_an_ack_range_reaching_far_below_the_start_costs_nothing():
    """A hostile first offset (-2**63) must not make the broker walk 2**63 offsets below the start."""
    sp = fresh()
    sp.acquire("m1", batches((0, 3)), max_records=4, batch_size=10, now=0)
    ack(sp, "m1", 0, 1, A.ACCEPT)
    ack(sp, "m1", -(2**63), 3, A.ACCEPT)  # one type for the whole range: 2 and 3 accepted
    assert sp.start_offset == 4
    sp.acquire("m1", batches((4, 5)), max_records=2, batch_size=10, now=0)
    with pytest.raises(ShareAckError) as err:  # per-offset types must match the whole range's length
        ack(sp, "m1", -(2**63), 5, A.ACCEPT, A.REJECT)
    assert err.value.code == INVALID_REQUEST
