"""Idempotent producer state: Kafka's sequence rules, dedupe window, rebuild from the log, id blocks."""

from __future__ import annotations

import pytest

from odradek.broker.dataplane.producers import (
    INT32_MAX,
    PartitionProducers,
    ProducerIdAllocator,
    SequenceError,
    last_sequence,
)
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import encode_batch, read_batch_header
from odradek.storage.config import LogConfig
from odradek.storage.log import Log


def header(pid=1, epoch=0, seq=0, n=1):
    return read_batch_header(encode_batch([(b"k", b"v")] * n, producer_id=pid, producer_epoch=epoch,
                                          base_sequence=seq))


def appended(state: PartitionProducers, h, offset: int) -> None:
    assert state.check(h) is None
    state.record(h, offset, -1)


def test_last_sequence_wraps_like_kafka():
    assert last_sequence(5, 3) == 8
    assert last_sequence(INT32_MAX - 1, 3) == 1


def test_in_order_batches_are_accepted_and_retries_deduped():
    s = PartitionProducers()
    offset = 0
    for seq in range(0, 14, 2):
        appended(s, header(seq=seq, n=2), offset)
        offset += 2
    # the last five batches are remembered with their offsets
    for seq in range(4, 14, 2):
        dup = s.check(header(seq=seq, n=2))
        assert dup is not None and (dup.first_offset, dup.last_offset) == (seq, seq + 1)
    # older than the window: not a known duplicate, and out of order
    with pytest.raises(SequenceError) as info:
        s.check(header(seq=2, n=2))
    assert info.value.code == E.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize("h, code", [
    (header(seq=3), E.OUT_OF_ORDER_SEQUENCE_NUMBER),  # gap after last seq 1
    (header(seq=1, n=2), E.OUT_OF_ORDER_SEQUENCE_NUMBER),  # overlaps but matches no batch
    (header(epoch=1, seq=5), E.OUT_OF_ORDER_SEQUENCE_NUMBER),  # new epoch must start at 0
])
def test_sequence_errors(h, code):
    s = PartitionProducers()
    appended(s, header(seq=0, n=2), 0)
    with pytest.raises(SequenceError) as info:
        s.check(h)
    assert info.value.code == code


def test_epochs_fence_older_producers():
    s = PartitionProducers()
    appended(s, header(epoch=0, seq=0), 0)
    appended(s, header(epoch=1, seq=0), 1)
    with pytest.raises(SequenceError) as info:
        s.check(header(epoch=0, seq=1))
    assert info.value.code == E.INVALID_PRODUCER_EPOCH
    with pytest.raises(SequenceError):  # fenced before dedupe: even a retry of its own batch
        s.check(header(epoch=0, seq=0))


def test_unknown_producer_may_start_anywhere():
    s = PartitionProducers()
    appended(s, header(pid=9, seq=1234), 0)
    appended(s, header(pid=9, seq=1235), 1)


def test_sequence_wraps_to_zero():
    s = PartitionProducers()
    appended(s, header(seq=INT32_MAX - 1, n=2), 0)
    appended(s, header(seq=0), 2)


def test_state_is_rebuilt_from_the_log_tail(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4096))
    try:
        for seq in range(40):
            log.append(encode_batch([(b"k", b"x" * 100)], producer_id=3, producer_epoch=0, base_sequence=seq))
        log.append(encode_batch([(b"k", b"plain")]))
        assert len(log.segments) > 1
        s = PartitionProducers()
        s.rebuild(log)
        dup = s.check(header(pid=3, seq=39))
        assert dup is not None and dup.first_offset == 39
        with pytest.raises(SequenceError):
            s.check(header(pid=3, seq=41))
        assert s.check(header(pid=3, seq=40)) is None
    finally:
        log.close()


def test_rebuild_finds_an_open_transaction_older_than_the_log_tail(tmp_path):
    """An open transaction pins the last stable offset however much was written after it, so the
    rebuild scans the whole log (it used to read only the last 64 MiB)."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=2048, index_interval_bytes=100))
    try:
        log.append(encode_batch([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0,
                                transactional=True))
        for seq in range(60):
            log.append(encode_batch([(b"k", b"x" * 100)], producer_id=8, producer_epoch=0, base_sequence=seq))
        assert len(log.segments) > 3
        s = PartitionProducers()
        s.rebuild(log)
        assert s.in_txn(7) and not s.in_txn(8)
        assert s.last_stable_offset(log.log_end_offset) == 0
        assert s.entries[7].txn_first_offset == 0
    finally:
        log.close()


async def test_producer_ids_never_repeat_across_restarts(tmp_path):
    first = ProducerIdAllocator(tmp_path, block_size=3)
    ids = [await first.allocate() for _ in range(4)]
    assert ids == [0, 1, 2, 3]
    again = ProducerIdAllocator(tmp_path, block_size=3)  # a restart: the next block starts after all issued
    more = [await again.allocate() for _ in range(2)]
    assert min(more) > max(ids)
    assert len(set(ids + more)) == 6


def test_a_transactions_v2_marker_needs_an_epoch_above_the_producers():
    """ProducerAppendInfo.checkProducerEpoch: TV2 markers carry the bumped epoch (KAFKA-19999)."""
    state = PartitionProducers()
    state.loaded = True
    h = read_batch_header(encode_batch([(None, b"v")], producer_id=1, producer_epoch=3, base_sequence=0,
                                       transactional=True))
    appended(state, h, 0)
    state.check_marker(1, 3, 0)  # classic: the producer's own epoch
    with pytest.raises(SequenceError) as e:
        state.check_marker(1, 3, 0, transaction_version=2)  # TV2: the same epoch, a transaction open
    assert e.value.code == E.INVALID_PRODUCER_EPOCH
    state.check_marker(1, 4, 0, transaction_version=2)
    state.complete(1, 4, 0, True, 1, 0)
    state.check_marker(1, 4, 0, transaction_version=2)  # the same marker again, nothing open: a retry
    with pytest.raises(SequenceError):
        state.check_marker(1, 3, 0, transaction_version=2)
