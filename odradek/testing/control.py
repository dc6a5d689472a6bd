"""The typed test-control API shared by ``Broker``, ``ThreadedBroker`` and the pytest fixture handle.

    with kafka_broker.fault("OffsetCommit", error="NOT_COORDINATOR", times=2):
        consumer.commit()               # the first two commits get NOT_COORDINATOR
    assert kafka_broker.captured("OffsetCommit", group_id="g")

A fault used as a context manager is removed when the block ends, so a test
cannot leak it into the next one.  Every call goes to the broker's
``BrokerControl`` (``odradek/broker/control``) on the broker's own loop;
``control(name, **kwargs)`` reaches any operation by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ..broker.control import CapturedRequest


class Fault:
    """A rule on the broker: ``remove()`` it, or use it as a context manager."""

    def __init__(self, owner: ControlApi, rule_id: int) -> None:
        self._owner = owner
        self.id = rule_id

    def remove(self) -> bool:
        """Remove the rule; False if it was already spent, expired or removed."""
        return self._owner.remove_fault(self.id)

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"Fault(id={self.id})"


class ControlApi(ABC):
    """Mixin: subclasses provide ``control(name, **kwargs)``, run on the broker's loop."""

    @abstractmethod
    def control(self, name: str, **kwargs: Any) -> Any:
        """Run the ``BrokerControl`` operation ``name`` with ``kwargs`` and return its result."""

    def fault(self, api: str | int | list, *, error: str | int | None = None, versions: Any = None,
              group_id: str | None = None, topic: str | None = None, partition: int | None = None,
              transactional_id: str | None = None, client_id: str | None = None, delay_ms: int = 0,
              close: str | None = None, throttle_ms: int | None = None, times: int | None = None,
              seconds: float | None = None, per_partition: bool = False) -> Fault:
        """Add a fault rule (see ``BrokerControl.add_fault``); ``ValueError`` names a bad argument.

        ``api``: a name (``"OffsetCommit"``) or key, or a list; ``error``: a
        Kafka error name or code the API can return; ``versions``: ``3``,
        ``"3-5"``, ``"3+"``; ``close``: ``"before"`` or ``"after"`` the
        handler runs; fires ``times`` times, for ``seconds`` of the broker's clock, or until
        removed; ``per_partition=True``: the error goes only on the partitions ``topic`` and
        ``partition`` match, the rest of the request succeeds (a partial failure).
        """
        rule_id = self.control("add_fault", api=api, error=error, versions=versions, group_id=group_id,
                               topic=topic, partition=partition, transactional_id=transactional_id,
                               client_id=client_id, delay_ms=delay_ms, close=close, throttle_ms=throttle_ms,
                               times=times, seconds=seconds, per_partition=per_partition)
        return Fault(self, rule_id)

    def remove_fault(self, rule_id: int) -> bool:
        return self.control("remove_fault", rule_id=rule_id)

    def clear_faults(self) -> int:
        return self.control("clear_faults")

    def faults(self) -> list[dict]:
        return self.control("faults")

    def coordinator_unavailable(self, group: str, error: str = "NOT_COORDINATOR", seconds: float | None = None,
                                times: int | None = None) -> Fault:
        """Group requests for ``group`` get NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS...)."""
        return Fault(self, self.control("coordinator_unavailable", group=group, error=error, seconds=seconds,
                                        times=times))

    def broker_down(self, seconds: float) -> None:
        """Refuse and drop every connection for ``seconds``; data is kept."""
        self.control("broker_down", seconds=seconds)

    def broker_up(self) -> None:
        self.control("broker_up")

    # a cluster (several brokers: docs/CLUSTER.md)

    def layout(self, topic: str | None = None) -> dict:
        """Nodes, the ones down, and each partition's leader, epoch, replicas and ISR."""
        return self.control("layout", topic=topic)

    def move_leader(self, topic: str, partition: int, node: int, truncate_to: int | None = None) -> dict:
        """Move a partition's leader to ``node`` (epoch + 1); ``truncate_to``: unclean, the log cut there."""
        return self.control("move_leader", topic=topic, partition=partition, node=node, truncate_to=truncate_to)

    def move_coordinator(self, node: int, group: str | None = None, transactional_id: str | None = None) -> dict:
        """Move a group's (or transactional id's) coordinator to ``node``."""
        return self.control("move_coordinator", node=node, group=group, transactional_id=transactional_id)

    def node_down(self, node: int) -> int:
        """Take one broker down: listeners closed, its partitions failed over."""
        return self.control("node_down", node=node)

    def node_up(self, node: int) -> int:
        """Bring a broker back up (leadership returns by ``elect_preferred``)."""
        return self.control("node_up", node=node)

    def elect_preferred(self, topic: str | None = None) -> int:
        """Preferred leader election, as ElectLeaders PREFERRED; returns the leaders changed."""
        return self.control("elect_preferred", topic=topic)

    def captured(self, api: str | int | list | None = None, **filters: Any) -> list[CapturedRequest]:
        """Captured requests (oldest first) of ``api`` matching ``filters``: version, client_id,
        connection, group_id, topic, partition, transactional_id, error (answered with that error
        at some level; ``"NONE"``: without any).  Each has the decoded ``answer`` the client got
        and its ``errors`` by level (``{"topics[t].partitions[0]": "NOT_COORDINATOR"}``).
        ``CaptureOff`` if capture is off (the test brokers keep the last 1000 requests unless
        ``set_capture(0)``)."""
        return self.control("captured", api=api, **filters)

    def clear_capture(self) -> int:
        return self.control("clear_capture")

    def set_capture(self, max_requests: int) -> None:
        """Keep the last ``max_requests`` requests for ``captured`` (0: capture off)."""
        self.control("set_capture", max_requests=max_requests)

    def capture(self) -> dict:
        """``{"enabled": ..., "max_requests": ..., "held": ...}``: is anything being captured?"""
        return self.control("capture")

    # --- client telemetry (KIP-714; the broker needs client.metrics.default.metrics) ----------

    def client_metrics(self, client_id: str | None = None) -> dict[str, dict[str, Any]]:
        """The metrics clients pushed (the last push of each client instance):
        ``{client instance id: {metric name: value or [{"attributes": ..., "value": ...}]}}``,
        only the instances of ``client_id`` if given (docs/telemetry.md)."""
        return self.control("client_metrics", client_id=client_id)

    def client_instances(self) -> list[dict]:
        """The client instances telemetry knows (id, client id, subscription id, pushes, ...)."""
        return self.control("client_instances")

    # --- the broker's clock: on ``Broker`` (asyncio) ``advance`` is a coroutine to await ---

    def advance(self, *, seconds: float = 0, ms: int = 0, spare_active: bool | float = False) -> Any:
        """Move the broker's clock forward: session and rebalance timeouts, offset retention,
        time-based log retention, idle connections, fault rules' ``seconds`` and ``broker_down``
        fire as if that time had passed, without sleeping (milliseconds, however far).  Clients'
        own timers are not moved.  Returns the broker's time in ms.

        ``spare_active=True`` (or a window in seconds; True is 5 s of real time): members and
        connections heard from within the window keep the time they had left, so one advance
        evicts only the hung member (docs/test-control.md has the exact rule)."""
        total = round(seconds * 1000) + ms
        if total < 0:
            raise ValueError("the broker's clock only moves forward")
        return self.control("advance_clock", ms=total, spare_active=spare_active)

    def advance_clock(self, ms: int = 0, seconds: float = 0, spare_active: bool | float = False) -> Any:
        return self.control("advance_clock", ms=ms, seconds=seconds, spare_active=spare_active)

    def clock(self) -> dict:
        """The broker's time: ``now_ms``, ``frozen``, ``offset_ms`` (how far ahead of the wall clock)."""
        return self.control("clock")

    def freeze_clock(self) -> int:
        """Stop the broker's time (only ``advance`` moves it) until ``unfreeze_clock``."""
        return self.control("freeze_clock")

    def unfreeze_clock(self) -> int:
        return self.control("unfreeze_clock")

    # --- reset: on ``Broker`` (asyncio) a coroutine to await ---------------------------------

    def reset(self) -> Any:
        """Back to an empty broker in milliseconds -- topics, groups, committed offsets, producer
        state, fault rules and captured requests gone -- so one session-scoped broker serves
        many tests; connected clients stay connected and see the empty broker.  Returns what
        went: ``{"topics": n, "groups": n, "faults": n, "ms": ...}``."""
        return self.control("reset")
