"""The fetch session cache's rules, sans-I/O, as Kafka's ``FetchSessionCacheShard`` and
``FetchMetadata`` keep them: epochs, shards and their id ranges, and who may evict whom."""

from __future__ import annotations

from odradek.broker.fetch_sessions import (
    EVICTION_MS,
    ID_RANGE,
    INT32_MAX,
    SHARDS,
    ZERO_UUID,
    FetchSessionCache,
    Wanted,
    next_epoch,
)
from odradek.protocol.errors import ErrorCode as E


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _wanted(n: int, topic: str = "t") -> list[Wanted]:
    return [Wanted((topic, p), topic, ZERO_UUID, p, 0, 1 << 20) for p in range(n)]


def _answer(hw: int = 0, records: bytes = b"") -> dict:
    return {"records": records, "high_watermark": hw, "log_start_offset": 0, "error_code": E.NONE}


def _open(cache: FetchSessionCache, n: int = 1, privileged: bool = False) -> int:
    wanted = _wanted(n)
    context = cache.context(12, 0, 0, privileged, wanted, [])
    return context.finish([(w, _answer()) for w in wanted])[1]


def _fill_shard_zero(cache: FetchSessionCache, size: int = 1) -> int:
    """Open sessions until the next one goes to shard 0 again; the id of shard 0's session."""
    first = _open(cache, size)
    for _ in range(SHARDS - 1):
        _open(cache, size)
    return first


def test_epochs_wrap_to_one_and_final_stays_final():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(INT32_MAX) == 1
    assert next_epoch(-1) == -1 and next_epoch(-7) == -1


def test_sessions_go_to_the_shards_in_turn_with_ids_in_their_ranges():
    cache = FetchSessionCache(SHARDS * 2, Clock())
    ids = [_open(cache) for _ in range(SHARDS)]
    assert [i // ID_RANGE for i in ids] == list(range(SHARDS))
    assert len(cache) == SHARDS


def test_a_full_shard_of_young_sessions_refuses_an_unprivileged_newcomer():
    clock = Clock()
    cache = FetchSessionCache(SHARDS, clock)  # one slot per shard
    first = _fill_shard_zero(cache, size=1)
    assert _open(cache, n=50) == 0  # bigger, but the young session is not evictable by all
    assert cache.get(first) is not None
    assert cache.evictions == 0


def test_a_privileged_newcomer_evicts_an_unprivileged_young_session():
    cache = FetchSessionCache(SHARDS, Clock())
    first = _fill_shard_zero(cache)
    assert _open(cache, privileged=True) != 0
    assert cache.get(first) is None and cache.evictions == 1


def test_a_stale_session_goes_first():
    clock = Clock()
    cache = FetchSessionCache(SHARDS, clock)
    first = _fill_shard_zero(cache, size=5)
    clock.now += EVICTION_MS + 1
    assert _open(cache, n=1) != 0  # smaller, but the other is stale
    assert cache.get(first) is None


def test_an_old_but_used_session_is_evicted_only_by_a_bigger_one():
    clock = Clock()
    cache = FetchSessionCache(SHARDS, clock)
    first = _fill_shard_zero(cache, size=3)
    clock.now += EVICTION_MS + 1
    session = cache.get(first)
    # used now: not stale, but created long ago, so evictable by all (``touch``)
    assert cache.context(12, first, session.epoch, False, [], []).error == E.NONE
    assert _open(cache, n=3) == 0  # as many partitions: (False, 3, 0) sorts before it (``EvictableKey``)
    for _ in range(SHARDS - 1):
        _open(cache)  # the other shards' turns (their stale sessions make room)
    assert _open(cache, n=4) != 0  # more partitions: worth more
    assert cache.get(first) is None


def test_no_slots_no_sessions():
    cache = FetchSessionCache(SHARDS - 1, Clock())  # under one per shard: every shard holds 0
    assert _open(cache) == 0 and len(cache) == 0


def test_incremental_answers_hold_what_changed_and_data_moves_to_the_end():
    cache = FetchSessionCache(1000, Clock())
    wanted = _wanted(3)
    sid = cache.context(12, 0, 0, False, wanted, []).finish([(w, _answer(5)) for w in wanted])[1]
    context = cache.context(12, sid, 1, False, [], [])
    answers = [(context.wanted[0], _answer(5)), (context.wanted[1], _answer(6)),
               (context.wanted[2], _answer(5, b"data"))]
    error, session_id, kept = context.finish(answers)
    assert (error, session_id, [w.partition for w, _a in kept]) == (E.NONE, sid, [1, 2])
    assert [w.partition for w in cache.context(12, sid, 2, False, [], []).wanted] == [0, 1, 2]
    context = cache.context(12, sid, 3, False, [], [])
    context.finish([(w, _answer(6 if w.partition == 1 else 5, b"x" if w.partition == 0 else b""))
                    for w in context.wanted])
    assert [w.partition for w in cache.context(12, sid, 4, False, [], []).wanted] == [1, 2, 0]


def test_an_error_is_always_answered_and_resent_once_gone():
    cache = FetchSessionCache(1000, Clock())
    wanted = _wanted(1)
    sid = cache.context(12, 0, 0, False, wanted, []).finish([(wanted[0], _answer(5))])[1]
    context = cache.context(12, sid, 1, False, [], [])
    failed = {**_answer(-1), "error_code": E.OFFSET_OUT_OF_RANGE}
    assert len(context.finish([(context.wanted[0], failed)])[2]) == 1
    context = cache.context(12, sid, 2, False, [], [])
    assert len(context.finish([(context.wanted[0], _answer(5))])[2]) == 1  # the high watermark was reset
    context = cache.context(12, sid, 3, False, [], [])
    assert context.finish([(context.wanted[0], _answer(5))])[2] == []


def test_a_request_between_context_and_answer_makes_the_older_one_an_epoch_error():
    cache = FetchSessionCache(1000, Clock())
    wanted = _wanted(1)
    sid = cache.context(12, 0, 0, False, wanted, []).finish([(wanted[0], _answer())])[1]
    slow = cache.context(12, sid, 1, False, [], [])
    cache.context(12, sid, 2, False, [], [])  # a pipelined next one
    assert slow.finish([(slow.wanted[0], _answer())]) == (E.INVALID_FETCH_SESSION_EPOCH, sid, [])
