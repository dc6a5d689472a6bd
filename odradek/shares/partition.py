"""The share-partition state machine (KIP-932), sans-I/O on an injected clock.

One :class:`SharePartition` per (share group, topic-partition) on the
partition's leader, after Kafka's ``SharePartition``: it decides which
offsets a member may take (acquire), records what members did with them
(acknowledge), takes them back when a lock expires or a member's session
ends, counts deliveries and archives a record at
``group.share.delivery.count.limit``, and moves the share-partition start
offset past the prefix of terminal records.

The broker owns the I/O: it reads the log from :meth:`SharePartition.fetch_offset`
and passes the log batches it read (and, under read_committed, the offset
ranges of aborted transactions and control records) to :meth:`acquire`;
it passes ``now`` (the broker clock, in ms) to every call, calls
:meth:`expire` when :meth:`next_deadline` is due, and sends every
:class:`~odradek.shares.state.StateWrite` a call returns to the share
coordinator **before** it answers the request.  Kafka applies a write
tentatively and rolls back when the persister fails; here the state changes
at once, so a failed write must fail the partition (reload from the
coordinator), which is what Kafka does with a partition whose write failed
in a way it cannot retry.

Record states and their persisted ids are Kafka's ``RecordState``:
AVAILABLE 0, ACQUIRED 1, ACKNOWLEDGED 2, ARCHIVED 4.  Acquisition is never
persisted: a record acquired at a crash comes back AVAILABLE with its last
persisted delivery count, and is redelivered.

State is kept per offset over ``[start_offset, end_offset)``, bounded by
``group.share.partition.max.record.locks`` (Kafka keeps batches split on
demand; the behaviour is the same, a test broker's partitions are small).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from enum import IntEnum

from ..protocol.errors import ErrorCode
from ..protocol.lean_dataclass import dataclass
from .records import StateBatch
from .state import PersistedState, StateWrite

__all__ = [
    "RecordState", "AckType", "ShareAckError", "INVALID_REQUEST", "INVALID_RECORD_STATE",
    "LogBatch", "AcquiredRecords", "AckBatch", "ShareConfig", "InFlight", "SharePartition",
    "initial_start_offset", "parse_duration_ms",
]

INVALID_REQUEST = ErrorCode.INVALID_REQUEST
INVALID_RECORD_STATE = ErrorCode.INVALID_RECORD_STATE


class RecordState(IntEnum):
    """Kafka's ``RecordState`` with its persisted ids (3, ARCHIVING, is reserved and unused)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AckType(IntEnum):
    """``AcknowledgeTypes`` of ShareFetch/ShareAcknowledge (RENEW: v2, KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class ShareAckError(Exception):
    """An acknowledgement Kafka refuses for the whole partition; ``code`` is its error code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass(slots=True, frozen=True)
class LogBatch:
    """A log record batch as read for a share fetch: its first and last offset (inclusive)."""

    first_offset: int
    last_offset: int


@dataclass(slots=True, frozen=True)
class AcquiredRecords:
    """One ``AcquiredRecords`` entry of a ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True, frozen=True)
class AckBatch:
    """One ``AcknowledgementBatches`` entry: one type for the range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(slots=True, frozen=True)
class ShareConfig:
    """The settings one share-partition obeys (Kafka's broker defaults)."""

    delivery_count_limit: int = 5            # group.share.delivery.count.limit
    record_lock_duration_ms: int = 30_000    # group.share.record.lock.duration.ms
    max_record_locks: int = 2000             # group.share.partition.max.record.locks


@dataclass(slots=True)
class InFlight:
    """One offset's state: record state, delivery count, owner ("" when none), lock deadline (ms)."""

    state: RecordState
    count: int
    member: str = ""
    deadline: int = 0


# --- share.auto.offset.reset ---------------------------------------------------------

_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it (``PnDTnHnMn.nS``), in ms."""
    m = _DURATION.fullmatch(text.strip())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    days, hours, minutes, seconds = m.groups()
    return (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
            + round(float(seconds or 0) * 1000))


def initial_start_offset(reset: str, *, log_start: int, log_end: int, now: int,
                         offset_for_timestamp: Callable[[int], int | None]) -> int:
    """Where a share-partition without state starts, by ``share.auto.offset.reset``.

    ``latest`` (Kafka's default): the log end offset; ``earliest``: the log
    start offset; ``by_duration:<ISO-8601>``: the first offset whose
    timestamp is at or after now - duration (the log end when there is none).
    """
    if reset == "earliest":
        return log_start
    if reset == "latest":
        return log_end
    if reset.startswith("by_duration:"):
        found = offset_for_timestamp(now - parse_duration_ms(reset.partition(":")[2]))
        return log_end if found is None else max(found, log_start)
    raise ValueError(f"share.auto.offset.reset must be latest, earliest or by_duration:<duration>, not {reset!r}")


# --- the state machine ------------------------------------------------------------------

class SharePartition:
    """The in-flight records of one share-partition and the rules that move them."""

    def __init__(self, config: ShareConfig, start_offset: int, *, state_epoch: int = 0, leader_epoch: int = 0):
        self.config = config
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self.start_offset = start_offset
        self.end_offset = start_offset   # exclusive: the next offset never yet cached
        self.records: dict[int, InFlight] = {}

    # -- load -------------------------------------------------------------------------

    @classmethod
    def from_persisted(cls, config: ShareConfig, state: PersistedState, *, leader_epoch: int = 0,
                       reset_start: int | None = None) -> SharePartition:
        """Rebuild from ReadShareGroupState's answer: every non-terminal record AVAILABLE, no owner.

        Offsets between the start and the last persisted batch that no batch
        covers (the "gap window") are fetched first, as never delivered.  A
        state initialized without a start offset (-1) starts at
        ``reset_start``, :func:`initial_start_offset`'s answer for the group.
        """
        start = state.start_offset
        if start == -1:
            if reset_start is None:
                raise ValueError("the state has no start offset: pass reset_start (share.auto.offset.reset)")
            start = reset_start
        sp = cls(config, start, state_epoch=state.state_epoch, leader_epoch=leader_epoch)
        for b in state.state_batches:
            record_state = RecordState(b.delivery_state)
            if record_state == RecordState.ACQUIRED:  # not expected; Kafka treats it as available
                record_state = RecordState.AVAILABLE
            for offset in range(max(b.first_offset, sp.start_offset), b.last_offset + 1):
                sp.records[offset] = InFlight(record_state, b.delivery_count)
            sp.end_offset = max(sp.end_offset, b.last_offset + 1)
        for offset in range(sp.start_offset, sp.end_offset):
            sp.records.setdefault(offset, InFlight(RecordState.AVAILABLE, 0))
        sp._advance_start()
        return sp

    # -- reading ------------------------------------------------------------------------

    def fetch_offset(self) -> int:
        """Where the broker should read the log from: the lowest AVAILABLE cached offset, else the end."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def next_deadline(self) -> int | None:
        """The earliest acquisition-lock deadline, when :meth:`expire` has work."""
        deadlines = [r.deadline for r in self.records.values() if r.state == RecordState.ACQUIRED]
        return min(deadlines, default=None)

    @property
    def delivery_complete_count(self) -> int:
        """Terminal records at or after the start offset (KIP-1226, persisted for lag)."""
        return sum(1 for r in self.records.values() if r.state in TERMINAL)

    def acquired_by(self, member: str) -> list[int]:
        return sorted(o for o, r in self.records.items() if r.state == RecordState.ACQUIRED and r.member == member)

    # -- acquire ------------------------------------------------------------------------

    def acquire(self, member: str, log_batches: Sequence[LogBatch], *, max_records: int, batch_size: int,
                now: int, aborted: Iterable[tuple[int, int]] = (),
                record_limit: bool = False) -> tuple[list[AcquiredRecords], StateWrite | None]:
        """Acquire records for ``member``: cached AVAILABLE ones first, then new ones from ``log_batches``.

        New records are taken in whole log batches (``max_records`` is soft:
        the last batch is taken whole) and returned in entries of about
        ``batch_size`` records cut at batch boundaries; at most
        ``max_record_locks`` offsets are in flight (span from the start
        offset).  Offsets of ``aborted`` ranges (read_committed: aborted
        transactions, control records) are archived at once, never returned;
        that change is the returned write.  Acquisition itself is not
        persisted.  ``record_limit`` (ShareFetch v2's ``ShareAcquireMode`` 1, KIP-1206): at
        most ``max_records`` exactly, the rest of a log batch left for the next fetch.
        """
        deadline = now + self.config.record_lock_duration_ms
        budget = max_records
        acquired: list[AcquiredRecords] = []
        taken, throttled = self._acquire_cached(member, deadline, budget, acquired)
        if throttled:
            return acquired, None
        budget -= taken
        dead = _Ranges(aborted)
        archived: list[int] = []
        room = self.config.max_record_locks - (self.end_offset - self.start_offset)
        entry: list[int] = []
        for batch in sorted(log_batches, key=lambda b: b.first_offset):
            if budget <= 0 or room <= 0:
                break
            if batch.last_offset < self.end_offset:
                continue
            first = self.end_offset  # holes before a batch (compacted away) ride along; clients ack them GAP
            stop = min(batch.last_offset + 1, first + budget) if record_limit else batch.last_offset + 1
            for offset in range(first, stop):
                if dead.ranges and dead.covers(offset):
                    self.records[offset] = InFlight(RecordState.ARCHIVED, 1)
                    archived.append(offset)
                    entry = self._close_entry(entry, acquired, 1)
                    continue
                self.records[offset] = InFlight(RecordState.ACQUIRED, 1, member, deadline)
                entry.append(offset)
            self.end_offset = stop
            budget -= stop - first
            room -= stop - first
            if len(entry) >= batch_size:
                entry = self._close_entry(entry, acquired, 1)
        self._close_entry(entry, acquired, 1)
        if not archived:
            return acquired, None
        self._advance_start()
        return acquired, self._write(archived)

    @staticmethod
    def _close_entry(entry: list[int], acquired: list[AcquiredRecords], count: int) -> list[int]:
        if entry:
            acquired.append(AcquiredRecords(entry[0], entry[-1], count))
        return []

    def _acquire_cached(self, member: str, deadline: int, budget: int,
                        acquired: list[AcquiredRecords]) -> tuple[int, bool]:
        """Re-acquire cached AVAILABLE records, lowest first, in runs of equal delivery count.

        A record already delivered ``max(2, ceil(limit / 2))`` times is handed
        out alone with its run (nothing before it, nothing after), so a poison
        record does not drag its neighbours to the limit (Kafka's throttled
        acquisition).  Returns how many were taken and whether the
        acquisition was throttled (then no new records join it).
        """
        throttle = max(2, math.ceil(self.config.delivery_count_limit / 2))
        taken = 0
        run: list[int] = []
        for offset in range(self.start_offset, self.end_offset):
            rec = self.records[offset]
            if taken >= budget:
                break
            if rec.state != RecordState.AVAILABLE:
                continue
            throttled = rec.count >= throttle
            if run and (run[-1] + 1 != offset or self.records[run[-1]].count != rec.count + 1):
                acquired.append(AcquiredRecords(run[0], run[-1], self.records[run[0]].count))
                run = []
                if throttled or acquired[-1].delivery_count - 1 >= throttle:
                    return taken, True
            rec.state, rec.count, rec.member, rec.deadline = RecordState.ACQUIRED, rec.count + 1, member, deadline
            run.append(offset)
            taken += 1
        if run:
            acquired.append(AcquiredRecords(run[0], run[-1], self.records[run[0]].count))
            return taken, acquired[-1].delivery_count - 1 >= throttle
        return taken, False

    # -- acknowledge --------------------------------------------------------------------

    def acknowledge(self, member: str, batches: Sequence[AckBatch], now: int) -> StateWrite | None:
        """Apply a member's acknowledgements, all or nothing; the write to persist, or None (RENEW only).

        Raises :class:`ShareAckError`: INVALID_REQUEST for malformed batches
        (first > last, out of order or overlapping, a type list of the wrong
        length, an unknown type, a range past the records ever acquired);
        INVALID_RECORD_STATE for records that are not ACQUIRED by ``member``.
        Ranges wholly below the start offset are ignored (already done).
        """
        plan = self._validate(member, batches)
        changed: list[int] = []
        for offset, ack in plan:
            rec = self.records[offset]
            if ack == AckType.RENEW:
                rec.deadline = now + self.config.record_lock_duration_ms
                continue
            if ack == AckType.ACCEPT:
                rec.state = RecordState.ACKNOWLEDGED
            elif ack == AckType.RELEASE:
                rec.state = self._released_state(rec)
            else:  # GAP, REJECT
                rec.state = RecordState.ARCHIVED
            rec.member, rec.deadline = "", 0
            changed.append(offset)
        if not changed:
            return None
        self._advance_start()
        return self._write(changed)

    def _validate(self, member: str, batches: Sequence[AckBatch]) -> list[tuple[int, AckType]]:
        plan: list[tuple[int, AckType]] = []
        previous_last = None
        for b in batches:
            if b.first_offset > b.last_offset:
                raise ShareAckError(INVALID_REQUEST, f"first offset {b.first_offset} > last offset {b.last_offset}")
            if previous_last is not None and b.first_offset <= previous_last:
                raise ShareAckError(INVALID_REQUEST, "acknowledgement batches overlap or are out of order")
            previous_last = b.last_offset
            span = b.last_offset - b.first_offset + 1
            if len(b.types) not in (1, span):
                raise ShareAckError(INVALID_REQUEST, f"{len(b.types)} acknowledge types for {span} offsets")
            try:
                types = [AckType(t) for t in b.types]
            except ValueError:
                raise ShareAckError(INVALID_REQUEST, f"unknown acknowledge type in {b.types}") from None
            if b.last_offset < self.start_offset:
                continue
            if b.last_offset >= self.end_offset:
                raise ShareAckError(INVALID_REQUEST, f"offsets up to {b.last_offset} were never acquired")
            # from the start offset on: a range reaching far below it (a hostile first offset) costs nothing
            for offset in range(max(b.first_offset, self.start_offset), b.last_offset + 1):
                rec = self.records[offset]
                if rec.state != RecordState.ACQUIRED or rec.member != member:
                    raise ShareAckError(INVALID_RECORD_STATE, f"offset {offset} is not acquired by this member")
                plan.append((offset, types[0] if len(types) == 1 else types[offset - b.first_offset]))
        return plan

    # -- taking records back ------------------------------------------------------------

    def expire(self, now: int) -> StateWrite | None:
        """Acquisition locks due at ``now``: those records become AVAILABLE again (ARCHIVED at the limit)."""
        return self._release(lambda r: r.deadline <= now)

    def release_member(self, member: str) -> StateWrite | None:
        """A member's share session ended: everything it holds becomes AVAILABLE (ARCHIVED at the limit)."""
        return self._release(lambda r: r.member == member)

    def _release(self, which: Callable[[InFlight], bool]) -> StateWrite | None:
        changed = []
        for offset in range(self.start_offset, self.end_offset):
            rec = self.records[offset]
            if rec.state == RecordState.ACQUIRED and which(rec):
                rec.state, rec.member, rec.deadline = self._released_state(rec), "", 0
                changed.append(offset)
        if not changed:
            return None
        self._advance_start()
        return self._write(changed)

    def _released_state(self, rec: InFlight) -> RecordState:
        return RecordState.ARCHIVED if rec.count >= self.config.delivery_count_limit else RecordState.AVAILABLE

    def move_log_start(self, log_start: int) -> StateWrite | None:
        """The log start moved past the start offset (retention, DeleteRecords): skip what is gone."""
        if log_start <= self.start_offset:
            return None
        for offset in range(self.start_offset, min(log_start, self.end_offset)):
            del self.records[offset]
        self.start_offset = log_start
        self.end_offset = max(self.end_offset, log_start)
        self._advance_start()
        return self._write([])

    # -- start offset and durable state --------------------------------------------------

    def _advance_start(self) -> None:
        """Move the start offset past the longest prefix of terminal records, dropping them."""
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in TERMINAL:
            del self.records[self.start_offset]
            self.start_offset += 1

    def _write(self, offsets: Iterable[int]) -> StateWrite:
        """The write for the changed ``offsets`` (those still at or past the start), as state batches."""
        runs: list[StateBatch] = []
        for offset in sorted(offsets):
            rec = self.records.get(offset)
            if rec is None:
                continue
            last = runs[-1] if runs else None
            if (last is not None and last.last_offset + 1 == offset and last.delivery_state == rec.state
                    and last.delivery_count == rec.count):
                runs[-1] = StateBatch(last.first_offset, offset, last.delivery_state, last.delivery_count)
            else:
                runs.append(StateBatch(offset, offset, int(rec.state), rec.count))
        return StateWrite(state_epoch=self.state_epoch, leader_epoch=self.leader_epoch,
                          start_offset=self.start_offset, delivery_complete_count=self.delivery_complete_count,
                          state_batches=runs)

    def durable_view(self) -> tuple[int, dict[int, tuple[int, int]]]:
        """(start offset, offset -> (state, count)) as the durable state should say it.

        An ACQUIRED record is its last persisted self: AVAILABLE with one
        delivery fewer; AVAILABLE with no delivery is the same as no state
        at all and is left out.  The property tests compare this with the
        state replayed from the writes.
        """
        view = {}
        for offset, rec in self.records.items():
            state, count = (RecordState.AVAILABLE, rec.count - 1) if rec.state == RecordState.ACQUIRED else (
                rec.state, rec.count)
            if state != RecordState.AVAILABLE or count > 0:
                view[offset] = (int(state), count)
        return self.start_offset, view


class _Ranges:
    """Inclusive offset ranges, asked offset by offset in ascending order."""

    def __init__(self, ranges: Iterable[tuple[int, int]]):
        self.ranges = sorted(ranges)

    def covers(self, offset: int) -> bool:
        return any(lo <= offset <= hi for lo, hi in self.ranges)
