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
