#!/usr/bin/env python3
"""The broker's clock on the hot paths: a heartbeat's timer reschedule and a read's ``now_ms``.

Every Heartbeat cancels the member's session timer and schedules the next
one; every socket read stamps the connection for ``connections.max.idle.ms``.
Side by side in one run (median of 5 rounds of 200,000): ``RealClock`` (one
asyncio ``call_later`` per timer, what the broker used before) and
``BrokerClock`` (its own heap, one asyncio timer for the earliest deadline,
what a test can fast-forward); and ``time.monotonic()``, which the idle
check read before.

    python scripts/bench_clock.py
"""

from __future__ import annotations

import asyncio
import statistics
import time

from odradek.broker.clock import BrokerClock, RealClock


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

if __name__ == "__main__":
    asyncio.run(main())
