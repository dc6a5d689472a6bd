#!/usr/bin/env python3
"""Acknowledged offset commits survive ``kill -9`` of the broker at random moments.

Loop (bounded by ``--cycles`` and ``--seconds``; loopback only):

1. start ``odradek serve`` on a data dir (the same one every cycle);
2. several connections commit increasing offsets over the raw protocol
   (OffsetCommit v8, simple commits into their own groups, pipelined),
   recording for every (group, topic, partition) the highest offset the
   broker acknowledged with error 0 and the highest one ever sent;
3. SIGKILL (or, with ``--signal term``, SIGTERM) the broker at a random moment of that load;
4. restart it and check, with OffsetFetch v8, that every partition reads
   back an offset between its last acknowledged and its last sent one
   (a commit that was written but not yet answered may survive too).

Finally: delete some offsets (OffsetDelete, so the log holds tombstones),
remember every group's OffsetFetch answer, stop the broker, compact the
``__consumer_offsets`` logs offline with the storage cleaner, restart, and
check the answers are identical.

    python scripts/crash_commits.py [--cycles 10] [--seconds 120] [--fsync always|never]

Exit status 0 when every check passed.  ``run()`` is what the slow test calls.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import AsyncClient, SyncClient  # noqa: E402
from odradek.testing.process import SERVE, free_port, serve_args, wait_until_serving  # noqa: E402

TOPIC = "crash"
PARTITIONS = 8
LOADING = 14


@dataclass
class Ledger:
    """What the broker acknowledged, and the most it could hold, per (group, topic, partition)."""

    acked: dict[tuple[str, str, int], int] = field(default_factory=dict)
    sent: dict[tuple[str, str, int], int] = field(default_factory=dict)
    next_offset: int = 0


# --- broker process ----------------------------------------------------------------------------------------

class Broker:
    def __init__(self, data_dir: Path, port: int, fsync: str, log_file: Path, extra: list[str] | None = None):
        self.data_dir, self.port, self.fsync, self.log_file = data_dir, port, fsync, log_file
        self.extra = list(extra or ())  # more ``name=value`` settings
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        cmd = [*SERVE, *serve_args([f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                                    f"log.dirs={self.data_dir}", f"log.fsync.mode={self.fsync}",
                                    "log.format=json", "log.level=warning", *self.extra])]
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=ROOT)
        wait_until_serving(self.proc, self.port, timeout, f"broker did not start (see {self.log_file})")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def interrupt(self, how: str) -> str | None:
        """SIGKILL (``kill``) or SIGTERM (``term``: must exit 0 within a few seconds)."""
        if how == "kill":
            self.kill()
            return None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()
            return "SIGTERM: broker still running after 10 s"
        if code != 0:
            return f"SIGTERM: broker exited with {code}"
        return None if time.monotonic() - started < 10 else "SIGTERM: slow exit"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def create_topic(port: int) -> None:
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        r = c.request(19, 5, {"topics": [{"name": TOPIC, "num_partitions": PARTITIONS,
                                          "replication_factor": 1, "assignments": [], "configs": []}],
                              "timeout_ms": 30000, "validate_only": False})
    if r.topics[0].error_code not in (0, 36):  # 36: already exists
        raise RuntimeError(f"CreateTopics: error {r.topics[0].error_code}")


# --- load ---------------------------------------------------------------------------------------------------

def commit_body(group: str, offsets: dict[int, int]) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": 1,
                 "committed_metadata": f"m{o}"} for p, o in offsets.items()]}]}


async def committer(port: int, group: str, ledger: Ledger, rng: random.Random, window: int) -> None:
    """Pipelined commits until the connection dies (the broker is killed under it)."""
    client = await AsyncClient.connect("127.0.0.1", port)
    in_flight: list[dict[int, int]] = []
    try:
        while True:
            while len(in_flight) < window:
                ledger.next_offset += 1
                offsets = {p: ledger.next_offset for p in rng.sample(range(PARTITIONS), rng.randint(1, 3))}
                for p, o in offsets.items():
                    ledger.sent[(group, TOPIC, p)] = o
                client.send(8, 8, commit_body(group, offsets))
                in_flight.append(offsets)
            _, response = await client.recv(8, 8)
            offsets = in_flight.pop(0)
            for t in response.topics:
                for part in t.partitions:
                    if part.error_code == 0:
                        key = (group, TOPIC, part.partition_index)
                        ledger.acked[key] = max(ledger.acked.get(key, -1), offsets[part.partition_index])
                    else:
                        raise RuntimeError(f"commit refused with error {part.error_code}")
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        return
    finally:
        await client.close()


async def load_until_killed(broker: Broker, groups: list[str], ledger: Ledger, rng: random.Random,
                            kill_after: float, how: str = "kill") -> str | None:
    tasks = [asyncio.create_task(committer(broker.port, g, ledger, rng, window=4)) for g in groups]
    await asyncio.sleep(kill_after)
    problem = await asyncio.to_thread(broker.interrupt, how)
    await asyncio.wait(tasks, timeout=10)
    for t in tasks:
        t.cancel()
        if not t.cancelled() and t.done() and t.exception() is not None:
            raise t.exception()
    return problem


# --- checks ---------------------------------------------------------------------------------------------------

def fetch_all(port: int, groups: list[str]) -> dict[str, dict[tuple[str, int], tuple]]:
    """Every group's committed offsets (OffsetFetch v8, topics null), waiting out loading."""
    body = {"groups": [{"group_id": g, "topics": None} for g in groups], "require_stable": True}
    deadline = time.monotonic() + 30
    with SyncClient("127.0.0.1", port, timeout=10) as c:
        while True:
            r = c.request(9, 8, body)
            if all(g.error_code == 0 for g in r.groups):
                break
            if time.monotonic() > deadline or any(g.error_code not in (0, LOADING) for g in r.groups):
                raise RuntimeError(f"OffsetFetch errors: {[(g.group_id, g.error_code) for g in r.groups]}")
            time.sleep(0.05)
    return {g.group_id: {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch,
                                                        p.metadata, p.error_code)
                         for t in g.topics for p in t.partitions} for g in r.groups}


def check(answers: dict, ledger: Ledger) -> list[str]:
    problems = []
    for (group, topic, p), acked in ledger.acked.items():
        got, epoch, metadata, _ = answers[group].get((topic, p), (-1, -1, "", 0))
        sent = ledger.sent[(group, topic, p)]
        if not acked <= got <= sent:
            problems.append(f"{group} {topic}-{p}: acknowledged {acked}, sent up to {sent}, read {got}")
        elif (epoch, metadata) != (1, f"m{got}"):  # the value read is the one committed with it
            problems.append(f"{group} {topic}-{p}: offset {got} came back with {epoch}, {metadata!r}")
    return problems


def compact_offline(data_dir: Path) -> int:
    """Roll and clean every __consumer_offsets log with the storage cleaner; returns bytes before-after."""
    from odradek.storage.cleaner import first_unstable_offset
    from odradek.storage.config import LogConfig
    from odradek.storage.log import Log
    from odradek.storage.log_manager import offsets_topic_config

    saved = 0
    for d in sorted(data_dir.glob("__consumer_offsets-*")):
        log = Log.open(d, offsets_topic_config(LogConfig()))
        try:
            before = log.size_bytes
            log.roll()
            log.clean(stable_offset=first_unstable_offset(log))  # as the broker: not past open transactions
            saved += before - log.size_bytes
        finally:
            log.close()
    return saved


# --- driver -------------------------------------------------------------------------------------------------------

def run(cycles: int = 10, seconds: float = 120.0, fsync: str = "always", connections: int = 4,
        seed: int | None = None, data_dir: Path | None = None, out=print, how: str = "kill") -> list[str]:
    """Crash cycles, then the compaction check; returns the problems found (empty: all good)."""
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    own_dir = data_dir is None
    data = Path(tempfile.mkdtemp(prefix="crash-commits-")) if own_dir else data_dir
    broker = Broker(data / "data", free_port(), fsync, data / "broker.log")
    groups = [f"crash-group-{i}" for i in range(connections)]
    ledger = Ledger()
    problems: list[str] = []
    started = time.monotonic()
    try:
        broker.start()
        create_topic(broker.port)
        done = 0
        while done < cycles and time.monotonic() - started < seconds and not problems:
            kill_after = rng.uniform(0.1, 1.2)
            problem = asyncio.run(load_until_killed(broker, groups, ledger, rng, kill_after, how))
            if problem:
                problems.append(problem)
            broker.start()
            problems += check(fetch_all(broker.port, groups), ledger)
            done += 1
            out(f"cycle {done}: killed after {kill_after:.2f} s; {sum(1 for _ in ledger.acked)} partitions, "
                f"{ledger.next_offset} commits sent; {'ok' if not problems else 'LOST COMMITS'}")
        problems += compaction_check(broker, groups, out)
    finally:
        broker.stop()
        if own_dir and not problems:
            shutil.rmtree(data, ignore_errors=True)
    out(f"seed {seed}: {done} crash cycles, {len(problems)} problems" +
        ("" if not problems or not own_dir else f" (data kept in {data})"))
    return problems


def compaction_check(broker: Broker, groups: list[str], out) -> list[str]:
    with SyncClient("127.0.0.1", broker.port, timeout=10) as c:
        r = c.request(47, 0, {"group_id": groups[0], "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": p} for p in range(0, PARTITIONS, 2)]}]})
        if r.error_code != 0:
            return [f"OffsetDelete failed: {r.error_code}"]
    before = fetch_all(broker.port, groups)
    broker.stop()
    saved = compact_offline(broker.data_dir)
    broker.start()
    after = fetch_all(broker.port, groups)
    out(f"compaction: {saved} bytes reclaimed; OffsetFetch answers "
        f"{'identical' if after == before else 'DIFFER'}")
    return [] if after == before else [f"after compaction: {after} != {before}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=120.0, help="stop starting cycles after this")
    parser.add_argument("--fsync", choices=["always", "never", "interval"], default="always")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--signal", choices=["kill", "term"], default="kill",
                        help="kill -9, or SIGTERM (which must also exit 0 promptly)")
    args = parser.parse_args()
    problems = run(args.cycles, args.seconds, args.fsync, args.connections, args.seed, how=args.signal)
    for p in problems[:20]:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
