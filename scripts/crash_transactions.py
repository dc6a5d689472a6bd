#!/usr/bin/env python3
"""Transactions survive ``kill -9`` of the broker: after a restart each one commits or aborts as Kafka's would.

Loop (bounded by ``--cycles`` and ``--seconds``; loopback only):

1. start ``odradek serve`` on a data dir (the same one every cycle), with a
   short transaction timeout and abort sweep so a transaction left open by
   the crash is aborted within seconds;
2. several transactional producers (raw frames, one transactional id, group
   and input partition each) run consume-transform-produce transactions back
   to back: AddPartitionsToTxn, a transactional Produce to one or two output
   partitions, AddOffsetsToTxn, TxnOffsetCommit (the input offset = the
   transaction's number), then EndTxn -- commit three times in four, else
   abort.  The ledger records what each transaction reached: open, EndTxn sent
   (commit or abort), or EndTxn answered;
3. SIGKILL the broker at a random moment of that load (transactions are then
   ongoing, being prepared, or completing); every other cycle the kill comes
   the moment an EndTxn is answered: PrepareCommit / PrepareAbort is durable
   then, while the markers and the Complete record may still be on their way;
4. restart it and, without any client help, wait until no transaction is
   open any more (PrepareCommit/PrepareAbort are completed at load, Ongoing
   ones time out and are aborted), then check:
   - a read_committed consumer (confluent-kafka) sees every record of every
     acknowledged commit exactly once, nothing of an aborted or never-ended
     transaction, and all or nothing of one whose EndTxn(commit) was sent
     but not answered;
   - each group's committed offset (OffsetFetch with require_stable) is the
     number of its producer's last committed transaction;
5. every producer re-initialises its transactional id (a new epoch) and the
   next cycle starts.

``--transaction-version 2`` runs the producers as Kafka 4's does under
transactions v2 (KIP-890), on a broker finalizing transaction.version 2:
InitProducerId v5, no AddPartitionsToTxn or AddOffsetsToTxn (Produce v12 and
TxnOffsetCommit v5 add the partitions), EndTxn v5 whose answer gives the
bumped epoch the next transaction uses (sequences restart at 0).  With 1 the
broker finalizes transaction.version 1 and the producers use the classic
protocol (the versions a Kafka 4 producer caps itself to then).

    python scripts/crash_transactions.py [--cycles 8] [--seconds 120] [--fsync always|never]
                                         [--transaction-version 1|2]

Exit status 0 when every check passed.  ``run()`` is what the tests call.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import signal
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
from crash_commits import Broker  # noqa: E402

OUT, IN = "txn-out", "txn-in"
OUT_PARTITIONS = 3
TXN_TIMEOUT_MS = 2000
SWEEP_MS = 200
RETRIABLE = {14, 15, 16, 51}  # loading, not available, not coordinator, concurrent transactions
FIND, INIT, ADD_PARTS, ADD_OFFSETS, END, TXN_COMMIT, PRODUCE = 10, 22, 24, 25, 26, 28, 0
OPEN, ENDING_COMMIT, ENDING_ABORT, COMMITTED, ABORTED = "open", "ending-commit", "ending-abort", "committed", "aborted"


@dataclass
class Ledger:
    """Per transactional id: each transaction's number, how far it got, and its records."""

    state: dict[tuple[str, int], str] = field(default_factory=dict)
    records: dict[tuple[str, int], int] = field(default_factory=dict)
    next_seq: dict[str, int] = field(default_factory=dict)

    def begin(self, tid: str) -> int:
        seq = self.next_seq.get(tid, 0) + 1
        self.next_seq[tid] = seq
        self.state[(tid, seq)] = OPEN
        return seq

    def in_flight(self) -> list[tuple[str, int]]:
        """Transactions not yet ended for the client (what the kill interrupted)."""
        return [k for k, s in self.state.items() if s in (OPEN, ENDING_COMMIT, ENDING_ABORT)]



class KillSwitch:
    """Kills the broker from inside a producer, the moment its EndTxn is answered, once armed."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self.armed = False
        self.fired = asyncio.Event()
        self.at: tuple[str, int] | None = None  # the transaction whose answered EndTxn fired it

    def ended(self, key: tuple[str, int]) -> None:
        if self.armed and not self.fired.is_set():
            self.broker.proc.send_signal(signal.SIGKILL)  # no await: nothing else runs first
            self.at = key
            self.fired.set()


class Refused(Exception):
    """The broker answered a transactional step with an error the driver did not expect."""


# --- a transactional producer over raw frames ------------------------------------------------------------

class Producer:
    def __init__(self, index: int, ledger: Ledger, rng: random.Random, tv2: bool = False):
        self.tid, self.group, self.index = f"crash-txn-{index}", f"crash-txn-group-{index}", index
        self.ledger, self.rng, self.tv2 = ledger, rng, tv2
        self.pid, self.epoch = -1, -1
        self.sequences: dict[int, int] = {}
        self.switch: KillSwitch | None = None

    async def init(self, client: AsyncClient, deadline: float) -> None:
        """InitProducerId until granted (51 while the previous transaction completes or is fenced)."""
        while True:
            r = await client.request(INIT, 5 if self.tv2 else 4, {
                "transactional_id": self.tid, "transaction_timeout_ms": TXN_TIMEOUT_MS,
                                               "producer_id": -1, "producer_epoch": -1})
            if r.error_code == 0:
                self.pid, self.epoch, self.sequences = r.producer_id, r.producer_epoch, {}
                return
            if r.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise Refused(f"{self.tid}: InitProducerId error {r.error_code}")
            await asyncio.sleep(0.02)

    async def transactions(self, client: AsyncClient) -> None:
        """Back-to-back transactions until the connection dies."""
        while True:
            await self.one(client)

    async def one(self, client: AsyncClient) -> None:
        ledger, tid = self.ledger, self.tid
        seq = ledger.begin(tid)
        partitions = sorted(self.rng.sample(range(OUT_PARTITIONS), self.rng.randint(1, 2)))
        if not self.tv2:  # under transactions v2 the Produce adds them
            await self._expect(client, ADD_PARTS, 3, {
                "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": self.pid,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": OUT, "partitions": partitions}]},
                lambda r: [p.partition_error_code for t in r.results_by_topic_v3_and_below
                           for p in t.results_by_partition])
        counts = {p: self.rng.randint(1, 3) for p in partitions}
        ledger.records[(tid, seq)] = sum(counts.values())
        data = []
        for p, n in counts.items():
            batch = encode_batch([(f"{seq}".encode(), f"{tid}:{seq}:{p}:{j}".encode()) for j in range(n)],
                                 producer_id=self.pid, producer_epoch=self.epoch,
                                 base_sequence=self.sequences.get(p, 0), transactional=True)
            self.sequences[p] = self.sequences.get(p, 0) + n
            data.append({"index": p, "records": batch})
        await self._expect(client, PRODUCE, 12 if self.tv2 else 9, {
            "transactional_id": tid, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": OUT, "partition_data": data}]},
            lambda r: [p.error_code for t in r.responses for p in t.partition_responses])
        if not self.tv2:  # under transactions v2 TxnOffsetCommit v5 adds the offsets partition
            await self._expect(client, ADD_OFFSETS, 3, {"transactional_id": tid, "producer_id": self.pid,
                                                       "producer_epoch": self.epoch, "group_id": self.group},
                               lambda r: [r.error_code])
        await self._expect(client, TXN_COMMIT, 5 if self.tv2 else 3, {
            "transactional_id": tid, "group_id": self.group, "producer_id": self.pid,
            "producer_epoch": self.epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": IN, "partitions": [{"partition_index": self.index, "committed_offset": seq,
                                                    "committed_leader_epoch": -1,
                                                    "committed_metadata": f"{tid}:{seq}"}]}]},
            lambda r: [p.error_code for t in r.topics for p in t.partitions])
        commit = self.rng.random() < 0.75
        ledger.state[(tid, seq)] = ENDING_COMMIT if commit else ENDING_ABORT
        answer = await self._expect(client, END, 5 if self.tv2 else 3, {
            "transactional_id": tid, "producer_id": self.pid, "producer_epoch": self.epoch, "committed": commit},
            lambda r: [r.error_code])
        if self.tv2:  # the epoch bumped at every end: the next transaction's, sequences from 0
            self.pid, self.epoch, self.sequences = answer.producer_id, answer.producer_epoch, {}
        ledger.state[(tid, seq)] = COMMITTED if commit else ABORTED
        if self.switch is not None:
            self.switch.ended((tid, seq))

    async def _expect(self, client: AsyncClient, api: int, version: int, body: dict, errors):
        for _ in range(200):  # 51: the previous transaction's markers are still being written
            answer = await client.request(api, version, body)
            codes = errors(answer)
            if all(c == 0 for c in codes):
                return answer
            if not set(codes) <= {51}:
                raise Refused(f"{self.tid}: api {api} errors {codes}")
            await asyncio.sleep(0.01)
        raise Refused(f"{self.tid}: api {api} still 51")


async def run_until_killed(broker: Broker, producers: list[Producer], kill_after: float,
                           at_end: bool) -> tuple[str, int] | None:
    """Load, then SIGKILL; the transaction whose answered EndTxn triggered the kill, if one did."""
    async def work(p: Producer) -> None:
        client = await AsyncClient.connect("127.0.0.1", broker.port)
        try:
            await p.transactions(client)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        finally:
            await client.close()

    switch = KillSwitch(broker)
    for p in producers:
        p.switch = switch
    tasks = [asyncio.create_task(work(p)) for p in producers]
    done, _ = await asyncio.wait(tasks, timeout=kill_after)
    for t in done:  # a producer stopped before the kill: a refused step
        t.result()
    if at_end:
        switch.armed = True
        try:
            await asyncio.wait_for(switch.fired.wait(), 5)
        except TimeoutError:
            pass
    await asyncio.to_thread(broker.kill)
    await asyncio.wait(tasks, timeout=10)
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()
        t.cancel()
    return switch.at


async def reinit(port: int, producers: list[Producer]) -> None:
    client = await AsyncClient.connect("127.0.0.1", port)
    try:
        for p in producers:
            await p.init(client, time.monotonic() + 30)
    finally:
        await client.close()


# --- set-up and checks --------------------------------------------------------------------------------------

def create_topics(port: int, producers: int) -> None:
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        for name, n in ((OUT, OUT_PARTITIONS), (IN, producers)):
            r = c.request(19, 5, {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1,
                                              "assignments": [], "configs": []}],
                                  "timeout_ms": 30000, "validate_only": False})
            if r.topics[0].error_code not in (0, 36):
                raise RuntimeError(f"CreateTopics {name}: error {r.topics[0].error_code}")


def wait_settled(port: int, producers: list[Producer], timeout: float) -> list[str]:
    """Until no transaction is open: DescribeTransactions says so and the LSO reached the log end."""
    deadline = time.monotonic() + timeout
    tids = [p.tid for p in producers]
    with SyncClient("127.0.0.1", port, timeout=10) as c:
        while True:
            r = c.request(65, 0, {"transactional_ids": tids})
            states = {s.transactional_id: (s.error_code, s.transaction_state) for s in r.transaction_states}
            busy = {t: s for t, s in states.items()
                    if s[0] != 0 or s[1] not in ("Empty", "CompleteCommit", "CompleteAbort")}
            if not busy:
                ends = [list_offsets(c, isolation) for isolation in (0, 1)]
                if ends[0] == ends[1]:
                    return []
                busy = {"LSO": ends}
            if time.monotonic() > deadline:
                return [f"transactions still open {timeout:.0f} s after the restart: {busy}"]
            time.sleep(0.1)


def list_offsets(c: SyncClient, isolation: int) -> list[int]:
    r = c.request(2, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": OUT, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                     for p in range(OUT_PARTITIONS)]}]})
    return [p.offset for t in r.topics for p in t.partitions]


def read_committed(bootstrap: str, timeout: float = 30.0) -> dict[tuple[str, int], int]:
    """Every record a read_committed consumer sees, counted per (transactional id, transaction)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    with SyncClient(*bootstrap.rsplit(":", 1)[:1], int(bootstrap.rsplit(":", 1)[1]), timeout=10) as c:
        ends = list_offsets(c, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-txn-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    seen: dict[tuple[str, int], int] = {}
    try:
        consumer.assign([TopicPartition(OUT, p, OFFSET_BEGINNING) for p in range(OUT_PARTITIONS)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                tid, seq, _p, _j = msg.value().decode().split(":")
                key = (tid, int(seq))
                seen[key] = seen.get(key, 0) + 1
            positions = consumer.position([TopicPartition(OUT, p) for p in range(OUT_PARTITIONS)])
            # an empty partition has no position to reach (librdkafka leaves it invalid, -1001)
            if all(end == 0 or tp.offset >= end for tp, end in zip(positions, ends, strict=True)):
                break
        else:
            raise RuntimeError(f"read_committed consumer did not reach {ends}")
    finally:
        consumer.close()
    return seen


def fetch_offsets(port: int, producers: list[Producer]) -> dict[str, tuple[int, str]]:
    """Each group's committed offset of its input partition (OffsetFetch v8, require_stable)."""
    body = {"groups": [{"group_id": p.group, "topics": [{"name": IN, "partition_indexes": [p.index]}]}
                       for p in producers], "require_stable": True}
    deadline = time.monotonic() + 30
    with SyncClient("127.0.0.1", port, timeout=10) as c:
        while True:
            r = c.request(9, 8, body)
            codes = [g.error_code for g in r.groups] + [p.error_code for g in r.groups for t in g.topics
                                                         for p in t.partitions]
            if all(code == 0 for code in codes):
                return {g.group_id: (g.topics[0].partitions[0].committed_offset, g.topics[0].partitions[0].metadata)
                        for g in r.groups}
            if time.monotonic() > deadline or not set(codes) <= {0, 14, 88}:
                raise RuntimeError(f"OffsetFetch errors {codes}")
            time.sleep(0.05)


def prepared_completed(log_file: Path, start: int) -> int:
    """How many PrepareCommit/PrepareAbort transactions the coordinator resumed at load (its log says)."""
    with open(log_file, "rb") as f:
        f.seek(start)
        return f.read().count(b"resume_completion")


def check(ledger: Ledger, seen: dict[tuple[str, int], int], offsets: dict[str, tuple[int, str]],
          producers: list[Producer]) -> list[str]:
    problems = []
    for key, state in ledger.state.items():
        got, want = seen.get(key, 0), ledger.records.get(key, 0)
        if state == COMMITTED and got != want:
            problems.append(f"{key}: acknowledged commit, {got} of {want} records visible")
        elif state in (OPEN, ENDING_ABORT, ABORTED) and got:
            problems.append(f"{key}: {state} transaction, {got} records visible to read_committed")
        elif state == ENDING_COMMIT and got not in (0, want):
            problems.append(f"{key}: commit in doubt, {got} of {want} records visible (all or nothing)")
    for key in seen.keys() - ledger.state.keys():
        problems.append(f"{key}: records of a transaction never sent")
    for p in producers:
        committed = [seq for (tid, seq), n in seen.items() if tid == p.tid and n]
        want = (max(committed), f"{p.tid}:{max(committed)}") if committed else (-1, "")
        if offsets[p.group] != want:
            problems.append(f"{p.group}: committed offset {offsets[p.group]}, the last visible commit says {want}")
    return problems


def compaction_check(broker: Broker, producers: list[Producer], out) -> list[str]:
    """Compacting ``__consumer_offsets`` (aborted transactional commits included) keeps every answer."""
    from crash_commits import compact_offline

    before = fetch_offsets(broker.port, producers)
    broker.stop()
    saved = compact_offline(broker.data_dir)
    broker.start()
    after = fetch_offsets(broker.port, producers)
    out(f"compaction: {saved} bytes reclaimed; committed offsets {'identical' if after == before else 'DIFFER'}")
    return [] if after == before else [f"after compaction: {after} != {before}"]


# --- driver ----------------------------------------------------------------------------------------------------

def run(cycles: int = 8, seconds: float = 120.0, fsync: str = "always", producers: int = 3,
        seed: int | None = None, data_dir: Path | None = None, out=print, transaction_version: int = 1) -> list[str]:
    """Crash cycles; returns the problems found (empty: all good)."""
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    own_dir = data_dir is None
    data = Path(tempfile.mkdtemp(prefix="crash-txn-")) if own_dir else data_dir
    broker = Broker(data / "data", free_port(), fsync, data / "broker.log",
                    extra=[f"transaction.abort.timed.out.transaction.cleanup.interval.ms={SWEEP_MS}",
                           f"odradek.initial.features=transaction.version={transaction_version}",
                           "log.level=info"])  # to count the prepared transactions completed at load
    ledger = Ledger()
    workers = [Producer(i, ledger, rng, transaction_version >= 2) for i in range(producers)]
    problems: list[str] = []
    reported: set[tuple[str, int]] = set()
    started = time.monotonic()
    done = 0
    try:
        broker.start()
        create_topics(broker.port, producers)
        asyncio.run(reinit(broker.port, workers))
        while done < cycles and time.monotonic() - started < seconds and not problems:
            kill_after = rng.uniform(0.2, 1.5)
            at_end = done % 2 == 1
            ended = asyncio.run(run_until_killed(broker, workers, kill_after, at_end))
            interrupted = [k for k in ledger.in_flight() if k not in reported]
            reported.update(interrupted)
            log_from = broker.log_file.stat().st_size
            broker.start()
            problems += wait_settled(broker.port, workers, TXN_TIMEOUT_MS / 1000 + 15)
            seen: dict[tuple[str, int], int] = {}
            if not problems:
                seen = read_committed(f"127.0.0.1:{broker.port}")
                problems += check(ledger, seen, fetch_offsets(broker.port, workers), workers)
            done += 1
            outcome = ", ".join(f"{ledger.state[k]} -> {'committed' if seen.get(k) else 'aborted'}"
                                for k in interrupted)
            how = (f"as EndTxn({ledger.state[ended]}) of {ended} was answered" if ended
                   else f"after {kill_after:.2f} s")
            resumed = prepared_completed(broker.log_file, log_from)
            out(f"cycle {done}: killed {how}; "
                f"{sum(1 for s in ledger.state.values() if s == COMMITTED)} commits acknowledged so far; "
                f"interrupted: {outcome or 'none'}; prepared transactions completed after the restart: "
                f"{resumed}; {'ok' if not problems else 'PROBLEMS'}")
            if not problems:
                asyncio.run(reinit(broker.port, workers))
        if not problems:
            problems += compaction_check(broker, workers, out)
    finally:
        broker.stop()
        if own_dir and not problems:
            shutil.rmtree(data, ignore_errors=True)
    out(f"seed {seed}: {done} crash cycles, {len(problems)} problems" +
        ("" if not problems or not own_dir else f" (data kept in {data})"))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=120.0, help="stop starting cycles after this")
    parser.add_argument("--fsync", choices=["always", "never", "interval"], default="always")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--transaction-version", type=int, choices=[1, 2], default=1)
    args = parser.parse_args()
    problems = run(args.cycles, args.seconds, args.fsync, args.producers, args.seed,
                   transaction_version=args.transaction_version)
    for p in problems[:20]:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
