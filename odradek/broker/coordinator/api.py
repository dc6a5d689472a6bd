"""What the wire glue hands the group coordinator and what it gets back.

Plain values, no wire versions: the handlers in ``broker/handlers/groups.py``
turn decoded requests into these and shape the results per API version, so
the coordinator stays sans-I/O and testable without a codec.
"""

from __future__ import annotations

from dataclasses import field

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass

# (member id, group instance id, metadata for the selected protocol): what a leader receives
JoinMember = tuple[str, str | None, bytes]


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the glue passes the session timeout
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)
    supports_skip_assignment: bool = False  # JoinGroup v9+
    reason: str | None = None


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[JoinMember] = field(default_factory=list)
    skip_assignment: bool = False

    @classmethod
    def failed(cls, member_id: str, error: ErrorCode) -> JoinResult:
        """Errors carry generation -1, no leader, no members, no protocol (Kafka's ``joinError``)."""
        return cls(error, member_id)


@dataclass(slots=True)
class SyncRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # checked only when given (v5+ must give both)
    protocol_name: str | None
    assignments: dict[str, bytes]
    require_protocol: bool = False  # SyncGroup v5+: a null protocol type/name is an error


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""

    @classmethod
    def failed(cls, error: ErrorCode) -> SyncResult:
        return cls(error)


@dataclass(slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class LeaveResult:
    """A top-level error, or one error per leaving member (in request order)."""

    error: ErrorCode
    members: list[tuple[LeaveMember, ErrorCode]] = field(default_factory=list)


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription] = field(default_factory=list)


@dataclass(slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"
