"""Moving the running broker's clock from a test: advance, freeze, unfreeze.

Everything the broker waits for on its clock fires as if the time had
passed: session and rebalance timeouts, the initial rebalance delay, KIP-211
offset retention and its expiry sweep, idle connections
(``connections.max.idle.ms``), segment rolling by ``segment.ms`` (at the next
append) and time-based segment retention (the retention round runs before
the advance returns, if its check interval has passed).  Request-level waits
that a client asked for (a Fetch's ``max.wait.ms``, a CreateTopics timeout)
and a client's own timers are real time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...storage.log_manager import LogManager
    from ..clock import Clock


class ClockServices(Protocol):
    """What moving the clock uses of the broker (``BrokerApp`` wires it)."""

    clock: Clock
    logs: LogManager  # due log maintenance runs after an advance


class ClockNotControllable(RuntimeError):
    """The broker was built with a clock a test cannot move (not ``BrokerClock``/``ManualClock``)."""


def _clock(app: ClockServices) -> Any:
    clock = app.clock
    if not hasattr(clock, "advance"):
        raise ClockNotControllable(f"{type(clock).__name__} cannot be advanced")
    return clock


def clock_state(app: ClockServices) -> dict[str, Any]:
    clock = app.clock
    return {"now_ms": clock.now_ms(), "frozen": bool(getattr(clock, "frozen", True)),
            "offset_ms": getattr(clock, "offset_ms", None)}


async def advance(app: ClockServices, ms: int) -> dict[str, Any]:
    """Advance by ``ms``; timers due on the way fire in deadline order, then due log maintenance runs."""
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise ValueError(f"advance needs a whole, non-negative number of milliseconds, got {ms!r}")
    _clock(app).advance(ms)
    await app.logs.catch_up()
    return clock_state(app)


def freeze(app: ClockServices) -> dict[str, Any]:
    clock = _clock(app)
    if hasattr(clock, "freeze"):
        clock.freeze()
    return clock_state(app)


def unfreeze(app: ClockServices) -> dict[str, Any]:
    clock = _clock(app)
    if not hasattr(clock, "unfreeze"):
        raise ClockNotControllable(f"{type(clock).__name__} only moves when advanced")
    clock.unfreeze()
    return clock_state(app)
