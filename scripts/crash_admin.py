#!/usr/bin/env python3
"""Admin changes are all-or-nothing across ``kill -9`` of the broker at random moments.

Loop (bounded by ``--cycles`` and ``--seconds``; loopback only):

1. start ``odradek serve`` on a data dir (the same one every cycle);
2. several connections, over the raw protocol, create topics (1-6
   partitions), produce to them, grow some (CreatePartitions), delete
   records of some (DeleteRecords), commit offsets for them, delete some of
   them, and commit to throw-away groups that they then delete
   (DeleteGroups), recording what the broker acknowledged and what was
   sent but not yet answered;
3. SIGKILL the broker at a random moment of that load;
4. restart it and check that:
   - it starts, and ``topics.json`` is whole;
   - every acknowledged creation is there, with its partition count, and
     every acknowledged deletion is gone; a change cut off by the kill is
     either done or not, never half: a topic that exists has all its
     partitions (an acknowledged growth included), each answering
     ListOffsets, and no directory is left of a topic that does not exist
     (it would be adopted back);
   - an acknowledged DeleteRecords holds: the partition's earliest offset
     is at least the low watermark it answered;
   - no group holds offsets of a topic that does not exist, and no
     acknowledged group deletion came back.

    python scripts/crash_admin.py [--cycles 10] [--seconds 120] [--workers 4]

Exit status 0 when every check passed.  ``run()`` is what the tests call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import AsyncClient, SyncClient  # noqa: E402
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.testing.process import free_port  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from crash_commits import LOADING, Broker  # noqa: E402

PRODUCE, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 2, 3, 8, 9
CREATE, DELETE, DELETE_GROUPS = 19, 20, 42
DELETE_RECORDS, CREATE_PARTITIONS = 21, 37
EARLIEST = -2
ALIVE_PER_WORKER = 4  # live topics a worker keeps before it deletes one (bounds open files)


@dataclass
class Ledger:
    """What the broker acknowledged, and what was sent but not answered when it died."""

    created: dict[str, int] = field(default_factory=dict)  # name -> partitions (acknowledged)
    deleted: set[str] = field(default_factory=set)  # acknowledged deletions
    creating: dict[str, int] = field(default_factory=dict)  # sent, not answered
    deleting: set[str] = field(default_factory=set)
    groups_deleted: set[str] = field(default_factory=set)
    groups_deleting: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)  # every group that ever committed
    growing: dict[str, int] = field(default_factory=dict)  # CreatePartitions sent, not answered
    starts: dict[str, int] = field(default_factory=dict)  # partition 0's acknowledged low watermark

    def alive(self, prefix: str) -> list[str]:
        return [n for n in self.created if n.startswith(prefix) and n not in self.deleted
                and n not in self.deleting]


# --- load -------------------------------------------------------------------------------------

def create_body(name: str, partitions: int) -> dict:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}


def commit_body(group: str, topic: str, offset: int) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                 "commit_timestamp": -1, "committed_metadata": ""}]}]}


def produce_body(topic: str) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([(b"k", b"v")])}]}]}


async def worker(port: int, prefix: str, group: str, ledger: Ledger, rng: random.Random) -> None:
    """Creates, produces, commits and deletes until the connection dies (the broker is killed)."""
    c = await AsyncClient.connect("127.0.0.1", port)
    k = 0
    try:
        while True:
            k += 1
            name, partitions = f"{prefix}{k}", rng.randint(1, 6)
            ledger.creating[name] = partitions
            r = await c.request(CREATE, 5, create_body(name, partitions))
            del ledger.creating[name]
            if r.topics[0].error_code != 0:
                raise RuntimeError(f"CreateTopics {name}: error {r.topics[0].error_code}")
            ledger.created[name] = partitions
            await c.request(PRODUCE, 9, produce_body(name))
            if rng.random() < 0.4:
                await grow(c, name, ledger, rng)
            if rng.random() < 0.4:
                await delete_records(c, name, ledger, rng)
            ledger.groups.add(group)
            await c.request(OFFSET_COMMIT, 8, commit_body(group, name, 1))
            alive = ledger.alive(prefix)
            if len(alive) > ALIVE_PER_WORKER or rng.random() < 0.3:
                doomed = rng.choice(alive)
                ledger.deleting.add(doomed)
                r = await c.request(DELETE, 4, {"topic_names": [doomed], "timeout_ms": 30000})
                ledger.deleting.discard(doomed)
                if r.responses[0].error_code != 0:
                    raise RuntimeError(f"DeleteTopics {doomed}: error {r.responses[0].error_code}")
                ledger.deleted.add(doomed)
            if rng.random() < 0.3:
                throwaway = f"{group}-x{k}"  # the same names come back every cycle
                ledger.groups.add(throwaway)
                # a commit re-creates a deleted group (Kafka's semantics): an earlier cycle's
                # acknowledged deletion of this name no longer says it must stay empty
                ledger.groups_deleted.discard(throwaway)
                await c.request(OFFSET_COMMIT, 8, commit_body(throwaway, name, 1))
                ledger.groups_deleting.add(throwaway)
                r = await c.request(DELETE_GROUPS, 2, {"groups_names": [throwaway]})
                ledger.groups_deleting.discard(throwaway)
                if r.results[0].error_code == 0:
                    ledger.groups_deleted.add(throwaway)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        await c.close()


async def grow(c: AsyncClient, name: str, ledger: Ledger, rng: random.Random) -> None:
    count = ledger.created[name] + rng.randint(1, 3)
    ledger.growing[name] = count
    r = await c.request(CREATE_PARTITIONS, 3, {"topics": [{"name": name, "count": count, "assignments": None}],
                                               "timeout_ms": 30000, "validate_only": False})
    del ledger.growing[name]
    if r.results[0].error_code != 0:
        raise RuntimeError(f"CreatePartitions {name}: error {r.results[0].error_code}")
    ledger.created[name] = count


async def delete_records(c: AsyncClient, name: str, ledger: Ledger, rng: random.Random) -> None:
    """Up to the high watermark (-1: whole segments go), or to an offset inside the segment
    (only the log-start-offset checkpoint keeps that one)."""
    await c.request(PRODUCE, 9, produce_body(name))
    offset = rng.choice([-1, 1])
    r = await c.request(DELETE_RECORDS, 2, {"topics": [{"name": name, "partitions": [
        {"partition_index": 0, "offset": offset}]}], "timeout_ms": 30000})
    part = r.topics[0].partitions[0]
    if part.error_code != 0:
        raise RuntimeError(f"DeleteRecords {name}: error {part.error_code}")
    ledger.starts[name] = part.low_watermark


async def load_until_killed(broker: Broker, workers: int, cycle: int, ledger: Ledger, rng: random.Random,
                            kill_after: float) -> None:
    tasks = [asyncio.ensure_future(worker(broker.port, f"a{cycle}-{w}-", f"adm-g{w}", ledger, rng))
             for w in range(workers)]
    await asyncio.sleep(kill_after)
    broker.kill()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)


# --- checks -----------------------------------------------------------------------------------------

def observe(port: int, data_dir: Path, groups: list[str], ledger: Ledger | None = None,
            ) -> tuple[dict, dict, list[str]]:
    """(topics -> partitions, group -> topics it holds offsets of, problems seen while looking)."""
    problems: list[str] = []
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        meta = c.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
        topics = {t.name: len(t.partitions) for t in meta.topics if not t.is_internal}
        for name, n in topics.items():
            r = c.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": name, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                               "timestamp": -1} for p in range(n)]}]})
            bad = [p.partition_index for p in r.topics[0].partitions if p.error_code != 0]
            if bad:
                problems.append(f"{name}: partitions {bad} do not answer ListOffsets")
        offsets = fetch_groups(c, groups)
        if ledger is not None:
            problems += check_starts(c, topics, ledger)
    return topics, offsets, problems


def check_starts(c: SyncClient, topics: dict[str, int], ledger: Ledger) -> list[str]:
    """Acknowledged DeleteRecords survived: partition 0 starts at or past the low watermark answered."""
    problems = []
    for name, acknowledged in ledger.starts.items():
        if name not in topics:
            continue
        r = c.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                           "timestamp": EARLIEST}]}]})
        earliest = r.topics[0].partitions[0].offset
        if earliest < acknowledged:
            problems.append(f"{name}-0: records deleted up to {acknowledged} (acknowledged), "
                            f"now starts at {earliest}")
    return problems


def fetch_groups(c: SyncClient, groups: list[str]) -> dict[str, set[str]]:
    """Topics each group holds committed offsets of (OffsetFetch v8, all topics), waiting out loading."""
    body = {"groups": [{"group_id": g, "topics": None} for g in groups], "require_stable": False}
    deadline = time.monotonic() + 30
    while True:
        r = c.request(OFFSET_FETCH, 8, body)
        if all(g.error_code == 0 for g in r.groups) or not groups:
            break
        if time.monotonic() > deadline or any(g.error_code not in (0, LOADING) for g in r.groups):
            raise RuntimeError(f"OffsetFetch errors: {[(g.group_id, g.error_code) for g in r.groups]}")
        time.sleep(0.05)
    return {g.group_id: {t.name for t in g.topics if any(p.committed_offset >= 0 for p in t.partitions)}
            for g in r.groups}


def check(topics: dict[str, int], offsets: dict[str, set[str]], dirs: list[str], registry: dict,
          ledger: Ledger) -> list[str]:
    """Every rule of the module docstring, against what the restarted broker shows."""
    problems = []
    for name, n in ledger.created.items():
        if name in ledger.deleted:
            if name in topics:
                problems.append(f"{name}: deleted (acknowledged) but back after the restart")
        elif name not in ledger.deleting and topics.get(name) not in (n, ledger.growing.get(name)):
            problems.append(f"{name}: created with {n} partitions (acknowledged), now {topics.get(name)}")
    for name, n in topics.items():
        expected = ledger.created.get(name, ledger.creating.get(name))
        if expected is None:
            problems.append(f"{name}: a topic nobody created")
        elif n != expected and n != ledger.growing.get(name):
            problems.append(f"{name}: {n} partitions, created with {expected}")
    for d in dirs:
        topic, _, part = d.rpartition("-")
        if topic not in topics or int(part) >= topics[topic]:
            problems.append(f"directory {d} left of a topic that does not exist")
    registered = {t["name"] for t in registry.get("topics", [])}
    if registered != set(topics) or registry.get("deleting"):
        problems.append(f"topics.json disagrees: {sorted(registered ^ set(topics))}, "
                        f"deleting {registry.get('deleting')}")
    for group, held in offsets.items():
        if stale := sorted(held - set(topics)):
            problems.append(f"group {group} holds offsets of deleted topics {stale}")
        if group in ledger.groups_deleted and held:
            problems.append(f"group {group}: deleted (acknowledged) but its offsets came back")
    return problems


def settle(topics: dict[str, int], ledger: Ledger) -> None:
    """Changes cut off by the kill are whatever the restarted broker shows (done or not done)."""
    for name, n in ledger.creating.items():
        if name in topics:
            ledger.created[name] = n
    for name in ledger.deleting:
        if name not in topics:
            ledger.deleted.add(name)
    for name, n in ledger.growing.items():
        if topics.get(name) == n:
            ledger.created[name] = n
    ledger.growing.clear()
    ledger.creating.clear()
    ledger.deleting.clear()
    ledger.groups_deleting.clear()


def settled_registry(path: Path, timeout: float = 30.0) -> dict:
    """``topics.json`` once the start has finished the deletes the kill cut off (bounded).

    A start removes a marked topic's logs before it serves, but forgets the
    topic's committed offsets and drops the marker only once the coordinator
    has loaded (``TopicRegistry.finish_deletes``), while clients are already
    served.  Observing before that reads a marker (or offsets) the broker is
    about to clear; a marker still there after ``timeout`` is a real problem,
    which ``check`` reports.
    """
    deadline = time.monotonic() + timeout
    while True:
        registry = json.loads(path.read_text())
        if not registry.get("deleting") or time.monotonic() > deadline:
            return registry
        time.sleep(0.05)


def partition_dirs(data_dir: Path) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.is_dir() and not p.name.startswith("__")
                  and p.name.rpartition("-")[2].isdigit())


# --- driver -------------------------------------------------------------------------------------------

def run(cycles: int = 10, seconds: float = 120.0, workers: int = 4, seed: int | None = None,
        data_dir: Path | None = None, out=print) -> list[str]:
    """Crash cycles; returns the problems found (empty: all good)."""
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    own_dir = data_dir is None
    data = Path(tempfile.mkdtemp(prefix="crash-admin-")) if own_dir else data_dir
    broker = Broker(data / "data", free_port(), "never", data / "broker.log")
    ledger = Ledger()
    problems: list[str] = []
    started = time.monotonic()
    done = 0
    try:
        broker.start()
        while done < cycles and time.monotonic() - started < seconds and not problems:
            kill_after = rng.uniform(0.05, 0.8)
            asyncio.run(load_until_killed(broker, workers, done, ledger, rng, kill_after))
            try:
                broker.start()
            except RuntimeError as exc:
                problems.append(f"after kill {done + 1}: {exc}")
                break
            registry = settled_registry(broker.data_dir / "topics.json")
            topics, offsets, seen = observe(broker.port, broker.data_dir, sorted(ledger.groups), ledger)
            problems += seen + check(topics, offsets, partition_dirs(broker.data_dir), registry, ledger)
            settle(topics, ledger)
            done += 1
            out(f"cycle {done}: killed after {kill_after:.2f} s; {len(ledger.created)} topics created, "
                f"{len(ledger.deleted)} deleted, {len(ledger.groups_deleted)} groups deleted; "
                f"{'ok' if not problems else 'PROBLEMS'}")
    finally:
        broker.stop()
        if own_dir and not problems:
            shutil.rmtree(data, ignore_errors=True)
    out(f"seed {seed}: {done} crash cycles, {len(problems)} problems" +
        ("" if not problems or not own_dir else f" (data kept in {data})"))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=120.0, help="stop starting cycles after this")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int)
    args = parser.parse_args()
    problems = run(args.cycles, args.seconds, args.workers, args.seed)
    for p in problems[:20]:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
