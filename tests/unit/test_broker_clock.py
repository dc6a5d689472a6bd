"""BrokerClock: real time that a test can advance or freeze; timers fire at their own deadlines."""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker.clock import BrokerClock


async def test_an_advance_fires_due_timers_in_deadline_order_each_seeing_its_deadline():
    clock = BrokerClock()
    t0 = clock.freeze()
    seen: list[tuple[str, int]] = []
    clock.call_at(t0 + 300, lambda: seen.append(("b", clock.now_ms())))
    clock.call_at(t0 + 100, lambda: seen.append(("a", clock.now_ms())))
    clock.call_at(t0 + 900, lambda: seen.append(("late", clock.now_ms())))
    assert clock.advance(500) == t0 + 500
    assert seen == [("a", t0 + 100), ("b", t0 + 300)]
    assert clock.pending() == 1


async def test_a_timer_scheduled_by_a_timer_fires_within_the_same_advance():
    """A session timeout expiring a member, then the rebalance deadline it starts."""
    clock = BrokerClock()
    t0 = clock.freeze()
    seen: list[int] = []

    def first() -> None:
        clock.call_at(clock.now_ms() + 1000, lambda: seen.append(clock.now_ms()))

    clock.call_at(t0 + 1000, first)
    clock.advance(5000)
    assert seen == [t0 + 2000]


async def test_cancelled_timers_do_not_fire_and_are_dropped():
    clock = BrokerClock()
    t0 = clock.freeze()
    fired: list[int] = []
    handles = [clock.call_at(t0 + i, lambda i=i: fired.append(i)) for i in range(1, 201)]
    for h in handles[:150]:
        h.cancel()
    clock.advance(1000)
    assert fired == list(range(151, 201))
    assert clock.pending() == 0


async def test_frozen_time_does_not_move_and_real_time_resumes_from_it():
    clock = BrokerClock()
    fired = asyncio.Event()
    t0 = clock.freeze()
    clock.call_at(t0 + 20, fired.set)
    await asyncio.sleep(0.05)
    assert clock.now_ms() == t0 and not fired.is_set()
    clock.unfreeze()
    await asyncio.wait_for(fired.wait(), 5)  # real time fires it
    assert clock.now_ms() >= t0 + 20


async def test_real_time_fires_timers_and_an_advance_brings_a_far_one_forward():
    clock = BrokerClock()
    fired = asyncio.Event()
    clock.call_at(clock.now_ms() + 3_600_000, fired.set)  # an hour away
    clock.advance(3_600_000)
    assert fired.is_set()
    assert clock.offset_ms >= 3_600_000 - 5


async def test_a_failing_timer_does_not_stop_the_others():
    clock = BrokerClock()
    t0 = clock.freeze()
    fired: list[int] = []
    clock.call_at(t0 + 1, lambda: 1 / 0)
    clock.call_at(t0 + 2, lambda: fired.append(2))
    clock.advance(10)
    assert fired == [2]


async def test_time_only_moves_forward():
    clock = BrokerClock()
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_a_periodic_check_runs_once_per_advance_at_its_last_due_time_and_keeps_its_rhythm():
    clock = BrokerClock()
    t0 = clock.freeze()
    runs: list[int] = []
    clock.call_every(1000, lambda: runs.append(clock.now_ms()))
    clock.advance(30 * 24 * 3600 * 1000 + 500)  # 30 days: 2.6 million periods
    assert runs == [t0 + 30 * 24 * 3600 * 1000]
    clock.advance(500)
    assert runs[-1] == t0 + 30 * 24 * 3600 * 1000 + 1000  # the next boundary, as before


async def test_a_periodic_check_runs_among_one_shot_timers_at_its_last_due_time():
    clock = BrokerClock()
    t0 = clock.freeze()
    seen: list[str] = []
    clock.call_every(100, lambda: seen.append(f"check@{clock.now_ms() - t0}"))
    clock.call_at(t0 + 250, lambda: seen.append("expiry@250"))
    clock.advance(350)
    assert seen == ["expiry@250", "check@300"]


async def test_a_cancelled_periodic_check_stops():
    clock = BrokerClock()
    clock.freeze()
    runs: list[int] = []
    handle = clock.call_every(10, lambda: runs.append(1))
    clock.advance(10)
    handle.cancel()
    clock.advance(100)
    assert runs == [1] and clock.pending() == 0
