#!/usr/bin/env python3
"""Transactions across ``kill -9`` of the broker: read_committed sees exactly the committed ones.

Each cycle:

1. Start ``odradek serve`` on the same data dir (fsync mode ``always`` or ``never``;
   16 KiB segments, so rolls write producer snapshots and a restart replays
   only the batches after the newest one).
2. Every transactional id re-initialises (InitProducerId, retried while the
   coordinator loads or completes): this aborts whatever a previous cycle
   left open.  Then ``--producers`` raw-frame producers run transactions
   back to back, each writing one record to each of two random partitions
   of a 3-partition topic and ending with a COMMIT (70 %) or an ABORT.
3. SIGKILL the broker at a random moment of that load.

At the end the broker starts once more, every id re-initialises, and a
read_committed aiokafka consumer reads every partition up to its last stable
offset.  The checker (``check``) wants: every record of a transaction whose
EndTxn(commit) was answered, exactly once; nothing of one whose abort was
answered or that never sent EndTxn; all or nothing of one whose
EndTxn(commit) was in flight at the kill (both partitions agree).

    python scripts/crash_transactions.py [--cycles 5] [--fsync always|never] [--producers 4]
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
from odradek.protocol.errors import ErrorCode  # noqa: E402
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.testing.process import SERVE, free_port, serve_args, wait_until_serving  # noqa: E402

TOPIC = "crash-txn"
SEGMENT_BYTES = 16384  # small: rolls write producer snapshots, restarts replay from them
PARTITIONS = 3
RETRY = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
         ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS}


@dataclass
class Ledger:
    """Per transaction (``"<id>/<cycle>/<n>"``, also its records' value prefix): what the client knows."""

    state: dict[str, str] = field(default_factory=dict)  # open, committing, aborting, committed, aborted
    partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)


class Broker:
    def __init__(self, data_dir: Path, port: int, fsync: str, log_file: Path):
        self.data_dir, self.port, self.fsync, self.log_file = data_dir, port, fsync, log_file
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        cmd = [*SERVE, *serve_args([f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.data_dir}",
                                    f"log.fsync.mode={self.fsync}", "log.format=json", "log.level=warning",
                                    f"log.segment.bytes={SEGMENT_BYTES}"])]
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=ROOT)
        wait_until_serving(self.proc, self.port, timeout, f"broker did not start (see {self.log_file})")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def create_topic(port: int) -> None:
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        r = c.request(19, 5, {"topics": [{"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1,
                                          "assignments": [], "configs": []}], "timeout_ms": 30000,
                              "validate_only": False})
    if r.topics[0].error_code not in (0, 36):  # 36: already exists
        raise RuntimeError(f"CreateTopics: error {r.topics[0].error_code}")


async def _request(c: AsyncClient, api: int, version: int, body: dict, codes) -> object:
    """Send until no retriable error is left; returns the answer."""
    deadline = time.monotonic() + 60
    while True:
        r = await c.request(api, version, body)
        errors = set(codes(r)) - {0}
        if errors and errors <= RETRY and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            continue
        return r


def _top(r) -> list[int]:
    return [r.error_code]


def _add_codes(r) -> list[int]:
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]


def _produce_codes(r) -> list[int]:
    return [p.error_code for t in r.responses for p in t.partition_responses]


async def init(c: AsyncClient, txn_id: str) -> tuple[int, int]:
    r = await _request(c, 22, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60000,
                                  "producer_id": -1, "producer_epoch": -1}, _top)
    if r.error_code:
        raise RuntimeError(f"InitProducerId {txn_id}: error {r.error_code}")
    return r.producer_id, r.producer_epoch


async def producer(port: int, txn_id: str, cycle: int, ledger: Ledger, rng: random.Random) -> None:
    """Transactions until the connection dies under the kill."""
    c = await AsyncClient.connect("127.0.0.1", port)
    try:
        pid, epoch = await init(c, txn_id)
        ids = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch}
        seq = [0] * PARTITIONS
        n = 0
        while True:
            tag = f"{txn_id}/{cycle}/{n}"
            parts = tuple(sorted(rng.sample(range(PARTITIONS), 2)))
            ledger.partitions[tag] = parts
            ledger.state[tag] = "open"
            add = {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                   "v3_and_below_producer_epoch": epoch,
                   "v3_and_below_topics": [{"name": TOPIC, "partitions": list(parts)}]}
            r = await _request(c, 24, 3, add, _add_codes)
            if any(_add_codes(r)):
                raise RuntimeError(f"AddPartitionsToTxn {tag}: {_add_codes(r)}")
            data = []
            for p in parts:
                data.append({"index": p, "records": encode_batch(
                    [(None, tag.encode())], producer_id=pid, producer_epoch=epoch, base_sequence=seq[p],
                    transactional=True)})
                seq[p] += 1
            r = await c.request(0, 9, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 30000,
                                       "topic_data": [{"name": TOPIC, "partition_data": data}]})
            if any(_produce_codes(r)):
                raise RuntimeError(f"Produce {tag}: {_produce_codes(r)}")
            commit = rng.random() < 0.7
            ledger.state[tag] = "committing" if commit else "aborting"
            r = await _request(c, 26, 3, {**ids, "committed": commit}, _top)
            if r.error_code:
                raise RuntimeError(f"EndTxn {tag}: error {r.error_code}")
            ledger.state[tag] = "committed" if commit else "aborted"
            n += 1
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        return  # killed under us
    finally:
        await c.close()


async def load_until_killed(broker: Broker, ids: list[str], cycle: int, ledger: Ledger, rng: random.Random,
                            kill_after: float) -> list[str]:
    tasks = [asyncio.create_task(producer(broker.port, t, cycle, ledger, rng)) for t in ids]
    await asyncio.sleep(kill_after)
    broker.kill()
    problems = []
    for t in tasks:
        try:
            await asyncio.wait_for(t, 10)
        except Exception as exc:  # a producer that failed before the kill is a finding
            problems.append(f"producer failed: {exc!r}")
    return problems


async def settle(port: int, ids: list[str]) -> None:
    """Re-initialise every id (aborting what was left open), then wait until LSO = HW everywhere."""
    c = await AsyncClient.connect("127.0.0.1", port)
    try:
        for t in ids:
            await init(c, t)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ends = {}
            for isolation in (0, 1):
                r = await c.request(2, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
                    {"name": TOPIC, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                    "timestamp": -1} for p in range(PARTITIONS)]}]})
                ends[isolation] = [p.offset for p in r.topics[0].partitions]
            if ends[0] == ends[1]:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"last stable offsets stuck below the log end: {ends}")
    finally:
        await c.close()


async def read_committed(port: int) -> dict[int, list[str]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", isolation_level="read_committed",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 30
        while any([await consumer.position(tp) < ends[tp] for tp in tps]) and time.monotonic() < deadline:
            for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                got[tp.partition].extend(m.value.decode() for m in msgs)
        return got
    finally:
        await consumer.stop()


def check(seen: dict[int, list[str]], ledger: Ledger) -> list[str]:
    problems = []
    where: dict[str, list[int]] = {}
    for p, values in seen.items():
        for v in values:
            where.setdefault(v, []).append(p)
    for tag, state in ledger.state.items():
        parts = sorted(where.get(tag, []))
        expected = list(ledger.partitions[tag])
        if state == "committed" and parts != expected:
            problems.append(f"{tag}: committed, read_committed saw it in {parts} (wrote {expected})")
        elif state in ("aborted", "aborting", "open") and parts:
            problems.append(f"{tag}: {state}, yet read_committed saw it in {parts}")
        elif state == "committing" and parts not in ([], expected):
            problems.append(f"{tag}: commit in flight at the kill, seen in {parts} of {expected} (not atomic)")
    for tag in where:
        if tag not in ledger.state:
            problems.append(f"{tag}: read but never written")
    return problems


def run(cycles: int = 5, fsync: str = "always", producers: int = 4, seed: int | None = None,
        data_dir: Path | None = None, out=print) -> list[str]:
    rng = random.Random(seed)
    data = Path(data_dir or tempfile.mkdtemp(prefix="crash-txn-"))
    broker = Broker(data / "data", free_port(), fsync, data / "broker.log")
    ids = [f"crash-{i}" for i in range(producers)]
    ledger = Ledger()
    problems: list[str] = []
    broker.start()
    create_topic(broker.port)
    try:
        for cycle in range(cycles):
            if cycle:
                broker.start()
            kill_after = rng.uniform(0.2, 1.5)
            problems += asyncio.run(load_until_killed(broker, ids, cycle, ledger, rng, kill_after))
            states = list(ledger.state.values())
            out(f"cycle {cycle}: killed after {kill_after:.2f} s; {states.count('committed')} committed, "
                f"{states.count('aborted')} aborted, {len(states)} transactions so far")
        broker.start()
        asyncio.run(settle(broker.port, ids))
        problems += check(asyncio.run(read_committed(broker.port)), ledger)
    finally:
        broker.stop()
        if data_dir is None and not problems:
            shutil.rmtree(data, ignore_errors=True)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--seed", type=int)
    args = parser.parse_args()
    problems = run(args.cycles, args.fsync, args.producers, args.seed)
    for p in problems:
        print("PROBLEM:", p)
    print("ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
