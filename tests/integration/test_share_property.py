"""Random produce / fetch / acknowledge / lock expiry / session end / restart walks against a running
broker over TCP (the broker-level companion of tests/unit/test_share_partition_property.py).

Whatever the walk, no record is held by two members at once, none is delivered again after
it was accepted or rejected, none is accepted twice, and the live share-partition equals the
state the share coordinator replayed from the records it wrote; at the end, draining the
partition with ACCEPT leaves every record accepted, rejected or archived at the delivery
limit -- never lost.  Bounded: 6 walks of 40 steps, 3 members, a restart now and then.
"""

from __future__ import annotations

import random
import time

import pytest

from odradek.testing import ThreadedBroker

from .share_wire import (
    ACCEPT,
    REJECT,
    RELEASE,
    acks,
    acquired,
    client,
    create_topic,
    describe_offsets,
    fetch_topics,
    init_share,
    partition_rows,
    produce,
    share_fetch,
    topic_id,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MEMBERS = ("m1", "m2", "m3")
LOCK_MS, LIMIT = 1000, 3


class Walk:
    def __init__(self, broker: ThreadedBroker, rng: random.Random):
        self.b, self.rng = broker, rng
        self.conns: dict[str, object] = {}
        self.epochs: dict[str, int] = {}
        self.log_end = 0
        self.holder: dict[int, str] = {}
        self.accepted: set[int] = set()
        self.rejected: set[int] = set()
        self.count: dict[int, int] = {}
        self.admin = client(broker)
        create_topic(self.admin, "t")
        init_share(self.admin, "g", "t")
        self.tid = topic_id(self.admin, "t")

    def conn(self, member: str):
        if member not in self.conns:
            self.conns[member] = client(self.b)
            self.epochs[member] = 0
        return self.conns[member]

    def fetch(self, member: str, topics=None, max_records: int = 8):
        c = self.conn(member)
        epoch = self.epochs[member]
        r = share_fetch(c, "g", member, epoch, topics if topics is not None else fetch_topics(self.tid, 0),
                        max_records=max_records, batch_size=4)
        assert r.error_code == 0, r
        self.epochs[member] = epoch + 1
        for first, last, count in acquired(r):
            for offset in range(first, last + 1):
                assert offset not in self.holder, f"{offset} handed to {member} while {self.holder[offset]} holds it"
                assert offset not in self.accepted and offset not in self.rejected, f"finished {offset} redelivered"
                assert count <= LIMIT
                self.holder[offset] = member
                self.count[offset] = count
        return r

    def step(self) -> None:
        rng = self.rng
        kind = rng.choice(["produce", "fetch", "fetch", "ack", "ack", "expire", "leave", "restart"])
        if kind == "produce":
            n = rng.randint(1, 4)
            produce(self.admin, "t", 1, n)
            self.log_end += n
        elif kind == "fetch":
            self.fetch(rng.choice(MEMBERS), max_records=rng.randint(1, 8))
        elif kind == "ack":
            self.ack(rng.choice(MEMBERS))
        elif kind == "expire":
            self.b.control("advance_clock", ms=LOCK_MS + 1)
            self.settle()
            self.holder.clear()
        elif kind == "leave":
            member = rng.choice(MEMBERS)
            if self.epochs.get(member):
                r = share_fetch(self.conn(member), "g", member, -1, [])
                assert r.error_code == 0, r
                self.epochs[member] = 0
                self.holder = {o: m for o, m in self.holder.items() if m != member}
        elif rng.random() < 0.5:  # a restart, now and then
            for c in self.conns.values():
                c.close()
            self.admin.close()
            self.b.restart()
            self.b.wait_loaded()
            configure(self.b)
            self.conns.clear()
            self.epochs.clear()
            self.admin = client(self.b)
            self.holder.clear()

    def settle(self) -> None:
        """Until the lock-expiry writes the clock's advance started are done."""
        deadline = time.monotonic() + 5
        while self.b.call(lambda: self.b.app.share_partitions.busy()):
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def ack(self, member: str) -> None:
        mine = sorted(o for o, m in self.holder.items() if m == member)
        if not mine:
            return
        chosen = [o for o in mine if self.rng.random() < 0.7] or mine[:1]
        types = [self.rng.choice([ACCEPT, ACCEPT, RELEASE, REJECT]) for _ in chosen]
        r = share_fetch(self.conn(member), "g", member, self.epochs[member],
                        acks(self.tid, 0, *[(o, o, [t]) for o, t in zip(chosen, types, strict=True)]), max_records=0)
        assert r.error_code == 0 and partition_rows(r)[0].acknowledge_error_code == 0, r
        self.epochs[member] += 1
        for offset, t in zip(chosen, types, strict=True):
            del self.holder[offset]
            if t == ACCEPT:
                assert offset not in self.accepted
                self.accepted.add(offset)
            elif t == REJECT:
                self.rejected.add(offset)

    def live_equals_replayed(self) -> None:
        app = self.b.app

        def both():
            key = ("g", self.tid, 0)
            live = app.share_partitions.live(*key)
            shard = app.share_coordinator.shard_for(key)
            return None if live is None else live.durable_view(), shard.states.get(key)
        view, state = self.b.call(both)
        if view is None:
            return
        start, offsets = view
        assert state.start_offset == start
        replayed = {o: (b.delivery_state, b.delivery_count) for b in state.state_batches
                    for o in range(b.first_offset, b.last_offset + 1)}
        assert {o: v for o, v in replayed.items() if v != (0, 0)} == offsets

    def drain(self) -> None:
        for member in MEMBERS:  # end every session: their records come back
            if self.epochs.get(member):
                share_fetch(self.conn(member), "g", member, -1, [])
                self.epochs[member] = 0
        self.holder.clear()
        for _ in range(50):
            got = acquired(self.fetch("drainer", max_records=100))
            if not got:
                break
            self.ack_all("drainer", [(first, last) for first, last, _n in got])
        row = describe_offsets(self.admin, "g", "t").groups[0].topics[0].partitions[0]
        assert row.start_offset == self.log_end and row.lag == 0, row
        for offset in range(self.log_end):
            assert offset in self.accepted or offset in self.rejected or self.count.get(offset) == LIMIT, \
                f"offset {offset} lost"

    def ack_all(self, member: str, ranges: list[tuple[int, int]]) -> None:
        r = share_fetch(self.conn(member), "g", member, self.epochs[member],
                        acks(self.tid, 0, *[(lo, hi, [ACCEPT]) for lo, hi in ranges]), max_records=0)
        assert partition_rows(r)[0].acknowledge_error_code == 0, r
        self.epochs[member] += 1
        for offset in (o for lo, hi in ranges for o in range(lo, hi + 1)):
            del self.holder[offset]
            assert offset not in self.accepted
            self.accepted.add(offset)


def configure(b: ThreadedBroker) -> None:
    """A short lock and a low delivery limit for the group, so walks reach both."""
    b.call(lambda: b.app.group_configs.set_overrides("g", {
        "share_record_lock_duration_ms": LOCK_MS, "share_delivery_count_limit": LIMIT}))


@pytest.mark.parametrize("seed", range(6))
def test_random_walks_never_lose_or_double_accept_a_record(tmp_path, seed):
    with ThreadedBroker(tmp_path) as b:
        configure(b)
        walk = Walk(b, random.Random(seed))
        for _ in range(40):
            walk.step()
            walk.live_equals_replayed()
        walk.drain()
        walk.live_equals_replayed()
        assert walk.accepted and max(walk.count.values()) >= 2  # the walk redelivered something
