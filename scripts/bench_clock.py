#!/usr/bin/env python3
"""The broker's clock on the hot paths: a heartbeat's timer reschedule and a read's ``now_ms``.

Every Heartbeat cancels the member's session timer and schedules the next
one; every socket read stamps the connection for ``connections.max.idle.ms``.
Side by side in one run (median of 5 rounds of 200,000): ``RealClock`` (one
asyncio ``call_later`` per timer, what the broker used before) and
``BrokerClock`` (its own heap, one asyncio timer for the earliest deadline,
what a test can fast-forward); and ``time.monotonic()``, which the idle
check read before.

Then ``advance`` on a running in-process broker (50 offsets partitions, the
transaction coordinator, idle-connection checks): 1 hour, 7 days and 30 days,
the clock's part (timers) and the whole call (with the log-maintenance round
it runs), median of 5.  Side by side: the same advance firing each periodic
check once per period, as before ``call_every`` coalesced them.

    python scripts/bench_clock.py
"""

from __future__ import annotations

import asyncio
import statistics
import time

from odradek.broker import clock as clock_module
from odradek.broker.clock import BrokerClock, RealClock
from odradek.testing import Broker

DAY_MS = 24 * 3600 * 1000


def _per_period(self, until: int) -> None:
    """The old way: every occurrence of a periodic check runs (for the side-by-side figure)."""
    import heapq
    timers = self._timers
    while timers and timers[0][0] <= until:
        deadline, _, timer = heapq.heappop(timers)
        if timer.cancelled:
            self._cancelled -= 1
            continue
        if timer.period is not None:
            timer.deadline = deadline + timer.period
            self._push(timer)
        self._move_to(deadline)
        timer.callback()


async def bench_advance() -> None:
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # a line per sweep
    coalesced = clock_module._TimerHeap._run_due
    async with Broker() as b:
        for label, ms in (("1 hour", 3600_000), ("7 days", 7 * DAY_MS), ("30 days", 30 * DAY_MS)):
            row = {}
            for mode, run_due in (("once per advance", coalesced), ("once per period (before)", _per_period)):
                clock_module._TimerHeap._run_due = run_due
                whole, timers = [], []
                for _ in range(5):
                    t = time.perf_counter()
                    b.app.clock.advance(ms)
                    timers.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    await b.advance(ms=ms)
                    whole.append(time.perf_counter() - t)
                row[mode] = (statistics.median(timers) * 1000, statistics.median(whole) * 1000)
            clock_module._TimerHeap._run_due = coalesced
            new, old = row["once per advance"], row["once per period (before)"]
            print(f"advance {label:8s} timers {new[0]:8.2f} ms (before {old[0]:8.1f} ms, {old[0] / new[0]:7.0f}x)"
                  f"   whole call {new[1]:7.1f} ms (before {old[1]:8.1f} ms)")


async def bench(clock, n=200_000):
    now = clock.now_ms()
    t = time.perf_counter()
    h = None
    for i in range(n):  # a heartbeat: cancel the member's timer, schedule the next deadline
        if h is not None:
            h.cancel()
        h = clock.call_at(now + 45_000 + i, lambda: None)
    per = (time.perf_counter() - t) / n * 1e9
    t = time.perf_counter()
    for _ in range(n):
        clock.now_ms()
    per_now = (time.perf_counter() - t) / n * 1e9
    h.cancel()
    return per, per_now


async def main():
    rows = {"RealClock (asyncio call_later)": [], "BrokerClock (heap, one asyncio timer)": []}
    for _ in range(5):
        rows["RealClock (asyncio call_later)"].append(await bench(RealClock()))
        rows["BrokerClock (heap, one asyncio timer)"].append(await bench(BrokerClock()))
    t = time.perf_counter()
    for _ in range(200_000):
        time.monotonic()
    mono = (time.perf_counter() - t) / 200_000 * 1e9
    for k, v in rows.items():
        print(f"{k:40s} cancel+call_at {statistics.median(x[0] for x in v):6.0f} ns   now_ms {statistics.median(x[1] for x in v):5.0f} ns")
    print(f"time.monotonic() (what the idle check read before)    {mono:5.0f} ns")
    await bench_advance()

if __name__ == "__main__":
    asyncio.run(main())
