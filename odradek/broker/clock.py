"""One clock for every timer: real in the server, manual in tests.

Session expiry, rebalance deadlines, the initial join delay, offset expiry,
idle-connection expiry and log retention all read ``now_ms()`` and schedule
with ``call_at()``, so tests drive them by advancing a clock instead of
sleeping: ``ManualClock`` for sans-I/O unit tests, ``BrokerClock`` (the
running broker's) for tests against a live broker (``odradek.broker.control``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

import structlog

log = structlog.get_logger("odradek.clock")


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


class _Timer:
    __slots__ = ("deadline", "callback", "cancelled", "clock")

    def __init__(self, clock: BrokerClock, deadline: int, callback: Callable[[], None]):
        self.clock = clock
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.clock._cancelled += 1


class BrokerClock:
    """Wall-clock time that a test can move forward or stop; the running broker's clock.

    ``now_ms`` is the wall clock plus an offset that only grows.  Timers wait
    in one heap; a single asyncio timer is armed for the earliest, so real time
    fires them as ``RealClock`` would.  ``advance(ms)`` moves the offset on and
    fires every timer due on the way, each at its own deadline (``now_ms``
    reads that deadline while it runs), as if the time had passed: a session
    timeout that expires a member, then the rebalance timeout that follows it,
    both within one advance.  ``freeze`` stops time (nothing fires until an
    advance or ``unfreeze``), which makes a test's timeline exact.

    Only what the broker schedules on this clock moves; a client's own timers
    (its heartbeat interval, poll timeouts, retries) run on the client's time.
    Must be used from the broker's event loop thread.
    """

    def __init__(self) -> None:
        self._offset = 0
        self._frozen_at: int | None = None
        self._timers: list[tuple[int, int, _Timer]] = []
        self._seq = itertools.count()
        self._cancelled = 0
        self._armed: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None
        self._advancing = False

    @property
    def frozen(self) -> bool:
        return self._frozen_at is not None

    @property
    def offset_ms(self) -> int:
        """How far this clock is ahead of the wall clock (for reports)."""
        return self.now_ms() - time.time_ns() // 1_000_000

    def now_ms(self) -> int:
        if self._frozen_at is not None:
            return self._frozen_at
        return time.time_ns() // 1_000_000 + self._offset

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(self, deadline_ms, callback)
        heapq.heappush(self._timers, (deadline_ms, next(self._seq), timer))
        if not self._advancing and (self._armed_for is None or deadline_ms < self._armed_for):
            self._arm()
        return timer

    def advance(self, ms: int) -> int:
        """Move time forward by ``ms``, firing every timer due on the way; returns the new time."""
        if ms < 0:
            raise ValueError(f"the clock only moves forward (asked to advance by {ms} ms)")
        target = self.now_ms() + ms
        self._disarm()
        self._advancing = True
        try:
            while self._timers and self._timers[0][0] <= target:
                deadline, _, timer = heapq.heappop(self._timers)
                if timer.cancelled:
                    self._cancelled -= 1
                    continue
                self._move_to(deadline)
                self._run(timer)
            self._move_to(target)
        finally:
            self._advancing = False
            self._arm()
        return self.now_ms()

    def freeze(self) -> int:
        """Stop time where it is (only ``advance`` moves it now); returns the frozen time."""
        if self._frozen_at is None:
            self._frozen_at = self.now_ms()
            self._disarm()
        return self._frozen_at

    def unfreeze(self) -> int:
        """Let real time run again from the frozen time on."""
        if self._frozen_at is not None:
            self._offset = self._frozen_at - time.time_ns() // 1_000_000
            self._frozen_at = None
            self._arm()
        return self.now_ms()

    def pending(self) -> int:
        return len(self._timers) - self._cancelled

    # --- internals ------------------------------------------------------------------------

    def _move_to(self, when: int) -> None:
        """Never backwards: a deadline already passed in real time leaves the clock where it is."""
        now = self.now_ms()
        if when <= now:
            return
        if self._frozen_at is not None:
            self._frozen_at = when
        else:
            self._offset += when - now

    def _run(self, timer: _Timer) -> None:
        try:
            timer.callback()
        except Exception:  # one timer's failure must not stop the others (asyncio logs it too)
            log.exception("clock.timer_failed", callback=repr(timer.callback))

    def _fire_due(self) -> None:
        self._armed = self._armed_for = None
        now = self.now_ms()
        self._advancing = True  # callbacks scheduling more timers arm once, below
        try:
            while self._timers and self._timers[0][0] <= now:
                _, _, timer = heapq.heappop(self._timers)
                if timer.cancelled:
                    self._cancelled -= 1
                    continue
                self._run(timer)
        finally:
            self._advancing = False
            self._arm()

    def _disarm(self) -> None:
        if self._armed is not None:
            self._armed.cancel()
        self._armed = self._armed_for = None

    def _arm(self) -> None:
        """One asyncio timer for the earliest live deadline (none while frozen)."""
        self._disarm()
        if self._cancelled > 64 and self._cancelled * 2 > len(self._timers):
            self._timers = [e for e in self._timers if not e[2].cancelled]  # heartbeats cancel a lot
            heapq.heapify(self._timers)
            self._cancelled = 0
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
            self._cancelled -= 1
        if not self._timers or self._frozen_at is not None:
            return
        deadline = self._timers[0][0]
        delay = max(0.0, (deadline - self.now_ms()) / 1000.0)
        self._armed = asyncio.get_running_loop().call_later(delay, self._fire_due)
        self._armed_for = deadline
