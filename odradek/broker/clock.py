"""One clock for every timer: real in the server, manual in tests.

Session expiry, rebalance deadlines, the initial join delay, offset expiry,
idle-connection expiry, log retention, fault rules' ``seconds`` and a
``broker_down`` all read ``now_ms()`` and schedule with ``call_at()`` (or
``call_every()`` for a periodic check), so tests drive them by advancing a
clock instead of sleeping: ``ManualClock`` for sans-I/O unit tests,
``BrokerClock`` (the running broker's) for tests against a live broker
(``odradek.broker.control``).

A periodic check that falls due several times within one advance runs once,
at the last of those times (the earlier runs would have found the same or
less to do, since nothing but the clock's own timers acts during an
advance), so an advance of 30 days costs what an advance of one period does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol

import structlog

from odradek.protocol.lean_dataclass import dataclass

log = structlog.get_logger("odradek.clock")


def real_ms() -> int:
    """Monotonic real time in ms: when a client was last heard from, for a sparing advance."""
    return time.monotonic_ns() // 1_000_000


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> TimerHandle: ...

    def call_every(self, period_ms: int, callback: Callable[[], None]) -> TimerHandle: ...

    def client_deadline(self, delay_ms: int) -> int: ...


class _RealRepeat:
    """``RealClock.call_every``'s handle: re-arms an asyncio timer after each run."""

    def __init__(self, period_ms: int, callback: Callable[[], None]) -> None:
        self.period_s = period_ms / 1000.0
        self.callback = callback
        self.handle = asyncio.get_running_loop().call_later(self.period_s, self._run)

    def _run(self) -> None:
        self.handle = asyncio.get_running_loop().call_later(self.period_s, self._run)
        self.callback()

    def cancel(self) -> None:
        self.handle.cancel()


class RealClock:
    """Wall-clock milliseconds; timers run on the running asyncio loop."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> asyncio.TimerHandle:
        delay = max(0.0, (deadline_ms - self.now_ms()) / 1000.0)
        return asyncio.get_running_loop().call_later(delay, callback)

    def call_every(self, period_ms: int, callback: Callable[[], None]) -> _RealRepeat:
        return _RealRepeat(period_ms, callback)

    def client_deadline(self, delay_ms: int) -> int:
        return self.now_ms() + delay_ms


class _Timer:
    __slots__ = ("deadline", "callback", "cancelled", "owner", "period")

    def __init__(self, owner: _TimerHeap, deadline: int, callback: Callable[[], None],
                 period: int | None = None):
        self.owner = owner
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False
        self.period = period

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.owner._cancelled += 1


@dataclass(frozen=True, slots=True)
class Sparing:
    """An advance that spares what is alive in real time (``advance(..., spare_active=...)``)."""

    heard_since_real_ms: int  # heard from at or after this real time (``real_ms``): spared
    shift_ms: int  # how far the advance moves the clock: what is spared moves with it
    target_ms: int  # where the advance ends


class _TimerHeap(ABC):
    """The timers of a controllable clock: one heap, periodic checks coalesced on an advance."""

    def __init__(self) -> None:
        self._timers: list[tuple[int, int, _Timer]] = []
        self._seq = itertools.count()
        self._cancelled = 0
        self.sparing: Sparing | None = None  # set while a sparing advance runs

    @abstractmethod
    def now_ms(self) -> int:
        """The clock's time (manual, or the wall clock plus the advances)."""

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> _Timer:
        return self._push(_Timer(self, deadline_ms, callback))

    def call_every(self, period_ms: int, callback: Callable[[], None]) -> _Timer:
        """Run ``callback`` every ``period_ms`` from now on; once per advance however far it goes."""
        if period_ms <= 0:
            raise ValueError(f"a period must be positive, not {period_ms}")
        return self._push(_Timer(self, self.now_ms() + period_ms, callback, period_ms))

    def client_deadline(self, delay_ms: int) -> int:
        """When a wait for a client's next request ends: ``delay_ms`` from now -- or, while a
        sparing advance runs, from its end, since no client can answer during the jump."""
        if self.sparing is not None:
            return self.sparing.target_ms + delay_ms
        return self.now_ms() + delay_ms

    def pending(self) -> int:
        return len(self._timers) - self._cancelled

    def _push(self, timer: _Timer) -> _Timer:
        heapq.heappush(self._timers, (timer.deadline, next(self._seq), timer))
        return timer

    @abstractmethod
    def _move_to(self, when: int) -> None:
        """Set the clock's time to ``when`` (ms) before the timers due by then fire."""

    def _run_due(self, until: int) -> None:
        """Fire every live timer due by ``until`` in deadline order, each seeing its deadline
        as ``now_ms``; a periodic one due several times runs once, at the last of them."""
        timers = self._timers
        while timers and timers[0][0] <= until:
            deadline, _, timer = heapq.heappop(timers)
            if timer.cancelled:
                self._cancelled -= 1
                continue
            period = timer.period
            if period is not None:
                last = deadline + (until - deadline) // period * period
                if last > deadline:  # later runs of it are due: the last one stands for them all
                    timer.deadline = last
                    self._push(timer)
                    continue
                timer.deadline = deadline + period
                self._push(timer)  # before it runs, so the callback may cancel it
            self._move_to(deadline)
            try:
                timer.callback()
            except Exception:  # one timer's failure must not stop the others
                log.exception("clock.timer_failed", callback=repr(timer.callback))

    def _compact(self) -> None:
        if self._cancelled > 64 and self._cancelled * 2 > len(self._timers):
            self._timers = [e for e in self._timers if not e[2].cancelled]  # heartbeats cancel a lot
            heapq.heapify(self._timers)
            self._cancelled = 0
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
            self._cancelled -= 1


class ManualClock(_TimerHeap):
    """A clock that only moves when told; due timers fire in deadline order."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        super().__init__()
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int, sparing: Sparing | None = None) -> None:
        """Move time forward, firing every timer due on the way at its own deadline."""
        target = self._now + ms
        self.sparing = sparing
        try:
            self._run_due(target)
        finally:
            self.sparing = None
        self._now = target

    def _move_to(self, when: int) -> None:
        self._now = max(self._now, when)


class BrokerClock(_TimerHeap):
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
        super().__init__()
        self._offset = 0
        self._frozen_at: int | None = None
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

    def _push(self, timer: _Timer) -> _Timer:
        super()._push(timer)
        if not self._advancing and (self._armed_for is None or timer.deadline < self._armed_for):
            self._arm()
        return timer

    def advance(self, ms: int, sparing: Sparing | None = None) -> int:
        """Move time forward by ``ms``, firing every timer due on the way; returns the new time.

        ``sparing`` (see ``control/clock_ops.py``) is in force while the timers fire."""
        if ms < 0:
            raise ValueError(f"the clock only moves forward (asked to advance by {ms} ms)")
        target = self.now_ms() + ms
        self._disarm()
        self._advancing = True
        self.sparing = sparing
        try:
            self._run_due(target)
            self._move_to(target)
        finally:
            self._advancing = False
            self.sparing = None
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

    def _fire_due(self) -> None:
        self._armed = self._armed_for = None
        self._advancing = True  # callbacks scheduling more timers arm once, below
        try:
            self._run_due(self.now_ms())
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
        self._compact()
        if not self._timers or self._frozen_at is not None:
            return
        deadline = self._timers[0][0]
        delay = max(0.0, (deadline - self.now_ms()) / 1000.0)
        self._armed = asyncio.get_running_loop().call_later(delay, self._fire_due)
        self._armed_for = deadline
