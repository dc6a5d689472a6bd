"""Test control: fault rules, broker-level faults and request capture, behind one facade.

:class:`BrokerControl`'s public methods *are* the operations: the in-process
test API (``odradek.testing``), the control endpoint (``web/control.py``) and
``odradek control`` call them by name, so a method added here is reachable
from all three.  Every method runs on the broker's event loop (the threaded
broker and the endpoint make sure of it) and returns plain values.

A testing tool: the endpoint is off unless ``odradek.control.listener`` is
set, and never meant for a production broker.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, Protocol

from ..dispatch import RequestContext
from . import clock_ops
from .capture import CapturedRequest, CaptureOff, RequestCapture
from .clock_ops import ClockServices
from .faults import FaultRule, FaultRules, api_key_of, error_code_of, make_rule, name_topics_by_id
from .reset import ResetServices, reset_broker

if TYPE_CHECKING:
    from ..client_metrics import ClientMetricsManager
    from ..cluster import Cluster
    from ..dispatch import HandlerTable
    from ..security.listeners import Endpoint
    from ..server import KafkaServer

# the requests a group coordinator answers (what a coordinator move makes fail)
GROUP_APIS = ("OffsetCommit", "OffsetFetch", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
              "DescribeGroups", "DeleteGroups", "OffsetDelete", "TxnOffsetCommit")
COORDINATOR_ERRORS = ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")

__all__ = ["BrokerControl", "CaptureOff", "CapturedRequest", "FaultRule"]


class ControlServices(ResetServices, ClockServices, Protocol):
    """What test control uses of the broker (``BrokerApp`` wires it): the server (faults, capture,
    broker down), the handler table (which versions a rule may name), the client instances that
    pushed telemetry, and what reset and the clock use."""

    server: KafkaServer
    handlers: HandlerTable
    client_metrics: ClientMetricsManager
    cluster_id: str  # topics by id: the internal topics' derived ids
    cluster: Cluster | None  # several brokers: their layout (moves on cue)

    def endpoint_for(self, listener: str) -> Endpoint: ...

    async def set_node_down(self, node: int, down: bool) -> int: ...


class BrokerControl:
    """The operations a test (or ``odradek control``) can perform on a running broker."""

    def __init__(self, app: ControlServices, capture_requests: int = 0) -> None:
        self._app = app
        self._reset_lock = asyncio.Lock()  # one reset at a time
        self._rules = FaultRules()
        self._capture = RequestCapture(capture_requests)
        self._next_id = 1
        self._sync()

    # --- the request path (called by the server, only while a rule or the capture is on) -----

    def on_request(self, ctx: RequestContext, body: Any) -> FaultRule | None:
        """Record the request if capturing; the fault rule it matches, if any.  Topics named only by
        id get their names first, so both filter on topic names at every version."""
        app = self._app
        name_topics_by_id(ctx.api_key, ctx.api_version, body, lambda topic_id: app.topics.name_by_id(topic_id, app.cluster_id))
        if self._capture.enabled:
            self._capture.record(ctx.api_key, ctx.api_version, ctx.client_id, ctx.connection_id,
                                 ctx.correlation_id, self._app.clock.now_ms(), body)
        if not self._rules.by_api:
            return None
        rule = self._rules.match(ctx.api_key, ctx.api_version, ctx.client_id, body, self._app.clock.now_ms())
        if rule is not None:
            self._sync()  # a spent rule may have been the last
        return rule

    def leader_endpoint(self, listener: str) -> Endpoint:
        """This node's endpoint on ``listener``: the leader a fault's KIP-951 hint names."""
        return self._app.endpoint_for(listener)

    def on_answer(self, connection: int, correlation_id: int, body: bytes) -> None:
        """The encoded answer to a request (paired with its capture, if capturing)."""
        if self._capture.enabled:
            self._capture.record_answer(connection, correlation_id, body)

    def _sync(self) -> None:
        """The server consults this object only while there is something to do (no cost otherwise)."""
        active = self._capture.enabled or len(self._rules) > 0
        self._app.server.control = self if active else None

    def _served(self) -> dict[int, tuple[int, int]]:
        return {key: (lo, hi) for key, lo, hi in self._app.handlers.served()}

    # --- operations ------------------------------------------------------------------------

    @classmethod
    def operations(cls) -> list[str]:
        """The names callable from outside: every public method of this class."""
        return sorted(name for name, fn in inspect.getmembers(cls, inspect.isfunction)
                      if not name.startswith("_") and name not in ("on_request", "on_answer", "leader_endpoint"))

    def add_fault(self, api: str | int | list, *, error: str | int | None = None, versions: Any = None,
                  group_id: str | None = None, topic: str | None = None, partition: int | None = None,
                  transactional_id: str | None = None, client_id: str | None = None, delay_ms: int = 0,
                  close: str | None = None, throttle_ms: int | None = None, times: int | None = None,
                  seconds: float | None = None, per_partition: bool = False) -> int:
        """Add a fault rule; returns its id.  Raises ``ValueError`` naming what is wrong.

        ``per_partition``: the error goes only on the partitions ``topic``/``partition`` match
        (every partition if neither is given) and the handler answers the rest of the request:
        a partial failure, for any API whose answer has an error per partition."""
        rule = make_rule(self._next_id, api, self._served(), error=error, versions=versions,
                         group_id=group_id, topic=topic, partition=partition,
                         transactional_id=transactional_id, client_id=client_id, delay_ms=delay_ms,
                         close=close, throttle_ms=throttle_ms, times=times, seconds=seconds,
                         now_ms=self._app.clock.now_ms(), per_partition=per_partition)
        self._next_id += 1
        self._rules.add(rule)
        if rule.expires is not None:  # on the broker's clock: an advance expires it, a freeze keeps it
            rule.timer = self._app.clock.call_at(rule.expires, lambda: self._expire_fault(rule))
        self._sync()
        return rule.id

    def _expire_fault(self, rule: FaultRule) -> None:
        """The rule's timer: it has fired, so removing the rule must not cancel it (a fired
        timer cancelled would be counted as one still pending)."""
        rule.timer = None
        self.remove_fault(rule.id)

    def remove_fault(self, rule_id: int) -> bool:
        """Remove a rule; False if it was already gone (spent, expired or removed)."""
        removed = self._rules.remove(int(rule_id), self._app.clock.now_ms())
        self._sync()
        return removed

    def clear_faults(self) -> int:
        """Remove every rule; returns how many there were."""
        n = self._rules.clear()
        self._sync()
        return n

    def faults(self) -> list[dict]:
        """The live rules, in the order they apply (a rule whose ``seconds=`` are up is gone,
        even before its timer runs)."""
        now = self._app.clock.now_ms()
        self._rules.drop_expired(now)
        self._sync()
        return [rule.describe(now) for rule in self._rules]

    def coordinator_unavailable(self, group: str, error: str | int = "NOT_COORDINATOR",
                                seconds: float | None = None, times: int | None = None) -> int:
        """The group coordinator answers ``error`` for ``group`` (a coordinator move or load).

        NOT_COORDINATOR makes clients look the coordinator up again;
        COORDINATOR_LOAD_IN_PROGRESS makes them retry it.  Every group
        request naming ``group`` gets it, for ``seconds`` (or ``times``
        requests, or until the rule is removed); returns the rule id.  As
        in Kafka, heartbeats are answered as usual while "loading".
        """
        code = error_code_of(error)
        if code.name not in COORDINATOR_ERRORS:
            raise ValueError(f"coordinator_unavailable answers one of {', '.join(COORDINATOR_ERRORS)}, "
                             f"not {code.name}")
        served = self._served()
        apis = [name for name in GROUP_APIS if _served_name(name, served)]
        if code.name == "COORDINATOR_LOAD_IN_PROGRESS":
            apis.remove("Heartbeat")  # a loading coordinator answers heartbeats NONE (handleHeartbeat)
        return self.add_fault(apis, error=code.name, group_id=group, seconds=seconds, times=times)

    def broker_down(self, seconds: float) -> None:
        """Stop accepting and drop every connection for ``seconds`` of the broker's clock (an
        advance past them brings it up, a frozen clock keeps it down); data and state are kept."""
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
            raise ValueError(f"seconds must be a positive number, not {seconds!r}")
        self._app.server.go_down(float(seconds))

    def broker_up(self) -> None:
        """End a ``broker_down`` early: listen again on the same ports."""
        self._app.server.come_up()

    # --- a cluster's layout (several brokers: ``cluster``) ----------------------------------------

    def _cluster(self) -> Cluster:
        cluster = self._app.cluster
        if cluster is None:
            raise ValueError("one broker: start it with several (odradek.brokers, --brokers N)")
        return cluster

    def layout(self, topic: str | None = None) -> dict:
        """The cluster's layout: ``nodes``, ``down`` and, per partition of ``topic`` (every topic if
        None), its ``leader_id``, ``leader_epoch``, ``replica_nodes``, ``isr_nodes``, ``offline_replicas``."""
        cluster = self._cluster()
        topics = self._app.topics
        names = [topic] if topic is not None else topics.names()
        return {"nodes": list(cluster.nodes), "down": sorted(cluster.layout.down),
                "partitions": {f"{n}-{p}": cluster.describe(n, p)
                               for n in names for p in range(topics.partition_count(n) or 0)}}

    async def move_leader(self, topic: str, partition: int, node: int, truncate_to: int | None = None) -> dict:
        """Move a partition's leadership to ``node`` (its leader epoch bumps, as Kafka's controller
        does); ``truncate_to``: an unclean change to a replica that never had the offsets from there
        on -- the log is truncated there and the new leader alone is in sync, so a consumer that had
        read past it detects the truncation (KIP-320).  Durable; returns the partition's layout."""
        return await self._cluster().move_leader(topic, int(partition), int(node), truncate_to)

    async def move_coordinator(self, node: int, group: str | None = None, transactional_id: str | None = None) -> dict:
        """Move a group's (or transactional id's) coordinator to ``node``: the leader of the
        ``__consumer_offsets`` (``__transaction_state``) partition the key hashes to -- every key on
        that partition moves with it.  Clients get NOT_COORDINATOR and look it up again."""
        if (group is None) == (transactional_id is None):
            raise ValueError("give a group or a transactional_id")
        key = group if group is not None else transactional_id
        return await self._cluster().move_coordinator(key, int(node), transactional=transactional_id is not None)

    async def node_down(self, node: int) -> int:
        """Take one broker of the cluster down: its listeners close, its connections drop, its
        partitions fail over to the next in-sync replica (a bumped leader epoch); returns how many
        partitions changed.  Durable until ``node_up`` (or reset)."""
        self._cluster()
        return await self._app.set_node_down(int(node), True)

    async def node_up(self, node: int) -> int:
        """Bring a broker back: it listens again and rejoins the ISRs; leaderless partitions elect it.
        Leadership returns to the preferred replicas only by ElectLeaders (PREFERRED), as in Kafka."""
        self._cluster()
        return await self._app.set_node_down(int(node), False)

    async def elect_preferred(self, topic: str | None = None) -> int:
        """ElectLeaders PREFERRED over ``topic``'s partitions (every partition, the internal topics'
        too, if None), as an admin client would; returns how many leaders changed."""
        cluster = self._cluster()
        count = self._app.topics.partition_count(topic) or 0 if topic is not None else 0
        wanted = [(topic, p) for p in range(count)] if topic is not None else list(cluster.all_partitions())
        moved = 0
        for name, p in wanted:
            moved += await cluster.elect(name, p, False) == 0
        return moved

    def captured(self, api: str | int | list | None = None, *, version: int | None = None,
                 client_id: str | None = None, connection: int | None = None, group_id: str | None = None,
                 topic: str | None = None, partition: int | None = None,
                 transactional_id: str | None = None, error: str | int | None = None) -> list[CapturedRequest]:
        """Captured requests matching every filter given, oldest first, each with the answer the
        client got (``answer``, ``errors``, ``ok``); ``error``: only those answered with that
        error at some level (``"NONE"``: answered without any error).  Raises ``CaptureOff``
        when capture is off (``odradek serve``'s default) rather than answer an empty list."""
        keys = None
        if api is not None:
            served = self._served()
            apis = api if isinstance(api, list | tuple | set) else [api]
            keys = {api_key_of(a, served) for a in apis}
        return self._capture.query(keys, version=version, client_id=client_id, connection=connection,
                                   group_id=group_id, topic=topic, partition=partition,
                                   transactional_id=transactional_id,
                                   error=None if error is None else error_code_of(error).name)

    def clear_capture(self) -> int:
        """Forget the captured requests; returns how many there were."""
        return self._capture.clear()

    # --- reset (reset.py) -------------------------------------------------------------------

    async def reset(self) -> dict:
        """Back to an empty broker in one call: topics, groups, committed offsets, producer
        state, fetch sessions, runtime broker settings, client quotas, feature levels, client-metrics
        resources, fault rules and captured requests; crash-safe (a start finishes a reset cut short),
        connections stay open; SCRAM credentials and ACLs stay.  Returns what went (``topics``, ``groups``, ``faults``) and how long it took (``ms``)."""
        faults = self.clear_faults()  # first: no rule may fail the clients' first requests after
        cluster = self._app.cluster

        async def initial_layout() -> None:  # every node up, every partition as placed
            for node in sorted(cluster.layout.down):
                await self._app.set_node_down(node, False)
            await cluster.reset()

        gone = await reset_broker(self._app, self._reset_lock, None if cluster is None else initial_layout)
        self.clear_capture()  # last: what was captured during the reset goes too
        return {**gone, "faults": faults}

    # --- client telemetry (KIP-714, client_metrics.py) ------------------------------------

    def client_metrics(self, client_id: str | None = None) -> dict[str, dict[str, Any]]:
        """What clients pushed with PushTelemetry, the last push of each client instance:
        ``{client instance id: {metric name: value or [{"attributes", "value"}]}}``, only the
        instances of ``client_id`` if given."""
        return self._app.client_metrics.reported(client_id)

    def client_instances(self) -> list[dict]:
        """The client instances telemetry knows: id, client id, subscription id, pushes,
        terminating, when they last pushed and the resource attributes they sent."""
        return self._app.client_metrics.instances()

    # --- the broker's clock (clock_ops.py) ---------------------------------------------------

    async def advance_clock(self, ms: int = 0, spare_active: bool | float = False, seconds: float = 0) -> int:
        """Move the broker's time forward by ``ms`` plus ``seconds`` (as ``advance`` in the Python
        API): what waits on time fires as if it had passed (sessions, rebalances, offset and log
        retention, idle connections, fault rules' ``seconds``, ``broker_down``); returns the
        broker's time in ms.

        ``spare_active`` (True, or a window in seconds of real time; True is 5 s): group
        members and connections the broker heard from within that window keep the time they
        had left, so only what has been silent expires (``clock_ops.sparing`` has the rule)."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(f"seconds must be a number, not {seconds!r}")
        if seconds < 0:
            raise ValueError("the broker's clock only moves forward")
        return (await clock_ops.advance(self._app, ms + round(seconds * 1000), spare_active))["now_ms"]

    def freeze_clock(self) -> int:
        """Stop the broker's time; only ``advance_clock`` moves it until ``unfreeze_clock``."""
        return clock_ops.freeze(self._app)["now_ms"]

    def unfreeze_clock(self) -> int:
        """Let real time run again, from where the frozen clock stands."""
        return clock_ops.unfreeze(self._app)["now_ms"]

    def clock(self) -> dict:
        """The broker's time: ``now_ms``, ``frozen``, ``offset_ms`` ahead of the wall clock."""
        return clock_ops.clock_state(self._app)

    def capture(self) -> dict:
        """Whether requests are being captured: ``enabled``, ``max_requests`` kept, ``held`` now."""
        return self._capture.state()

    def set_capture(self, max_requests: int) -> None:
        """Capture the last ``max_requests`` requests (0 turns capture off)."""
        if not isinstance(max_requests, int) or isinstance(max_requests, bool) or max_requests < 0:
            raise ValueError(f"max_requests must be a non-negative integer, not {max_requests!r}")
        self._capture.resize(max_requests)
        self._sync()


def _served_name(name: str, served: dict[int, tuple[int, int]]) -> bool:
    try:
        api_key_of(name, served)
    except ValueError:
        return False
    return True
