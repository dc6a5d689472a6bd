"""Share sessions (Kafka's ``ShareSessionCache`` rules), alone: epochs, the session limit, the
end of a session by epoch -1 and by its connection closing."""

from __future__ import annotations

import uuid

from odradek.broker.share.sessions import INT32_MAX, ShareSessionCache, next_epoch
from odradek.protocol.errors import ErrorCode as E

T = uuid.uuid4()


def test_a_session_goes_epoch_by_epoch_and_refuses_a_wrong_one():
    cache = ShareSessionCache(10)
    session, error = cache.open("g", "m", 1, [(T, 0)])
    assert error is E.NONE and session.epoch == 1 and list(session.partitions) == [(T, 0)]
    assert cache.check("g", "m", 1) == (session, E.NONE)
    assert cache.check("g", "m", 1) == (None, E.INVALID_SHARE_SESSION_EPOCH)
    assert cache.check("g", "m", 2) == (session, E.NONE)
    assert cache.check("g", "m", -1) == (session, E.NONE)  # the final epoch is always accepted
    assert cache.check("g", "other", 1) == (None, E.SHARE_SESSION_NOT_FOUND)


def test_epoch_zero_replaces_the_members_session_and_the_limit_counts_sessions():
    cache = ShareSessionCache(1)
    first, _ = cache.open("g", "m", 1, [])
    second, error = cache.open("g", "m", 2, [(T, 1)])
    assert error is E.NONE and second is not first
    assert cache.open("g", "n", 3, []) == (None, E.SHARE_SESSION_LIMIT_REACHED)


def test_a_closed_connection_ends_the_sessions_it_opened():
    cache = ShareSessionCache(10)
    a, _ = cache.open("g", "a", 1, [])
    cache.open("g", "b", 2, [])
    assert cache.closed_connection(1) == [a]
    assert cache.check("g", "a", 1) == (None, E.SHARE_SESSION_NOT_FOUND)
    assert cache.check("g", "b", 1)[1] is E.NONE


def test_the_epoch_wraps_to_one():
    assert next_epoch(INT32_MAX) == 1 and next_epoch(5) == 6
