"""In-memory model of a classic group and its members (Kafka's ``GroupMetadata``, ``MemberMetadata``).

These objects hold the *live* state, including what is never persisted
(parked JoinGroup/SyncGroup answers, pending member ids, timers).  What
survives a restart is only what the shard's records say; ``ClassicGroup.
from_record`` rebuilds a group from its last GroupMetadataValue.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from typing import Any

import structlog

from ...offsets.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription_topics
from ...offsets.records import GroupValue, MemberValue
from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ..clock import TimerHandle
from ..runtime.promise import Promise
from .state import GroupState, check_transition

log = structlog.get_logger("odradek.coordinator")


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
    # liveness: the member is expired at session_deadline_ms; the armed timer may fire
    # earlier (it re-arms itself), so a heartbeat only moves the deadline (no timer churn)
    session_deadline_ms: int = 0
    timer_deadline_ms: int = 0
    heard_real_ms: int = 0  # real time (``clock.real_ms``) of the last session restart

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

    def park_sync(self) -> Promise:
        """Park a SyncGroup answer; a superseded parked answer gets the same result."""
        return self._park("sync_promise")

    def _park(self, attr: str) -> Promise:
        promise = Promise()
        old: Promise | None = getattr(self, attr)
        if old is not None and not old.done:
            # Kafka overwrites the callback; we chain it so no connection waits forever
            promise.add_done_callback(old.set)
        setattr(self, attr, promise)
        return promise

    def answer_sync(self, result: Any) -> bool:
        """Complete the parked SyncGroup, if any (Kafka's maybeInvokeSyncCallback)."""
        promise, self.sync_promise = self.sync_promise, None
        if promise is None:
            return False
        promise.set(result)
        return True

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
    # kept up to date by the member methods below: each JoinGroup asks "has everyone
    # rejoined?" and "does every member support this protocol?", which must not cost O(members)
    awaiting_join_count: int = 0
    protocol_counts: dict[str, int] = field(default_factory=dict)
    join_timer: TimerHandle | None = None
    join_is_initial: bool = False  # an initial delayed join never completes early (``InitialDelayedJoin``)
    join_token: int = 0  # bumped whenever the join deadline is re-armed or cancelled
    sync_timer: TimerHandle | None = None
    # the leader's SyncGroup of this generation, held (generation, assignments, timer) while
    # member ids handed out with MEMBER_ID_REQUIRED are still to come back
    # (``rebalance.hold_leader_sync``)
    held_sync: tuple[int, dict[str, bytes], TimerHandle] | None = None
    stats: Counter[str] | None = None  # the shard's event counts (metrics), set by Shard.adopt

    # --- state -----------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, target: GroupState, now_ms: int, reason: str | None = None,
                   *, unloading: bool = False) -> None:
        """The only way to change state: checked against the table, logged once (with why).

        ``unloading``: the node stops serving the group (shutdown), Kafka's
        ``GroupMetadataManager.removeGroupsForPartition``.  Dead here only means "out of
        memory"; its log line says so, since "Empty -> Dead" reads like a deletion."""
        check_transition(self.group_id, self.state, target)
        previous = self.state
        self.state = target
        self.current_state_timestamp = now_ms
        if unloading:
            log.info("group.unloaded", group=self.group_id, state=previous.value,
                     generation=self.generation, members=len(self.members),
                     note="kept on disk: its offsets and metadata load again on the next start")
        else:
            log.info("group.state", group=self.group_id, from_state=previous.value, to=target.value,
                     generation=self.generation, members=len(self.members), reason=reason)
        if target is GroupState.PREPARING_REBALANCE and self.stats is not None:
            self.stats["rebalances"] += 1

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
        self._count_protocols(member, +1)
        if member.join_promise is not None:
            self.awaiting_join_count += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.drop_pending(member.member_id)

    def drop_pending(self, member_id: str) -> bool:
        """Forget a MEMBER_ID_REQUIRED id (it joined, left, was rejected or expired)."""
        if member_id not in self.pending_members:
            return False
        timer = self.pending_members.pop(member_id)
        if timer is not None:
            timer.cancel()
        return True

    def remove_member(self, member_id: str) -> Member | None:
        """Raw removal (Kafka's ``GroupMetadata.remove``): no answers, no rebalance."""
        self.drop_pending(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._count_protocols(member, -1)
        if member.join_promise is not None:
            self.awaiting_join_count -= 1
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        """A rejoin replaces the member's protocols and timeouts (Kafka's updateMember)."""
        same_names = [name for name, _ in protocols] == member.protocol_names()
        if not same_names:
            self._count_protocols(member, -1)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if not same_names:
            self._count_protocols(member, +1)

    def _count_protocols(self, member: Member, delta: int) -> None:
        counts = self.protocol_counts
        for name in set(member.protocol_names()):
            counts[name] = counts.get(name, 0) + delta
            if not counts[name]:
                del counts[name]

    def park_join(self, member: Member) -> Promise:
        """Park the member's JoinGroup answer until the join phase completes."""
        if member.join_promise is None:
            self.awaiting_join_count += 1
        return member._park("join_promise")

    def answer_join(self, member: Member, result: Any) -> bool:
        """Complete its parked JoinGroup, if any (Kafka's maybeInvokeJoinCallback)."""
        promise = member.join_promise
        if promise is None:
            return False
        member.join_promise = None
        if self.members.get(member.member_id) is member:
            self.awaiting_join_count -= 1
        promise.set(result)
        return True

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member came back with a new member id: same member, new id (KIP-345).

        The caller fences whatever the old id had parked.  A sync still owed by
        the old id is owed by the new one.
        """
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any rejoined member; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, instance id, metadata for the selected protocol): what the leader gets."""
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def rebalance_timeout_ms(self) -> int:
        """KIP-62: the group waits as long as its most patient member asked for."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and self.awaiting_join_count == len(self.members)

    def joined_count(self) -> int:
        return self.awaiting_join_count

    # --- protocols -------------------------------------------------------------

    def candidate_protocols(self) -> list[str]:
        """Protocol names every member supports, in the first member's order."""
        first = next(iter(self.members.values()), None)
        if first is None:
            return []
        size, counts = len(self.members), self.protocol_counts
        return [p for p in first.protocol_names() if counts.get(p) == size]

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """``supportsProtocols``: the check behind INCONSISTENT_GROUP_PROTOCOL."""
        if self.state == GroupState.EMPTY or not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        size, counts = len(self.members), self.protocol_counts
        return any(counts.get(name) == size for name, _ in protocols)

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
        """``computeSubscribedTopics``: union of members' subscriptions (v0 prefix) for consumer groups; else unknown."""
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

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateCurrentMember``; see the module-level :func:`validate_member`."""
        return validate_member(self, member_id, group_instance_id)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # --- persistence -------------------------------------------------------------

    def to_value(self, assignments: dict[str, bytes] | None = None) -> GroupValue:
        """The GroupMetadataValue for the current generation (``GroupMetadataManager.storeGroup``)."""
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
        """As a load rebuilds it (``GroupMetadata.loadGroup``): Stable with members, Empty without."""
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
            group._count_protocols(member, +1)
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.compute_subscribed_topics()
        return group


def validate_member(group: ClassicGroup, member_id: str, group_instance_id: str | None) -> ErrorCode:
    """Kafka's ``GroupCoordinator.validateCurrentMember``, shared by Join (known member), Sync, Heartbeat, Leave, OffsetCommit.

    A request naming a ``group.instance.id`` must name the member id that
    instance is currently mapped to: an unknown instance is 25, an instance
    now held by another member id is 82 (the caller is a fenced zombie).
    Then the member id itself must be a member.  Pending (MEMBER_ID_REQUIRED)
    ids are not members, so they get 25.  Pure: no state changes.
    """
    if group_instance_id is not None:
        current = group.static_members.get(group_instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if current != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE
