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
- about 1 group in 4 uses KIP-848's consumer protocol (``group.protocol=consumer``,
  the default of Kafka 4's clients is still classic): instead of a group
  record per generation it writes what the new coordinator writes
  (``offsets.consumer_records``): a member's metadata when it joins and its
  tombstones when it leaves, the group epoch (and the subscribed topics'
  metadata the first time), each member's target assignment and the target
  epoch, each member's current assignment; retiring deletes all of them;
- one share group (KIP-932, ``offsets.share_group_records``) per 20 groups:
  membership records only (members joining and leaving, the group epoch,
  target and current assignments, the initialized share-partitions), no
  commits, as share groups keep their state in ``__share_group_state``;
- about 1 group in 8 is an exactly-once app: its offsets go in
  TxnOffsetCommit batches (a producer id per app) followed by a COMMIT
  marker, about 1 in 25 an ABORT, and the last one may be left pending.

With ``--kafka-captures``, the records a real Kafka wrote that the tests keep
(``tests/kafka_captures.py``: konsumer_offsets' offset commits and group
metadata read from a cluster's ``__consumer_offsets``, and Burrow's group
and offset values of versions 0-3) come first in their groups' partitions,
byte for byte as Kafka wrote them, one batch each: the log mixes Kafka's own
writing with ours.

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
import uuid
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.offsets import consumer_records as cg  # noqa: E402
from odradek.offsets import share_group_records as sg  # noqa: E402
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
    decode_key,
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
          "txn_committed", "txn_aborted", "txn_pending", "batches", "cg_records", "cg_tombstones", "sg_records",
          "sg_tombstones", "kafka_captured")
KIP848_SHARE = 1 / 4  # of the groups: consumer protocol (KIP-848)
SHARE_GROUPS_PER_GROUP = 1 / 20  # share groups (KIP-932) beside the consumer groups


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
    kip848: bool = False  # consumer protocol: KIP-848 records instead of GroupMetadata
    share: bool = False  # a share group: membership records only
    live_members: int = 0  # KIP-848/932 members with records in the log


def _group(name: str, seed: int, n_topics: int, producer_id: int, horizon: int) -> GroupSim:
    """A group's simulation; ``horizon``: about how many ticks it will live (scales rebalances, retirement)."""
    rng = random.Random(f"{seed}:{name}")
    topics = rng.sample(range(n_topics), rng.randint(1, 3))
    parts = [(f"topic-{t:03d}", p) for t in topics for p in range(1 + (t * 7) % 12)]
    eos = rng.random() < 1 / 8
    retire = rng.random() < 0.05
    share = name.startswith("share-")
    kip848 = not share and rng.random() < KIP848_SHARE
    return GroupSim(name, rng, parts, rng.randint(1, 5), producer_id if eos and not share else None, horizon=horizon,
                    next_rebalance=rng.randint(2, max(3, horizon // 3)),
                    retire_at=rng.randint(horizon // 4, max(horizon // 4, horizon * 9 // 10)) if retire else None,
                    kip848=kip848, share=share)


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


def topic_id(topic: str) -> uuid.UUID:
    """A data topic's id, the same in every run and worker."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"odradek-gen:{topic}")


def _assignments(g: GroupSim) -> list[dict[uuid.UUID, frozenset[int]]]:
    """Each live member's partitions (round-robin), by topic id."""
    out: list[dict[uuid.UUID, set[int]]] = [{} for _ in range(g.members)]
    for i, (t, p) in enumerate(g.partitions):
        out[i % g.members].setdefault(topic_id(t), set()).add(p)
    return [{t: frozenset(ps) for t, ps in a.items()} for a in out]


def _modern_tombstones(g: GroupSim, members: range) -> list[tuple[bytes, None]]:
    """What a member leaving writes (``GroupCoordinatorRecordHelpers``): its current assignment's,
    target assignment's and metadata's tombstones."""
    mod = sg if g.share else cg
    enc = mod.encode_sg_key if g.share else mod.encode_cg_key
    keys = ((sg.SGAssignmentKey, sg.SGTargetMemberKey, sg.SGMemberKey) if g.share
            else (cg.CGAssignmentKey, cg.CGTargetMemberKey, cg.CGMemberKey))
    return [(enc(k(g.name, f"{g.name}-c{m}")), None) for m in members for k in keys]


def _modern_rebalance(w: PartitionWriter, g: GroupSim, ts: int) -> None:
    """A KIP-848 consumer group's or KIP-932 share group's records for a new group epoch: members left
    and joined, the epoch, the target assignment, each member's current assignment."""
    epoch = g.generation
    items: list[tuple[bytes, bytes | None]] = _modern_tombstones(g, range(g.members, g.live_members))
    topics = sorted({t for t, _ in g.partitions})
    if g.share:
        key, value = sg.encode_sg_key, sg.encode_sg_value
        for m in range(g.live_members, g.members):
            k = sg.SGMemberKey(g.name, f"{g.name}-c{m}")
            items.append((key(k), value(k, sg.SGMemberValue(client_id=f"client-{m}", client_host="/10.1.0.9",
                                                            subscribed_topic_names=tuple(topics)))))
        records = [(sg.SGMetadataKey(g.name), sg.SGMetadataValue(epoch, zlib.crc32(','.join(topics).encode())))]
        if epoch == 1:
            records.append((sg.SGStatePartitionKey(g.name), sg.SGStatePartitionValue(initialized={
                topic_id(t): sg.TopicPartitionsInfo(t, frozenset(p for tt, p in g.partitions if tt == t))
                for t in topics})))
        target = [(sg.SGTargetMemberKey(g.name, f"{g.name}-c{m}"), sg.SGTargetMemberValue(a))
                  for m, a in enumerate(_assignments(g))]
        records += [*target, (sg.SGTargetMetadataKey(g.name), sg.SGTargetMetadataValue(epoch))]
        records += [(sg.SGAssignmentKey(g.name, f"{g.name}-c{m}"), sg.SGAssignmentValue(
            member_epoch=epoch, previous_member_epoch=epoch - 1, state=0, assigned=a))
            for m, a in enumerate(_assignments(g))]
    else:
        key, value = cg.encode_cg_key, cg.encode_cg_value
        for m in range(g.live_members, g.members):
            k = cg.CGMemberKey(g.name, f"{g.name}-c{m}")
            items.append((key(k), value(k, cg.CGMemberValue(
                client_id=f"client-{m}", client_host="/10.1.0.7", subscribed_topic_names=tuple(topics),
                subscribed_topic_regex=None, rebalance_timeout_ms=300000, server_assignor="uniform"))))
        records = [(cg.CGMetadataKey(g.name), cg.CGMetadataValue(epoch))]
        if epoch == 1:
            records.append((cg.CGPartitionMetadataKey(g.name), cg.CGPartitionMetadataValue({
                t: cg.TopicMetadata(topic_id(t), t, sum(1 for tt, _ in g.partitions if tt == t)) for t in topics})))
        target = [(cg.CGTargetMemberKey(g.name, f"{g.name}-c{m}"), cg.CGTargetMemberValue(a))
                  for m, a in enumerate(_assignments(g))]
        records += [*target, (cg.CGTargetMetadataKey(g.name), cg.CGTargetMetadataValue(epoch))]
        records += [(cg.CGAssignmentKey(g.name, f"{g.name}-c{m}"), cg.CGAssignmentValue(
            member_epoch=epoch, previous_member_epoch=epoch - 1, state=0, assigned=a, pending_revocation={}))
            for m, a in enumerate(_assignments(g))]
    items += [(key(k), value(k, v)) for k, v in records]
    g.live_members = g.members
    w.append(items, ts)
    kind = "sg" if g.share else "cg"
    tombs = sum(1 for _k, v in items if v is None)
    w.counts[f"{kind}_records"] += len(items) - tombs
    w.counts[f"{kind}_tombstones"] += tombs


def _modern_delete(w: PartitionWriter, g: GroupSim, ts: int) -> None:
    """A KIP-848/932 group deleted: every member's tombstones, then the group's records'."""
    items = _modern_tombstones(g, range(g.live_members))
    if g.share:
        keys = [sg.SGTargetMetadataKey(g.name), sg.SGStatePartitionKey(g.name), sg.SGMetadataKey(g.name)]
        items += [(sg.encode_sg_key(k), None) for k in keys]
    else:
        keys = [cg.CGTargetMetadataKey(g.name), cg.CGPartitionMetadataKey(g.name), cg.CGMetadataKey(g.name)]
        items += [(cg.encode_cg_key(k), None) for k in keys]
    w.append(items, ts)
    w.counts["sg_tombstones" if g.share else "cg_tombstones"] += len(items)
    g.live_members = 0


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
    if g.share or g.kip848:  # members leave (the group goes Empty), then it is deleted
        w.append(_modern_tombstones(g, range(g.live_members)), ts)
        w.counts["sg_tombstones" if g.share else "cg_tombstones"] += 3 * g.live_members
        g.live_members = 0
    else:
        _group_record(w, g, ts, empty=True)
    if not g.share:
        w.append([(g.keys.get(tp) or encode_key(OffsetKey(g.name, *tp)), None) for tp in g.partitions], ts + 1)
        w.counts["tombstones"] += len(g.partitions)
    if g.share or g.kip848:
        _modern_delete(w, g, ts + 2)
    else:
        w.append([(encode_key(GroupKey(g.name)), None)], ts + 2)
        w.counts["group_tombstones"] += 1
    g.offsets.clear()
    g.generation = 0
    g.retire_at = None  # the name comes back as a new group on its next tick


# konsumer_offsets' captures in the order their timestamps put them: group states, then commits
KONSUMER_ORDER = (("group_metadata", "03"), ("group_metadata", "02"), ("group_metadata", "04"),
                  ("group_metadata", "01"), ("group_metadata", "05"), ("offset_commit", "03"),
                  ("offset_commit", "05"), ("offset_commit", "01"), ("offset_commit", "02"), ("offset_commit", "04"))


def kafka_captured(partitions: int) -> dict[int, list[tuple[bytes, bytes]]]:
    """Kafka-written (key, value) records by the offsets partition of their group, in log order.

    Burrow's two values it keeps with quirks (a v3 body without its version,
    a v4 without its tagged fields) are left out: Kafka never wrote those.
    """
    from tests.kafka_captures import BURROW, KONSUMER

    records = [KONSUMER[k] for k in KONSUMER_ORDER]
    records += [(BURROW["group_key_v2.hex"], BURROW[f"group_value_v{v}.hex"]) for v in (1, 2, 3)]
    records.append((BURROW["offset_key_v1.hex"], BURROW["offset_value_v0.hex"]))
    out: dict[int, list[tuple[bytes, bytes]]] = {}
    for key, value in records:
        out.setdefault(partition_for(decode_key(key).group, partitions), []).append((key, value))
    return out


def write_partition(args: tuple[str, int, list[str], int, int, int, int, list[tuple[bytes, bytes]]]
                    ) -> dict[str, int]:
    """Generate one offsets partition until it holds ``budget`` records (after ``captured``, if any)."""
    out, partition, names, budget, segment_bytes, seed, n_topics, captured = args
    w = PartitionWriter(Path(out), partition, segment_bytes)
    for i, (key, value) in enumerate(captured):  # before the generated records, one batch each
        w.append([(key, value)], T0 - len(captured) + i)
        w.counts["kafka_captured"] += 1
    horizon = max(10, budget // (len(names) * 12))  # ~12 partitions a group, one record each a tick
    groups = [_group(n, seed, n_topics, 1000 + partition * 100_000 + i, horizon) for i, n in enumerate(names)]
    tick = 0
    try:
        # a partition holding only share groups (no commits) stops after about the others' lifetime
        while groups and w.counts["records"] < budget and tick < 4 * horizon + 10:
            ts = T0 + tick * TICK_MS
            last = w.counts["records"] + len(groups) * 8 >= budget
            for i, g in enumerate(groups):
                t = ts + i  # groups commit in turn within a tick
                if g.generation == 0 or tick >= g.next_rebalance:
                    g.generation += 1
                    modern = g.share or g.kip848
                    if g.generation > 1 and g.rng.random() < 0.2 and not modern:
                        _group_record(w, g, t, empty=True)  # everyone left before the new generation
                        g.generation += 1
                    g.members = max(1, g.members + g.rng.choice((-1, 0, 1)))
                    g.next_rebalance = tick + g.rng.randint(max(2, g.horizon // 12), max(3, g.horizon // 3))
                    if modern:
                        _modern_rebalance(w, g, t)
                    else:
                        _group_record(w, g, t)
                if g.retire_at is not None and tick >= g.retire_at:
                    _retire(w, g, t)
                    continue
                if not g.share:
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
    ap.add_argument("--kafka-captures", action="store_true",
                    help="put the Kafka-written records of tests/kafka_captures.py first in their partitions")
    args = ap.parse_args()

    out = Path(args.out)
    if any(out.glob(f"{OFFSETS_TOPIC}-*")):
        raise SystemExit(f"{out} already holds {OFFSETS_TOPIC}; give an empty or new directory")
    out.mkdir(parents=True, exist_ok=True)
    by_partition: dict[int, list[str]] = {p: [] for p in range(args.partitions)}
    names = [f"app-{i:05d}" for i in range(args.groups)]
    names += [f"share-{i:05d}" for i in range(round(args.groups * SHARE_GROUPS_PER_GROUP))]
    for name in names:
        by_partition[partition_for(name, args.partitions)].append(name)
    captured = kafka_captured(args.partitions) if args.kafka_captures else {}
    jobs = [(str(out), p, names, max(1, args.records * sum(not n.startswith("share-") for n in names) // args.groups), int(args.segment_mb * 2**20),
             args.seed, args.topics, captured.get(p, [])) for p, names in by_partition.items() if names or p in captured]
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
