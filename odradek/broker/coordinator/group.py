"""In-memory model of a classic group and its members (coordinator-facts §3).

These objects hold the *live* state, including what is never persisted
(parked JoinGroup/SyncGroup answers, pending member ids, timers).  What
survives a restart is only what the shard's records say; ``ClassicGroup.
from_record`` rebuilds a group from its last GroupMetadataValue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from ...storage.consumer_protocol import decode_subscription_topics
from ...storage.offsets_records import GroupValue, MemberValue
from ..clock import TimerHandle
from .state import GroupState, check_transition

log = structlog.get_logger("odradek.coordinator")

CONSUMER_PROTOCOL_TYPE = "consumer"


class Promise:
    """A result delivered later (a parked JoinGroup or SyncGroup answer).

    Sans-I/O: the coordinator completes it synchronously; the network layer
    turns it into an awaitable with ``add_done_callback``.
    """

    __slots__ = ("_done", "_result", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._result: Any = None
        self._callbacks: list[Callable[[Any], None]] = []

    @property
    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        if not self._done:
            raise RuntimeError("promise not completed")
        return self._result

    def set(self, result: Any) -> None:
        if self._done:
            return
        self._done = True
        self._result = result
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(result)

    def add_done_callback(self, cb: Callable[[Any], None]) -> None:
        if self._done:
            cb(self._result)
        else:
            self._callbacks.append(cb)

    @classmethod
    def resolved(cls, result: Any) -> Promise:
        p = cls()
        p.set(result)
        return p


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    join_promise: Promise | None = None
    sync_promise: Promise | None = None
    is_new: bool = False
    heartbeat_timer: TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_promise is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_promise is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def to_value(self, protocol: str | None) -> MemberValue:
        return MemberValue(member_id=self.member_id, group_instance_id=self.group_instance_id,
                           client_id=self.client_id, client_host=self.client_host,
                           rebalance_timeout=self.rebalance_timeout_ms,
                           session_timeout=self.session_timeout_ms,
                           subscription=self.metadata(protocol), assignment=self.assignment)


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None  # None: a "simple" group created by offset commits
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, TimerHandle | None] = field(default_factory=dict)
    pending_sync: set[str] = field(default_factory=set)
    current_state_timestamp: int = -1
    subscribed_topics: set[str] | None = None  # None: unknown (treated as "everything")
    new_member_added: bool = False
    initial_rebalance_remaining_ms: int = 0
    join_timer: TimerHandle | None = None
    sync_timer: TimerHandle | None = None

    # --- state -----------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, target: GroupState, now_ms: int) -> None:
        """The only way to change state: checked against the table, logged once."""
        check_transition(self.group_id, self.state, target)
        previous = self.state
        self.state = target
        self.current_state_timestamp = now_ms
        log.info("group.state", group=self.group_id, from_state=previous.value, to=target.value,
                 generation=self.generation, members=len(self.members))

    # --- members ---------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def rebalance_timeout_ms(self) -> int:
        """KIP-62: the group waits as long as its most patient member asked for."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def joined_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    # --- protocols -------------------------------------------------------------

    def candidate_protocols(self) -> list[str]:
        """Protocol names every member supports, in the first member's order."""
        members = list(self.members.values())
        if not members:
            return []
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return [p for p in members[0].protocol_names() if p in common]

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """§6.3: the check behind INCONSISTENT_GROUP_PROTOCOL."""
        names = [name for name, _ in protocols]
        if self.state == GroupState.EMPTY or not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = set.intersection(*(set(m.protocol_names()) for m in self.members.values()))
        return any(n in common for n in names)

    def select_protocol(self) -> str | None:
        """Each member votes for its first candidate; the most votes wins."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: dict[str, int] = {c: 0 for c in candidates}
        for m in self.members.values():
            choice = next(p for p in m.protocol_names() if p in votes)
            votes[choice] += 1
        return max(candidates, key=lambda c: votes[c])

    def compute_subscribed_topics(self) -> None:
        """§13: union of members' subscriptions (v0 prefix) for consumer groups; else unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            self.subscribed_topics = None
            return
        if not self.members:
            self.subscribed_topics = set()
            return
        if self.protocol_name is None:
            self.subscribed_topics = None
            return
        topics: set[str] = set()
        for m in self.members.values():
            found = decode_subscription_topics(m.metadata(self.protocol_name))
            if found is None:
                self.subscribed_topics = None
                return
            topics.update(found)
        self.subscribed_topics = topics

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # --- persistence -------------------------------------------------------------

    def to_value(self, assignments: dict[str, bytes] | None = None) -> GroupValue:
        """The GroupMetadataValue for the current generation (§16.2)."""
        members = []
        for m in self.members.values():
            value = m.to_value(self.protocol_name)
            if assignments is not None:
                value.assignment = assignments.get(m.member_id, b"")
            members.append(value)
        return GroupValue(protocol_type=self.protocol_type or "", generation=self.generation,
                          protocol=self.protocol_name, leader=self.leader_id,
                          current_state_timestamp=self.current_state_timestamp, members=members)

    @classmethod
    def from_record(cls, group_id: str, value: GroupValue) -> ClassicGroup:
        """§16.3: Stable with members, Empty without."""
        group = cls(group_id=group_id,
                    state=GroupState.STABLE if value.members else GroupState.EMPTY,
                    generation=value.generation, protocol_type=value.protocol_type or None,
                    protocol_name=value.protocol, leader_id=value.leader,
                    current_state_timestamp=value.current_state_timestamp)
        for mv in value.members:
            member = Member(member_id=mv.member_id, group_instance_id=mv.group_instance_id,
                            client_id=mv.client_id, client_host=mv.client_host,
                            rebalance_timeout_ms=mv.rebalance_timeout,
                            session_timeout_ms=mv.session_timeout,
                            protocol_type=value.protocol_type,
                            protocols=[(value.protocol or "", mv.subscription)],
                            assignment=mv.assignment)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.compute_subscribed_topics()
        return group
