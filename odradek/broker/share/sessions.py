"""Share sessions (KIP-932): which share-partitions a member fetches from this broker, and its epoch.

Kafka's ``ShareSessionCache`` and ``SharePartitionManager.newContext``: one session per
(group id, member id), holding the partitions the member fetches here and the epoch its
next request must carry.

| request epoch | ShareFetch | ShareAcknowledge |
|---|---|---|
| 0 | a new session (an old one of the member is replaced); no room: SHARE_SESSION_LIMIT_REACHED | INVALID_SHARE_SESSION_EPOCH |
| n > 0 | must exist (else SHARE_SESSION_NOT_FOUND) with n expected (else INVALID_SHARE_SESSION_EPOCH); partitions added / forgotten | the same checks |
| -1 | must exist; acks only, then the session ends and the member's records are released | the same |

A session also ends when the connection that opened it closes (``closed_connection``).
Sessions are not durable: after a restart clients get SHARE_SESSION_NOT_FOUND and start
again at epoch 0.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import field

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass

E = ErrorCode
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
Partition = tuple[uuid.UUID, int]


@dataclass(slots=True, eq=False)
class ShareSession:
    group: str
    member: str
    connection_id: int
    epoch: int = 1  # what the next request must carry
    partitions: dict[Partition, None] = field(default_factory=dict)  # ordered set


def next_epoch(epoch: int) -> int:
    """Kafka's ``ShareRequestMetadata.nextEpoch``: MAX_INT wraps to 1 (0 and -1 are special)."""
    return 1 if epoch == INT32_MAX else epoch + 1


class ShareSessionCache:
    """The share sessions of this broker (``group.share.max.share.sessions`` of them at most)."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group: str, member: str, connection_id: int,
             partitions: Iterable[Partition]) -> tuple[ShareSession | None, ErrorCode]:
        """Epoch 0: a fresh session for the member (an older one of it is replaced)."""
        key = (group, member)
        if key not in self.sessions and len(self.sessions) >= self.max_sessions:
            return None, E.SHARE_SESSION_LIMIT_REACHED
        session = ShareSession(group, member, connection_id, partitions=dict.fromkeys(partitions))
        self.sessions[key] = session
        return session, E.NONE

    def check(self, group: str, member: str, epoch: int) -> tuple[ShareSession | None, ErrorCode]:
        """A request at ``epoch`` (> 0 or -1): the member's session if it may go on."""
        session = self.sessions.get((group, member))
        if session is None:
            return None, E.SHARE_SESSION_NOT_FOUND
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return None, E.INVALID_SHARE_SESSION_EPOCH
        if epoch != FINAL_EPOCH:
            session.epoch = next_epoch(epoch)
        return session, E.NONE

    def close(self, session: ShareSession) -> None:
        if self.sessions.get((session.group, session.member)) is session:
            del self.sessions[(session.group, session.member)]

    def closed_connection(self, connection_id: int) -> list[ShareSession]:
        """The sessions a closed connection opened, removed."""
        gone = [s for s in self.sessions.values() if s.connection_id == connection_id]
        for session in gone:
            self.close(session)
        return gone

    def clear(self) -> None:
        self.sessions.clear()
