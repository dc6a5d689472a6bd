"""Random produce / fetch / ack / expire / session-end / restart sequences against one share-partition
(read_committed: some produced batches belong to aborted transactions).

Whatever happens, every record of the log is delivered-and-accepted, archived
or still available -- never lost, never accepted twice, never held by two
members at once -- and the live state equals the state replayed from the
``__share_group_state`` records written so far (encoded and decoded through
the record codec, snapshots and updates both).  Bounded: 150 sequences of up
to 60 steps.
"""

from __future__ import annotations

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.shares import records as r
from odradek.shares.partition import (
    INVALID_RECORD_STATE,
    AckBatch,
    AckType,
    LogBatch,
    ShareAckError,
    ShareConfig,
    SharePartition,
)
from odradek.shares.state import PersistedState, replay, update_value

CONFIG = ShareConfig(delivery_count_limit=3, record_lock_duration_ms=100, max_record_locks=20)
MEMBERS = ("m1", "m2", "m3")
TOPIC = uuid.uuid4()
SNAP = r.ShareSnapshotKey("g", TOPIC, 0)
UPD = r.ShareUpdateKey("g", TOPIC, 0)

_fetch = st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 12))
step = st.one_of(
    st.tuples(st.just("produce"), st.integers(1, 6), st.booleans()),
    _fetch, _fetch, _fetch,
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 2**32)),
    st.tuples(st.just("steal"), st.sampled_from(MEMBERS), st.integers(0, 2**32)),
    st.tuples(st.just("tick"), st.integers(1, 150)), st.tuples(st.just("tick"), st.integers(1, 150)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("restart"), st.booleans()),
)


class Harness:
    """The partition, the log it reads, the records it has written, and what the members saw."""

    def __init__(self):
        self.now = 0
        self.log: list[LogBatch] = []
        self.aborted: list[tuple[int, int]] = []  # read_committed: batches of aborted transactions
        self.sp = SharePartition(CONFIG, 0)
        initial = PersistedState(start_offset=0, delivery_complete_count=0, create_timestamp=0, write_timestamp=0)
        self.written = [(r.encode_key(SNAP), r.encode_value(initial.snapshot_value()))]
        self.accepted: set[int] = set()
        self.archived: set[int] = set()
        self.holder: dict[int, str] = {}
        self.count: dict[int, int] = {}

    @property
    def log_end(self) -> int:
        return self.log[-1].last_offset + 1 if self.log else 0

    def replayed(self) -> PersistedState:
        decoded = []
        for k, v in self.written:
            key = r.decode_key(k)
            decoded.append((key, r.decode_value(key, v)))
        return replay(decoded)[("g", TOPIC, 0)]

    def persist(self, write, snapshot: bool = False) -> None:
        if write is None:
            return
        state = self.replayed()
        if snapshot:
            merged = state.merged(write)
            merged.snapshot_epoch += 1
            self.written.append((r.encode_key(SNAP), r.encode_value(merged.snapshot_value())))
        else:
            self.written.append((r.encode_key(UPD), r.encode_value(update_value(state.snapshot_epoch, write))))

    def take_back(self, offsets) -> None:
        for offset in offsets:
            self.holder.pop(offset, None)
            if self.count[offset] >= CONFIG.delivery_count_limit:
                self.archived.add(offset)

    def run(self, op) -> None:
        kind = op[0]
        if kind == "produce":
            batch = LogBatch(self.log_end, self.log_end + op[1] - 1)
            self.log.append(batch)
            if len(op) > 2 and op[2] and op[1] % 3 == 0:
                self.aborted.append((batch.first_offset, batch.last_offset))
        elif kind == "fetch":
            self.fetch(op[1], op[2])
        elif kind in ("ack", "steal"):
            self.ack(op[1], op[2], steal=kind == "steal")
        elif kind == "tick":
            self.now += op[1]
            due = [o for o in self.holder if self.sp.records[o].deadline <= self.now]
            self.persist(self.sp.expire(self.now))
            self.take_back(due)
        elif kind == "leave":
            mine = [o for o, m in self.holder.items() if m == op[1]]
            self.persist(self.sp.release_member(op[1]), snapshot=True)
            self.take_back(mine)
        else:
            self.sp = SharePartition.from_persisted(CONFIG, self.replayed())
            self.holder.clear()

    def fetch(self, member: str, max_records: int) -> None:
        batches = [b for b in self.log if b.last_offset >= self.sp.fetch_offset()]
        got, write = self.sp.acquire(member, batches, max_records=max_records, batch_size=4, now=self.now,
                                     aborted=self.aborted)
        self.persist(write)
        self.archived.update(o for lo, hi in self.aborted for o in range(lo, min(hi + 1, self.sp.end_offset)))
        for a in got:
            for offset in range(a.first_offset, a.last_offset + 1):
                assert offset not in self.holder, f"offset {offset} handed to {member} while {self.holder[offset]} holds it"
                assert offset not in self.accepted and offset not in self.archived, f"finished offset {offset} redelivered"
                assert not any(lo <= offset <= hi for lo, hi in self.aborted), f"aborted offset {offset} delivered"
                assert offset < self.log_end
                assert a.delivery_count <= CONFIG.delivery_count_limit
                self.holder[offset] = member
                self.count[offset] = a.delivery_count

    def ack(self, member: str, seed: int, steal: bool) -> None:
        mine = sorted(o for o, m in self.holder.items() if (m != member) == steal)
        if not mine:
            return
        chosen = [o for i, o in enumerate(mine) if (seed >> (i % 32)) & 1] or mine[:1]
        types = [(AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.ACCEPT)[(seed >> (o % 29)) & 3]
                 for o in chosen]
        batches = [AckBatch(o, o, (int(t),)) for o, t in zip(chosen, types, strict=True)]
        if steal:
            try:
                self.sp.acknowledge(member, batches, self.now)
            except ShareAckError as err:
                assert err.code == INVALID_RECORD_STATE
                return
            raise AssertionError("acknowledged another member's records")
        self.persist(self.sp.acknowledge(member, batches, self.now), snapshot=seed % 5 == 0)
        for offset, t in zip(chosen, types, strict=True):
            self.holder.pop(offset)
            if t == AckType.ACCEPT:
                assert offset not in self.accepted
                self.accepted.add(offset)
            elif t == AckType.REJECT:
                self.archived.add(offset)
            else:
                self.take_back([offset])

    def check(self) -> None:
        sp = self.sp
        assert not self.accepted & self.archived
        for offset in range(self.log_end):
            if offset < sp.start_offset:
                assert offset in self.accepted or offset in self.archived, f"offset {offset} lost below the start"
            elif offset < sp.end_offset:
                state = sp.records[offset].state
                assert (offset in self.accepted) == (state == 2), offset
                assert (offset in self.archived) == (state == 4), offset
        start, view = sp.durable_view()
        state = self.replayed()
        assert state.start_offset == start
        replayed = {o: (b.delivery_state, b.delivery_count) for b in state.state_batches
                    for o in range(b.first_offset, b.last_offset + 1)}
        assert {o: v for o, v in replayed.items() if v != (0, 0)} == view
        assert state.delivery_complete_count == sp.delivery_complete_count


@settings(max_examples=150, deadline=None)
@given(st.lists(step, min_size=10, max_size=60))
def test_records_are_never_lost_or_accepted_twice_and_replay_matches(steps):
    h = Harness()
    for op in steps:
        h.run(op)
        h.check()


def _random_op(rng):
    kind = rng.choice(["produce", "fetch", "fetch", "fetch", "ack", "steal", "tick", "tick", "leave", "restart"])
    return {"produce": lambda: ("produce", rng.randint(1, 6), rng.random() < 0.3),
            "fetch": lambda: ("fetch", rng.choice(MEMBERS), rng.randint(1, 12)),
            "ack": lambda: ("ack", rng.choice(MEMBERS), rng.getrandbits(32)),
            "steal": lambda: ("steal", rng.choice(MEMBERS), rng.getrandbits(32)),
            "tick": lambda: ("tick", rng.randint(1, 150)),
            "leave": lambda: ("leave", rng.choice(MEMBERS)),
            "restart": lambda: ("restart", True)}[kind]()


def test_long_random_walks_reach_the_delivery_limit_and_keep_the_invariants():
    """Longer walks than the shrinking search above reaches: redeliveries up to the limit on many offsets."""
    reached_limit = 0
    for seed in range(60):
        rng = random.Random(seed)
        h = Harness()
        for _ in range(80):
            h.run(_random_op(rng))
            h.check()
        reached_limit += sum(1 for c in h.count.values() if c == CONFIG.delivery_count_limit)
    assert reached_limit > 0  # the walks exercise the limit, not just first deliveries
