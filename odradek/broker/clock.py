"""One clock for every timer: real in the server, manual in tests.

Session expiry, rebalance deadlines, the initial join delay and offset expiry
all read ``now_ms()`` and schedule with ``call_at()``, so tests drive them by
advancing a ``ManualClock`` instead of sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class RealClock:
    """Wall-clock milliseconds; timers run on the running asyncio loop."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        delay = max(0.0, (deadline_ms - self.now_ms()) / 1000.0)
        return asyncio.get_running_loop().call_later(delay, callback)


class _ManualTimer:
    __slots__ = ("deadline", "callback", "cancelled")

    def __init__(self, deadline: int, callback: Callable[[], None]):
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told; due timers fire in deadline order."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = start_ms
        self._seq = itertools.count()
        self._timers: list[tuple[int, int, _ManualTimer]] = []

    def now_ms(self) -> int:
        return self._now

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> _ManualTimer:
        timer = _ManualTimer(deadline_ms, callback)
        heapq.heappush(self._timers, (deadline_ms, next(self._seq), timer))
        return timer

    def advance(self, ms: int) -> None:
        """Move time forward, firing every timer due on the way at its own deadline."""
        target = self._now + ms
        while self._timers and self._timers[0][0] <= target:
            deadline, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, deadline)
            timer.callback()
        self._now = target

    def pending(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)
