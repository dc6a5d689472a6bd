"""Moving the running broker's clock from a test: advance, freeze, unfreeze.

Everything the broker waits for on its clock fires as if the time had
passed: session and rebalance timeouts, the initial rebalance delay, KIP-211
offset retention and its expiry sweep, idle connections
(``connections.max.idle.ms``), transaction timeouts, fault rules' ``seconds``,
``broker_down``, segment rolling by ``segment.ms`` (at the next append) and
time-based segment retention (the retention round runs before the advance
returns, if its check interval has passed).  A periodic check runs once per
advance, however many periods it spans (``clock.call_every``).  Request-level
waits that a client asked for (a Fetch's ``max.wait.ms``, a CreateTopics
timeout, a fault's ``delay_ms``) and a client's own timers are real time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ..clock import Sparing, real_ms

if TYPE_CHECKING:
    from ...storage.log_manager import LogManager
    from ..clock import Clock
    from ..coordinator.service import Coordinator
    from ..server import KafkaServer


class ClockServices(Protocol):
    """What moving the clock uses of the broker (``BrokerApp`` wires it)."""

    clock: Clock
    logs: LogManager  # due log maintenance runs after an advance
    coordinator: Coordinator | None  # a sparing advance spares its active members
    server: KafkaServer  # ... and the active connections


log = structlog.get_logger("odradek.clock")

# ``spare_active=True``: heard from in the last 5 s of real time.  The clients' default heartbeat
# interval is 3 s (Java, librdkafka, kafka-python, aiokafka), so a healthy member is always inside.
SPARE_WINDOW_S = 5.0


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


async def advance(app: ClockServices, ms: int, spare_active: bool | float = False) -> dict[str, Any]:
    """Advance by ``ms``; timers due on the way fire in deadline order, then due log maintenance runs.

    ``spare_active`` (True: the last ``SPARE_WINDOW_S`` seconds; a number: that many seconds of
    real time) spares what the broker heard from within that window: see ``sparing``."""
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise ValueError(f"advance needs a whole, non-negative number of milliseconds, got {ms!r}")
    clock = _clock(app)
    plan = sparing(app, clock, ms, spare_active)
    clock.advance(ms, plan)
    await app.logs.catch_up()
    return clock_state(app)


def spare_window_ms(spare_active: bool | float) -> int | None:
    """How far back (real ms) activity spares a member or connection; None: no sparing."""
    if spare_active is False or spare_active is None:
        return None
    if spare_active is True:
        return round(SPARE_WINDOW_S * 1000)
    if not isinstance(spare_active, int | float) or spare_active <= 0:
        raise ValueError(f"spare_active must be True, False or a positive number of seconds, "
                         f"not {spare_active!r}")
    return round(spare_active * 1000)


def sparing(app: ClockServices, clock: Any, ms: int, spare_active: bool | float) -> Sparing | None:
    """The rule of a sparing advance, applied before any timer fires.

    Active = the broker heard from it within the window of real time before the advance: a
    group member of any kind whose session was restarted (a classic heartbeat, join, sync or
    commit naming it; a consumer or share group heartbeat), a connection that received bytes.  An active member's session deadline and an
    active connection's idle time move with the clock, so the advance does not run them
    down: they keep the time they had left.  A rebalance that the advance starts (a silent
    member expiring) waits its join and sync timeouts from the end of the advance, since no
    client can rejoin during the jump.  Everything else -- silent members and connections,
    offset and log retention, transaction timeouts -- sees the whole advance.
    """
    window = spare_window_ms(spare_active)
    if window is None:
        return None
    plan = Sparing(real_ms() - window, ms, clock.now_ms() + ms)
    members = app.coordinator.spare_active(plan.heard_since_real_ms, ms) if app.coordinator else 0
    connections = app.server.spare_active(plan.heard_since_real_ms, ms)
    log.info("clock.sparing_advance", ms=ms, window_ms=window, members=members, connections=connections)
    return plan


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
