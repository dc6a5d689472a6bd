"""A production-shaped ``__consumer_offsets`` for the pipeline: Kafka-format segments, millions of records.

    .venv/bin/python scripts/gen_offsets_log.py /tmp/offsets-10m --records 10000000
    .venv/bin/python scripts/gen_offsets_log.py /tmp/small --records 200000 --groups 500 --workers 1

Writes ``<out>/__consumer_offsets-<p>`` for ``--partitions`` partitions (50,
Kafka's ``offsets.topic.num.partitions``), each group in the partition
Kafka's hash gives it (``offsets.records.partition_for``), through the
storage layer: keys and values encoded by ``offsets.records``, batches by
``protocol.records``, appended by ``storage.log.Log`` in ``--segment-mb``
segments (Kafka's offsets topic default, 100 MiB), so the files are what a
broker writes.  What the groups do, per group, seeded (``--seed``):

- a consumer group with 1-5 members reading 1-3 topics of 1-12 partitions
  commits every assigned partition in one OffsetCommit batch per tick
  (auto-commit), mostly advancing, sometimes idle (same offset again);
- every few hundred ticks a rebalance: a new generation's group record
  (members joining or leaving), now and then an Empty one in between;
- about 1 group in 20 is retired: it goes Empty and its offsets expire
  (tombstones for each, then the group's tombstone), as the broker's KIP-211
  sweep writes them; the name then comes back as a new group;
- about 1 group in 8 is an exactly-once app: its offsets go in
  TxnOffsetCommit batches (a producer id per app) followed by a COMMIT
  marker, about 1 in 25 an ABORT, and the last one may be left pending.

Partitions are split over ``--workers`` processes (default: every CPU).
Prints what was written, and writes ``<out>/generated.json`` with the counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.offsets.consumer_protocol import (  # noqa: E402
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)
from odradek.offsets.records import (  # noqa: E402
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
    partition_for,
)
from odradek.protocol.records import encode_batch, encode_end_txn_batch  # noqa: E402
from odradek.storage.config import LogConfig  # noqa: E402
from odradek.storage.log import Log  # noqa: E402
from odradek.storage.log_manager import OFFSETS_TOPIC, offsets_topic_config  # noqa: E402

T0 = 1_700_000_000_000
TICK_MS = 5_000  # auto.commit.interval.ms
COUNTS = ("records", "commits", "tombstones", "group_records", "group_tombstones", "txn_commits",
          "txn_committed", "txn_aborted", "txn_pending", "batches")


@dataclasses.dataclass
class GroupSim:
    """One group's state while generating (its own random stream, so output does not depend on workers)."""

    name: str
    rng: random.Random
    partitions: list[tuple[str, int]]
    members: int
    producer_id: int | None
    horizon: int
    generation: int = 0
    offsets: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    keys: dict[tuple[str, int], bytes] = dataclasses.field(default_factory=dict)
    next_rebalance: int = 0
    retire_at: int | None = None


def _group(name: str, seed: int, n_topics: int, producer_id: int, horizon: int) -> GroupSim:
    """A group's simulation; ``horizon``: about how many ticks it will live (scales rebalances, retirement)."""
    rng = random.Random(f"{seed}:{name}")
    topics = rng.sample(range(n_topics), rng.randint(1, 3))
    parts = [(f"topic-{t:03d}", p) for t in topics for p in range(1 + (t * 7) % 12)]
    eos = rng.random() < 1 / 8
    retire = rng.random() < 0.05
    return GroupSim(name, rng, parts, rng.randint(1, 5), producer_id if eos else None, horizon=horizon,
                    next_rebalance=rng.randint(2, max(3, horizon // 3)),
                    retire_at=rng.randint(horizon // 4, max(horizon // 4, horizon * 9 // 10)) if retire else None)


def _members(g: GroupSim) -> list[MemberValue]:
    topics = sorted({t for t, _ in g.partitions})
    sub = encode_subscription(Subscription(topics=topics))
    out = []
    for m in range(g.members):
        mine: dict[str, list[int]] = {}
        for i, (t, p) in enumerate(g.partitions):
            if i % g.members == m:
                mine.setdefault(t, []).append(p)
        asg = encode_assignment(Assignment(assigned_partitions=[TopicPartitions(t, ps) for t, ps in mine.items()]))
        out.append(MemberValue(f"{g.name}-m{m}-g{g.generation}", None, f"client-{m}", "/10.1.0.7", 300000, 45000,
                               sub, asg))
    return out


class PartitionWriter:
    """Appends one offsets partition's records through storage's Log, counting what it wrote."""

    def __init__(self, out: Path, partition: int, segment_bytes: int) -> None:
        config = dataclasses.replace(offsets_topic_config(LogConfig()), segment_bytes=segment_bytes)
        self.now = T0
        self.log = Log.open(out / f"{OFFSETS_TOPIC}-{partition}", config, clock=lambda: self.now)
        self.counts = dict.fromkeys(COUNTS, 0)

    def append(self, items: list[tuple[bytes, bytes | None]], ts: int, **kw) -> None:
        self.now = ts
        self.log.append(encode_batch(items, base_timestamp=ts, **kw), validate=False)
        self.counts["records"] += len(items)
        self.counts["batches"] += 1

    def marker(self, commit: bool, producer_id: int, ts: int) -> None:
        self.log.append(encode_end_txn_batch(commit, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
                                             timestamp=ts), validate=False)
        self.counts["records"] += 1
        self.counts["batches"] += 1
        self.counts["txn_committed" if commit else "txn_aborted"] += 1


def _group_record(w: PartitionWriter, g: GroupSim, ts: int, empty: bool = False) -> None:
    members = [] if empty else _members(g)
    value = GroupValue(protocol_type="consumer", generation=g.generation, protocol=None if empty else "range",
                       leader=members[0].member_id if members else None, current_state_timestamp=ts,
                       members=members)
    w.append([(encode_key(GroupKey(g.name)), encode_value(value))], ts)
    w.counts["group_records"] += 1


def _commit(w: PartitionWriter, g: GroupSim, tick: int, ts: int, last: bool) -> None:
    items = []
    for tp in g.partitions:
        if g.rng.random() < 0.85:  # an idle partition commits the same offset again
            g.offsets[tp] = g.offsets.get(tp, g.rng.randint(0, 10_000)) + g.rng.randint(1, 500)
        key = g.keys.get(tp)
        if key is None:
            key = g.keys[tp] = encode_key(OffsetKey(g.name, *tp))
        value = OffsetValue(offset=g.offsets.setdefault(tp, 0), leader_epoch=tick // 2000, metadata="",
                            commit_timestamp=ts)
        items.append((key, encode_value(value)))
    if g.producer_id is None:
        w.append(items, ts)
        w.counts["commits"] += len(items)
        return
    w.append(items, ts, producer_id=g.producer_id, producer_epoch=0, base_sequence=0, transactional=True)
    w.counts["txn_commits"] += len(items)
    if last and g.rng.random() < 0.5:
        w.counts["txn_pending"] += 1  # the app is mid-transaction when the log ends
        return
    w.marker(g.rng.random() >= 1 / 25, g.producer_id, ts + 1)


def _retire(w: PartitionWriter, g: GroupSim, ts: int) -> None:
    """The group empties; its offsets expire (tombstones), then the group record is deleted."""
    g.generation += 1
    _group_record(w, g, ts, empty=True)
    w.append([(g.keys.get(tp) or encode_key(OffsetKey(g.name, *tp)), None) for tp in g.partitions], ts + 1)
    w.counts["tombstones"] += len(g.partitions)
    w.append([(encode_key(GroupKey(g.name)), None)], ts + 2)
    w.counts["group_tombstones"] += 1
    g.offsets.clear()
    g.generation = 0
    g.retire_at = None  # the name comes back as a new group on its next tick


def write_partition(args: tuple[str, int, list[str], int, int, int, int]) -> dict[str, int]:
    """Generate one offsets partition until it holds ``budget`` records."""
    out, partition, names, budget, segment_bytes, seed, n_topics = args
    w = PartitionWriter(Path(out), partition, segment_bytes)
    horizon = max(10, budget // (len(names) * 12))  # ~12 partitions a group, one record each a tick
    groups = [_group(n, seed, n_topics, 1000 + partition * 100_000 + i, horizon) for i, n in enumerate(names)]
    tick = 0
    try:
        while groups and w.counts["records"] < budget:
            ts = T0 + tick * TICK_MS
            last = w.counts["records"] + len(groups) * 8 >= budget
            for i, g in enumerate(groups):
                t = ts + i  # groups commit in turn within a tick
                if g.generation == 0 or tick >= g.next_rebalance:
                    g.generation += 1
                    if g.generation > 1 and g.rng.random() < 0.2:
                        _group_record(w, g, t, empty=True)  # everyone left before the new generation
                        g.generation += 1
                    g.members = max(1, g.members + g.rng.choice((-1, 0, 1)))
                    g.next_rebalance = tick + g.rng.randint(max(2, g.horizon // 12), max(3, g.horizon // 3))
                    _group_record(w, g, t)
                if g.retire_at is not None and tick >= g.retire_at:
                    _retire(w, g, t)
                    continue
                _commit(w, g, tick, t, last)
            tick += 1
    finally:
        w.log.close()
    return w.counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="data dir to write (must not hold __consumer_offsets yet)")
    ap.add_argument("--records", type=int, default=10_000_000, help="about this many records in all")
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--groups", type=int, default=5000)
    ap.add_argument("--topics", type=int, default=200, help="data topics the groups read")
    ap.add_argument("--segment-mb", type=float, default=100)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=37)
    args = ap.parse_args()

    out = Path(args.out)
    if any(out.glob(f"{OFFSETS_TOPIC}-*")):
        raise SystemExit(f"{out} already holds {OFFSETS_TOPIC}; give an empty or new directory")
    out.mkdir(parents=True, exist_ok=True)
    by_partition: dict[int, list[str]] = {p: [] for p in range(args.partitions)}
    for i in range(args.groups):
        name = f"app-{i:05d}"
        by_partition[partition_for(name, args.partitions)].append(name)
    jobs = [(str(out), p, names, max(1, args.records * len(names) // args.groups), int(args.segment_mb * 2**20),
             args.seed, args.topics) for p, names in by_partition.items() if names]
    started = time.perf_counter()
    totals = dict.fromkeys(COUNTS, 0)
    with multiprocessing.get_context("spawn").Pool(max(1, args.workers)) as pool:
        for counts in pool.imap_unordered(write_partition, jobs):
            for k, v in counts.items():
                totals[k] += v
    elapsed = time.perf_counter() - started
    size = sum(f.stat().st_size for f in out.glob(f"{OFFSETS_TOPIC}-*/*.log"))
    summary = {"partitions": args.partitions, "groups": args.groups, "seed": args.seed, **totals,
               "bytes": size, "seconds": round(elapsed, 1)}
    (out / "generated.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{totals['records']:,} records ({size / 2**20:,.0f} MiB) in {args.partitions} partitions, "
          f"{args.groups:,} groups, {elapsed:.1f}s = {totals['records'] / elapsed:,.0f} records/s "
          f"with {args.workers} workers (load {os.getloadavg()[0]:.2f})")
    print(json.dumps(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
