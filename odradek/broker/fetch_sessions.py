"""Incremental fetch sessions (KIP-227), kept as Kafka's ``FetchSession.scala`` keeps them.

A Fetch (v7+) names a session id and epoch (``FetchMetadata``):

- epoch 0 or -1 is a *full* fetch: the named session (if any) is closed; epoch 0 may create a
  new one holding every partition answered, whose id the answer carries (0 when the cache had
  no room); epoch -1 never does (``SessionlessFetchContext``);
- any other epoch is *incremental*: the session must exist (else FETCH_SESSION_ID_NOT_FOUND)
  and expect that epoch (else INVALID_FETCH_SESSION_EPOCH), and be used from the same side of
  Fetch v13 (topic ids) as it was made (else FETCH_SESSION_TOPIC_ID_ERROR); the request's
  partitions are added or updated, its forgotten ones removed, the epoch advances (wrapping to
  1) and the whole session is fetched; the answer holds only the partitions that changed
  (``CachedPartition.maybeUpdateResponseData``: records, a new high watermark or log start
  offset, an error).  A session left empty is closed and the request answered sessionless.

The cache (``FetchSessionCacheShard``): ``max.incremental.fetch.session.cache.slots`` split
over Kafka's 8 shards, new sessions given to the shards in turn, each shard drawing its ids
from its own range; a full shard evicts a session unused for 2 minutes, else the least
valuable evictable one (unprivileged before privileged -- followers' sessions are
privileged --, then fewer partitions) if the new session is worth more.  Times are the broker
clock's.  Sessions outlive connections, as Kafka's: a client that reconnects closes its old
one with its next full fetch.  ``clear`` (a test-control reset) drops them all.

Sans-I/O: the fetch handler (``handlers/fetch.py``) reads the partitions a context lists and
hands the answers back to it.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import field
from functools import partial
from typing import Any

from ..protocol.errors import ErrorCode
from ..protocol.lean_dataclass import dataclass

INVALID_SESSION_ID = 0
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
INT32_MAX = 2**31 - 1
SHARDS = 8  # KafkaBroker.NumFetchSessionCacheShards
EVICTION_MS = 120_000  # KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
ID_RANGE = INT32_MAX // SHARDS
TOPIC_ID_VERSION = 13  # Fetch names topics by id from here on (KIP-516)
ZERO_UUID = uuid.UUID(int=0)

Key = tuple[Any, int]  # (topic id, or the name in a session without ids; partition)


def next_epoch(epoch: int) -> int:
    """``FetchMetadata.nextEpoch``: -1 stays -1, the maximum wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True, eq=False)
class Wanted:
    """One partition to read: the request's fetch position and limits (or the session's)."""

    key: Key  # ``key_of(topic, topic_id, partition)``: made once, a session's dict key
    topic: str | None  # None: a topic id no topic has (UNKNOWN_TOPIC_ID)
    topic_id: uuid.UUID  # the zero uuid below Fetch v13
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1


def key_of(topic: str | None, topic_id: uuid.UUID, partition: int) -> Key:
    """A partition's identity in a session (``CachedPartition.equals``): its topic id when it
    has one (Fetch v13+), else its topic name."""
    return (topic_id if topic_id != ZERO_UUID else topic, partition)


@dataclass(slots=True, eq=False)
class CachedPartition:
    """A session's partition: the last request parameters and the last answered watermarks."""

    wanted: Wanted
    high_watermark: int = -1
    local_log_start_offset: int = -1

    def must_respond(self, answer: dict, update: bool) -> bool:
        """``CachedPartition.maybeUpdateResponseData``: whether an incremental answer carries it."""
        respond = bool(answer["records"])
        if self.high_watermark != answer["high_watermark"]:
            respond = True
            if update:
                self.high_watermark = answer["high_watermark"]
        if self.local_log_start_offset != answer["log_start_offset"]:
            respond = True
            if update:
                self.local_log_start_offset = answer["log_start_offset"]
        if answer.get("preferred_read_replica", -1) != -1:
            respond = True
        if answer["error_code"] != ErrorCode.NONE:
            respond = True  # and re-sent once the error is gone
            if update:
                self.high_watermark = -1
        return respond


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[Key, CachedPartition]  # in Kafka's order: partitions with data move to the end
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int  # the epoch the next incremental request must carry
    cached_size: int = -1  # the size when last touched (the eviction key)
    by_all: bool = False  # evictable by any new session (created more than EVICTION_MS ago)
    by_privileged: bool = False  # evictable by a privileged one

    def update(self, wanted: Iterable[Wanted], forgotten: Iterable[Key]) -> None:
        """``FetchSession.update``: add or refresh the request's partitions, drop forgotten ones."""
        for w in wanted:
            cached = self.partitions.get(w.key)
            if cached is None:
                self.partitions[w.key] = CachedPartition(w)
            else:
                w.topic = cached.wanted.topic  # a name resolved once stays (maybeResolveUnknownName)
                cached.wanted = w
        for key in forgotten:
            self.partitions.pop(key, None)


@dataclass(slots=True)
class _Shard:
    """``FetchSessionCacheShard``: at most ``max_entries`` sessions with ids in its own range."""

    number: int
    max_entries: int
    sessions: dict[int, FetchSession] = field(default_factory=dict)

    def new_id(self) -> int:
        import random  # noqa: PLC0415 - on the first incremental fetch session, not at start

        lo, hi = max(1, self.number * ID_RANGE), (self.number + 1) * ID_RANGE
        while True:
            sid = random.randrange(lo, hi)
            if sid not in self.sessions:
                return sid

    def try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """``tryEvict``: a stale session first, else the least valuable evictable one if the new
        session (privileged, size) is worth at least as much."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > EVICTION_MS:
            del self.sessions[stale.id]
            return True
        pool = [s for s in self.sessions.values() if (s.by_privileged if privileged else s.by_all)]
        if not pool:
            return False
        victim = min(pool, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
            return False
        del self.sessions[victim.id]
        return True

    def touch(self, session: FetchSession, now: int) -> None:
        """``touch``: the last use, the size and eviction eligibility as of now."""
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        old = now - session.creation_ms > EVICTION_MS
        session.by_privileged = not session.privileged or old
        session.by_all = old


class FetchSessionCache:
    """Every fetch session of this broker (Kafka's ``FetchSessionCache`` and ``FetchManager``)."""

    def __init__(self, slots: int, now_ms: Callable[[], int]):
        self.now_ms = now_ms
        self.shards = [_Shard(n, slots // SHARDS) for n in range(SHARDS)]
        self._turn = itertools.count()
        self.evictions = 0

    def __len__(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for shard in self.shards for s in shard.sessions.values())

    def clear(self) -> None:
        for shard in self.shards:
            shard.sessions.clear()

    def _shard(self, session_id: int) -> _Shard | None:
        n = session_id // ID_RANGE
        return self.shards[n] if session_id > 0 and n < SHARDS else None

    def get(self, session_id: int) -> FetchSession | None:
        shard = self._shard(session_id)
        return None if shard is None else shard.sessions.get(session_id)

    def remove(self, session_id: int) -> None:
        shard = self._shard(session_id)
        if shard is not None:
            shard.sessions.pop(session_id, None)

    def create(self, privileged: bool, partitions: dict[Key, CachedPartition], uses_topic_ids: bool) -> int:
        """``maybeCreateSession`` on the next shard in turn: the new id, or 0 without room."""
        shard = self.shards[next(self._turn) % SHARDS]
        now = self.now_ms()
        if len(shard.sessions) >= shard.max_entries:
            if not shard.try_evict(privileged, len(partitions), now):
                return INVALID_SESSION_ID
            self.evictions += 1
        session = FetchSession(shard.new_id(), privileged, partitions, uses_topic_ids, now, now,
                               next_epoch(INITIAL_EPOCH))
        shard.sessions[session.id] = session
        shard.touch(session, now)
        return session.id

    def context(self, version: int, session_id: int, epoch: int, privileged: bool, wanted: list[Wanted],
                forgotten: list[Key]) -> FetchContext:
        """``FetchManager.newContext``: what this request reads and how its answer is made."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            return FetchContext(self, wanted, create=epoch == INITIAL_EPOCH, privileged=privileged,
                                uses_topic_ids=version >= TOPIC_ID_VERSION)
        session = self.get(session_id)
        if session is None:
            return FetchContext(self, [], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(self, [], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= TOPIC_ID_VERSION):
            return FetchContext(self, [], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(wanted, forgotten)
        shard = self._shard(session_id)
        assert shard is not None
        if not session.partitions:
            shard.sessions.pop(session.id, None)
            return FetchContext(self, wanted)
        shard.touch(session, self.now_ms())
        session.epoch = next_epoch(session.epoch)
        return FetchContext(self, [c.wanted for c in session.partitions.values()], session=session,
                            expected_epoch=session.epoch)


def _restore(marks: list[tuple[CachedPartition, int, int]]) -> None:
    """A throttled answer's partitions forget what it would have told the client (their place
    in the session's order stays moved: only which partition an answer starts with)."""
    for cached, hw, lso in marks:
        cached.high_watermark, cached.local_log_start_offset = hw, lso


class FetchContext:
    """One request's view of its session: the partitions to read, then its answer's session id,
    error and partitions (``SessionErrorContext``, ``SessionlessFetchContext``,
    ``FullFetchContext``, ``IncrementalFetchContext``)."""

    __slots__ = ("cache", "wanted", "error", "create", "privileged", "uses_topic_ids", "session",
                 "expected_epoch", "_undo")

    def __init__(self, cache: FetchSessionCache, wanted: list[Wanted], *, error: ErrorCode = ErrorCode.NONE,
                 create: bool = False, privileged: bool = False, uses_topic_ids: bool = False,
                 session: FetchSession | None = None, expected_epoch: int = 0):
        self.cache = cache
        self.wanted = wanted
        self.error = error
        self.create = create
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.session = session
        self.expected_epoch = expected_epoch
        self._undo: Callable[[], None] | None = None  # what ``finish`` changed, for ``throttled``

    def finish(self, answers: list[tuple[Wanted, dict]]) -> tuple[ErrorCode, int, list[tuple[Wanted, dict]]]:
        """(error, session id, the partitions the answer carries), the session updated."""
        session = self.session
        if session is not None:
            if session.epoch != self.expected_epoch:  # another request of this session came between
                return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
            marks: list[tuple[CachedPartition, int, int]] = []
            self._undo = partial(_restore, marks)
            kept = []
            for w, answer in answers:
                cached = session.partitions.get(w.key)
                if cached is None:
                    continue
                mark = (cached, cached.high_watermark, cached.local_log_start_offset)
                if cached.must_respond(answer, True):
                    marks.append(mark)
                    kept.append((w, answer))
                    if answer["records"]:  # to the end: the next answer starts with the others
                        session.partitions[w.key] = session.partitions.pop(w.key)
            return ErrorCode.NONE, session.id, kept
        if self.error:
            return self.error, INVALID_SESSION_ID, []
        if not self.create:
            return ErrorCode.NONE, INVALID_SESSION_ID, answers
        cached = {w.key: CachedPartition(w, a["high_watermark"], a["log_start_offset"]) for w, a in answers}
        session_id = self.cache.create(self.privileged, cached, self.uses_topic_ids)
        self._undo = partial(self.cache.remove, session_id)
        return ErrorCode.NONE, session_id, answers

    def throttled(self) -> tuple[ErrorCode, int]:
        """``getThrottledResponse``: no partitions, no new session, and an incremental session keeps
        what it cached before (Kafka decides on the throttle before ``finish``; here it is undone)."""
        if self._undo is not None:
            self._undo()
            self._undo = None
        session = self.session
        if session is None:
            return ErrorCode.NONE, INVALID_SESSION_ID
        if session.epoch != self.expected_epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id
        return ErrorCode.NONE, session.id
