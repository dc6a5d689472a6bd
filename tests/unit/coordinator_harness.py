"""Drive the group coordinator without a network: a ManualClock, a real Log, sans-I/O calls.

Shared by the ``test_coordinator_*`` modules.  Everything is synchronous
except loading a shard (``Shard.load`` is a coroutine), which ``restart``
runs to completion on a throw-away event loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from odradek.broker.clock import ManualClock
from odradek.broker.coordinator import rebalance
from odradek.broker.coordinator.admin import delete_groups, describe_group, list_groups
from odradek.broker.coordinator.api import (
    JoinRequest,
    JoinResult,
    LeaveMember,
    LeaveResult,
    SyncRequest,
    SyncResult,
)
from odradek.broker.coordinator.group import ClassicGroup
from odradek.broker.coordinator.join import join_group
from odradek.broker.coordinator.membership import heartbeat, leave_group, sync_group
from odradek.broker.coordinator.service import Coordinator, CoordinatorConfig
from odradek.broker.coordinator.shard import Shard
from odradek.broker.runtime.promise import Promise
from odradek.offsets.consumer_protocol import Subscription, encode_subscription
from odradek.protocol.errors import ErrorCode
from odradek.storage.log import Log

E = ErrorCode
GROUP = "g"
SESSION = 10_000
REBALANCE = 30_000


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(version=0, topics=sorted(topics)))


DEFAULT_PROTOCOLS = [("range", subscription("t")), ("roundrobin", subscription("t"))]


class Harness:
    """One coordinator over one offsets partition in ``directory``; restartable."""

    def __init__(self, directory: Path, **config: Any):
        config.setdefault("offsets_retention_check_interval_ms", 10**12)  # keep sweeps out of the way
        self.clock = ManualClock()
        self.config = CoordinatorConfig(**config)
        self.directory = directory / "__consumer_offsets-0"
        self.log = Log.open(self.directory)
        self.coordinator = self._load()

    # --- life cycle ----------------------------------------------------------------------

    def _load(self, hooks: bool = True) -> Coordinator:
        coordinator = Coordinator(self.clock, self.config, [self.log])
        asyncio.run(coordinator.shards[0].load())
        if hooks:
            for listener in coordinator.load_listeners:
                listener(coordinator.shards[0])
        return coordinator

    def restart(self, hooks: bool = True) -> Shard:
        """Unload the live shard and rebuild a new one from the same log."""
        rebalance.unload_shard(self.shard)
        self.coordinator.expiry.stop()
        self.coordinator = self._load(hooks)
        return self.shard

    @property
    def shard(self) -> Shard:
        return self.coordinator.shards[0]

    def group(self, group_id: str = GROUP) -> ClassicGroup:
        return self.shard.groups[group_id]

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    # --- requests ------------------------------------------------------------------------

    def join(self, member_id: str = "", *, group: str = GROUP, instance: str | None = None,
             protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
             session: int = SESSION, rebalance: int = REBALANCE, version: int = 5,
             client_id: str = "client") -> Promise:
        req = JoinRequest(group_id=group, member_id=member_id, group_instance_id=instance,
                          client_id=client_id, client_host="/127.0.0.1", session_timeout_ms=session,
                          rebalance_timeout_ms=rebalance, protocol_type=protocol_type,
                          protocols=list(DEFAULT_PROTOCOLS if protocols is None else protocols),
                          require_known_member_id=version >= 4,
                          supports_skip_assignment=version >= 9)
        return join_group(self.coordinator, req)

    def join_new(self, **kw: Any) -> Promise:
        """A new dynamic member: the MEMBER_ID_REQUIRED round trip, then the real join."""
        first = self.join(**kw)
        result: JoinResult = first.result()
        assert result.error is E.MEMBER_ID_REQUIRED, result
        return self.join(result.member_id, **kw)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
             group: str = GROUP, instance: str | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None, require_protocol: bool = False) -> Promise:
        return sync_group(self.coordinator, SyncRequest(
            group_id=group, generation=generation, member_id=member_id, group_instance_id=instance,
            protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=dict(assignments or {}), require_protocol=require_protocol))

    def heartbeat(self, member_id: str, generation: int, *, group: str = GROUP,
                  instance: str | None = None) -> ErrorCode:
        return heartbeat(self.coordinator, group, generation, member_id, instance)

    def leave(self, *members: LeaveMember | str, group: str = GROUP) -> LeaveResult:
        leaving = [m if isinstance(m, LeaveMember) else LeaveMember(m) for m in members]
        return leave_group(self.coordinator, group, leaving)

    def describe(self, group: str = GROUP):
        return describe_group(self.coordinator, group)

    def list(self, states: list[str] | None = None, types: list[str] | None = None):
        return list_groups(self.coordinator, states, types)

    def delete(self, *groups: str) -> dict[str, ErrorCode]:
        return delete_groups(self.coordinator, list(groups)).result()

    # --- scenarios -----------------------------------------------------------------------

    def stable_group(self, n: int = 1, **kw: Any) -> list[str]:
        """``n`` dynamic members in a Stable group; returns member ids, leader first."""
        parked = [self.join_new(**kw)]
        self.advance(0)  # the (zero) initial delay fires: generation 1 with the first member
        if n > 1:
            # the others join (a rebalance starts), then the first rejoins: all are in, it completes
            others = [self.join_new(**kw) for _ in range(n - 1)]
            parked = [self.join(parked[0].result().member_id, **kw)] + others
        results = [p.result() for p in parked]
        ids = [r.member_id for r in results]
        leader = results[0].leader
        generation = results[0].generation
        self.sync(leader, generation, {m: m.encode() for m in ids}).result()
        assert self.group().state.value == "Stable"
        return [leader] + [m for m in ids if m != leader]


def ok(result: JoinResult | SyncResult) -> JoinResult | SyncResult:
    assert result.error is E.NONE, result
    return result


def records_of(h: Harness) -> tuple[dict, dict]:
    return h.shard.persisted_view()
