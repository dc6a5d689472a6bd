#!/usr/bin/env python3
"""Consumer-group rebalance latency and heartbeat throughput against ``odradek serve``.

The broker runs in its own process (its CPU is its own on this 2-core
machine); the client is one asyncio process.  Printed figures are medians of
``--runs`` runs:

1. Rebalance of N = 10, 100, 1000 raw-protocol members (JoinGroup v5,
   SyncGroup v3 via ``wire_client.AsyncClient``, pipelined over up to 32
   connections): a Stable group of N; the leader rejoins first (which starts
   the rebalance), then every follower; the clock starts when the last
   JoinGroup has been written and stops when every member has its SyncGroup
   answer (the leader's assignment durable in the offsets log first).
2. Heartbeat v3 throughput with 1000 members in a Stable group: 16
   connections each keeping ``--window`` pre-encoded heartbeats in flight,
   responses counted without decoding.  Beside it, the same load against a
   broker whose Heartbeat handler answers 0 without asking the coordinator
   (this script's ``--child canned`` launcher; framing, codec, metrics and
   socket writes unchanged), so the ratio is what the coordinator costs.

3. Formation: three aiokafka consumers of one topic (6 partitions) started
   together in a new group against a default broker; the time from starting them to
   every one of them holding its assignment, over ``--formations`` runs (50),
   with the broker's default ``group.initial.rebalance.delay.ms`` unless
   ``--initial-delay-ms`` names one:
   median, p90, max, and how many runs exceeded 500 ms (a second round a
   member learns of only at its next heartbeat, 3 s).

4. The consumer protocol (KIP-848, ConsumerGroupHeartbeat v1) side by side with the classic one,
   against one broker: (a) reconciliation -- N = 100 raw members join a new group on a topic of
   200 partitions (pipelined over 32 connections; every join bumps the epoch and computes a target,
   timed too); the clock starts when the last join has been answered and stops when the answers
   show the group Stable (every member at the group epoch, the partitions given out once each;
   one ConsumerGroupDescribe then confirms it), beside the same measure polling
   ConsumerGroupDescribe inside the timed window after every round,
   the members heartbeating back to back with what they own (no heartbeat interval waited: the
   broker's work only); beside it the classic rebalance of 100 members of section 1; (b)
   heartbeats/s from 1000 reconciled members (steady-state heartbeats: epoch only) beside classic
   Heartbeat v3 from 1000 members, alternating runs.

    python scripts/bench_groups.py [--runs 5] [--seconds 3] [--formations 50] [--only formation|consumer]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import AsyncClient, encode  # noqa: E402
from odradek.offsets.consumer_protocol import (  # noqa: E402
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)
from odradek.testing.process import SERVE, free_port, serve_args, stop, wait_until_serving  # noqa: E402

JOIN_V, SYNC_V, HEARTBEAT_V = 5, 3, 3
MAX_CONNECTIONS = 32
SUBSCRIPTION = encode_subscription(Subscription(version=0, topics=["orders", "payments"]))
_SIZE = struct.Struct(">i")


# --- broker process ----------------------------------------------------------------------------


class BrokerProcess:
    def __init__(self, canned_heartbeat: bool = False, initial_delay_ms: int | None = 2000) -> None:
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix="bench-groups-")
        settings = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.data}",
                    "log.level=warning", "log.format=json",
                    # the first generation gathers every member instead of forming with a few
                    *([] if initial_delay_ms is None else
                      [f"group.initial.rebalance.delay.ms={initial_delay_ms}"])]
        launcher = [sys.executable, __file__, "--child", "canned", "serve"] if canned_heartbeat else SERVE
        self.proc = subprocess.Popen([*launcher, *serve_args(settings)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_serving(self.proc, self.port)

    def stop(self) -> None:
        stop(self.proc)
        subprocess.run(["rm", "-rf", self.data], check=False)


# --- a group of raw-protocol members ------------------------------------------------------------


def join_body(group: str, member_id: str) -> dict:
    return {"group_id": group, "session_timeout_ms": 60000, "rebalance_timeout_ms": 60000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]}


def sync_body(group: str, generation: int, member_id: str, assignments: list[dict]) -> dict:
    return {"group_id": group, "generation_id": generation, "member_id": member_id,
            "group_instance_id": None, "assignments": assignments}


def assignment_for(i: int) -> bytes:
    return encode_assignment(Assignment(version=0, assigned_partitions=[
        TopicPartitions("orders", [i]), TopicPartitions("payments", [i])]))


class Group:
    """N members spread round-robin over up to 32 connections; requests pipelined."""

    def __init__(self, group_id: str, clients: list[AsyncClient], control: AsyncClient, n: int):
        self.group_id = group_id
        self.clients = clients
        self.control = control  # DescribeGroups, never behind a parked JoinGroup
        self.n = n
        self.member_ids = [""] * n
        self.generation = -1
        self.leader = 0

    def conn(self, i: int) -> AsyncClient:
        return self.clients[i % len(self.clients)]

    async def _gather(self, api: int, version: int, order: list[int]) -> dict[int, object]:
        """Responses for members in ``order`` (each connection answers in its send order)."""
        per_conn: dict[int, list[int]] = {}
        for i in order:
            per_conn.setdefault(i % len(self.clients), []).append(i)

        async def drain(c: int, members: list[int]) -> list[tuple[int, object]]:
            return [(i, (await self.clients[c].recv(api, version))[1]) for i in members]

        results = await asyncio.gather(*(drain(c, ms) for c, ms in per_conn.items()))
        return {i: r for part in results for i, r in part}

    async def form(self) -> None:
        """MEMBER_ID_REQUIRED round, then the first generation (gathered by the initial delay)."""
        for i in range(self.n):
            self.conn(i).send(11, JOIN_V, join_body(self.group_id, ""))
        for i, r in (await self._gather(11, JOIN_V, list(range(self.n)))).items():
            assert r.error_code == 79, r.error_code
            self.member_ids[i] = r.member_id
        await self.rebalance(order=list(range(self.n)))

    async def state(self) -> str:
        [described] = (await self.control.request(15, 0, {"groups": [self.group_id]})).groups
        return described.group_state

    async def rebalance(self, order: list[int] | None = None) -> float:
        """Everyone (leader first) rejoins and syncs; seconds from the last JoinGroup sent.

        The leader's JoinGroup must start the rebalance before the followers
        rejoin (a follower rejoining a Stable group with unchanged metadata is
        simply told the current generation), so the followers wait until a
        control connection sees PreparingRebalance.
        """
        if order is None:
            order = [self.leader] + [i for i in range(self.n) if i != self.leader]
            self.conn(self.leader).send(11, JOIN_V, join_body(self.group_id, self.member_ids[self.leader]))
            while await self.state() != "PreparingRebalance":
                await asyncio.sleep(0.001)
            rest = order[1:]
        else:
            rest = order
        for i in rest:
            self.conn(i).send(11, JOIN_V, join_body(self.group_id, self.member_ids[i]))
        started = time.perf_counter()
        joined = await self._gather(11, JOIN_V, order)
        index = {m: i for i, m in enumerate(self.member_ids)}
        first = joined[order[0]]
        assert all(r.error_code == 0 for r in joined.values()), {r.error_code for r in joined.values()}
        self.generation = first.generation_id
        self.leader = index[first.leader]
        everyone = [{"member_id": m, "assignment": assignment_for(index[m])} for m in self.member_ids]
        for i in order:
            assignments = everyone if i == self.leader else []
            self.conn(i).send(14, SYNC_V, sync_body(self.group_id, self.generation,
                                                    self.member_ids[i], assignments))
        synced = await self._gather(14, SYNC_V, order)
        elapsed = time.perf_counter() - started
        assert all(r.error_code == 0 for r in synced.values()), {r.error_code for r in synced.values()}
        assert synced[order[-1]].assignment == assignment_for(order[-1])
        return elapsed


async def connect(port: int, n: int) -> list[AsyncClient]:
    clients = [await AsyncClient.connect("127.0.0.1", port) for _ in range(n)]
    for c in clients:
        c.writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP,
                                                                socket.TCP_NODELAY, 1)
    return clients


async def rebalance_times(port: int, n: int, runs: int) -> list[float]:
    clients = await connect(port, min(n, MAX_CONNECTIONS) + 1)
    group = Group(f"bench-{n}", clients[1:], clients[0], n)
    try:
        await group.form()
        await group.rebalance()  # warm-up
        return [await group.rebalance() for _ in range(runs)]
    finally:
        for c in clients:
            await c.close()


# --- closed-loop throughput ----------------------------------------------------------------------


class Counter(asyncio.Protocol):
    """Counts size-prefixed responses without decoding them; refills the window."""

    def __init__(self, frames: list[bytes], window: int) -> None:
        self.frames = frames
        self.window = window
        self.next = 0
        self.buf = bytearray()
        self.done = 0
        self.stopping = False
        self.sample: bytes | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, count: int) -> None:
        frames, n = self.frames, len(self.frames)
        out = []
        for _ in range(count):
            out.append(frames[self.next % n])
            self.next += 1
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = answered = 0
        while len(buf) - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if len(buf) - pos - 4 < size:
                break
            if self.sample is None:
                self.sample = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            answered += 1
        del buf[:pos]
        self.done += answered
        if answered and not self.stopping:
            self.send(answered)


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (0 when unknown)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Loop:
    """A closed loop's outcome: answers/s, the first answer, and the broker's CPU per answer (us)."""

    rate: float
    sample: bytes | None
    cpu_us: float


async def closed_loop(port: int, frames_per_conn: list[list[bytes]], window: int,
                      seconds: float, pid: int | None = None) -> Loop:
    loop = asyncio.get_running_loop()
    conns = []
    for frames in frames_per_conn:
        _, proto = await loop.create_connection(lambda f=frames: Counter(f, window), "127.0.0.1", port)
        conns.append(proto)
    for c in conns:
        c.send(window)
    await asyncio.sleep(0.3)  # warm-up
    start_count, started, cpu = sum(c.done for c in conns), time.perf_counter(), process_cpu(pid)
    await asyncio.sleep(seconds)
    count, elapsed = sum(c.done for c in conns) - start_count, time.perf_counter() - started
    cpu = process_cpu(pid) - cpu
    for c in conns:
        c.stopping = True
    await asyncio.sleep(0.2)
    for c in conns:
        c.transport.close()
    return Loop(count / elapsed, conns[0].sample, cpu / count * 1e6)


async def heartbeat_rate(port: int, members: int, seconds: float, window: int,
                         connections: int = 16, pid: int | None = None) -> Loop:
    """Heartbeats/s from ``members`` members of a Stable group."""
    clients = await connect(port, min(members, MAX_CONNECTIONS) + 1)
    group = Group("bench-heartbeat", clients[1:], clients[0], members)
    try:
        await group.form()
        frames = [encode(12, HEARTBEAT_V, 1, {"group_id": group.group_id,
                                              "generation_id": group.generation, "member_id": m,
                                              "group_instance_id": None})
                  for m in group.member_ids]
        per_conn = [frames[i::connections] for i in range(connections)]
        loop = await closed_loop(port, per_conn, window, seconds, pid)
        # correlation id 1, throttle 0, error code: every heartbeat must have been accepted
        assert loop.sample is not None and loop.sample[-2:] == b"\x00\x00", loop.sample
        return loop
    finally:
        for c in clients:
            await c.close()


# --- main ------------------------------------------------------------------------------------------


async def rebalances(args) -> None:
    broker = BrokerProcess()
    try:
        print(f"rebalance: N members rejoin + sync, from the last JoinGroup written "
              f"(median of {args.runs})")
        for n in (10, 100, 1000):
            times = await rebalance_times(broker.port, n, args.runs)
            print(f"  N={n:>5}: {statistics.median(times) * 1000:8.1f} ms   "
                  f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})")
    finally:
        broker.stop()


async def heartbeats(args) -> None:
    rates: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.runs):  # alternate, so both see the same background load
        for canned in (False, True):
            broker = BrokerProcess(canned_heartbeat=canned)
            try:
                rates[canned].append((await heartbeat_rate(broker.port, 1000, args.seconds,
                                                           args.window)).rate)
            finally:
                broker.stop()
    real, canned = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"heartbeat v{HEARTBEAT_V}, 1000 members, 16 connections x {args.window} in flight "
          f"(median of {args.runs} x {args.seconds}s):")
    print(f"  coordinator        {real:10,.0f} req/s   {sorted(round(r) for r in rates[False])}")
    print(f"  canned handler     {canned:10,.0f} req/s   (same server, no coordinator work)")
    print(f"  ratio              {real / canned:10.2f}")


FORMATION_TOPIC = "formation"


async def formation_time(port: int, group: str) -> float:
    """Seconds from starting three aiokafka consumers of a new group to all three assigned."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    everyone = asyncio.get_running_loop().create_future()
    held: dict[int, set] = {}

    class Listener(ConsumerRebalanceListener):
        def __init__(self, i: int) -> None:
            self.i = i

        async def on_partitions_revoked(self, revoked) -> None:
            held.pop(self.i, None)

        async def on_partitions_assigned(self, assigned) -> None:
            held[self.i] = set(assigned)
            if (len(held) == 3 and all(held.values())
                    and sum(len(p) for p in held.values()) == 6 and not everyone.done()):
                everyone.set_result(time.perf_counter())

    consumers = [AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=group,
                                  heartbeat_interval_ms=3000, session_timeout_ms=10000)
                 for _ in range(3)]
    for i, c in enumerate(consumers):
        c.subscribe([FORMATION_TOPIC], listener=Listener(i))
    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(c.start() for c in consumers))
        done = await asyncio.wait_for(everyone, 30)
    finally:
        await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)
    return done - t0


async def formations(args) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    broker = BrokerProcess(initial_delay_ms=args.initial_delay_ms)
    try:
        admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.port}")
        await admin.start()
        await admin.create_topics([NewTopic(FORMATION_TOPIC, 6, 1)])
        await admin.close()
        await formation_time(broker.port, "formation-warm-up")
        times = [await formation_time(broker.port, f"formation-{i}") for i in range(args.formations)]
    finally:
        broker.stop()
    ordered = sorted(times)
    print(f"formation: 3 aiokafka consumers, new group, start -> all assigned ({args.formations} runs)")
    print(f"  median {statistics.median(times) * 1000:7.1f} ms   p90 "
          f"{ordered[int(0.9 * (len(ordered) - 1))] * 1000:7.1f} ms   max {max(times) * 1000:7.1f} ms   "
          f"runs over 500 ms: {sum(t > 0.5 for t in times)}")


# --- the consumer protocol (KIP-848) ---------------------------------------------------------------

CG_V = 1
CG_TOPIC = "orders"


def cg_body(group: str, member: str, epoch: int, *, join: bool = False, owned: list | None = None) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 60000 if join else -1, "subscribed_topic_names": [CG_TOPIC] if join else None,
            "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": [] if join else owned}


async def create_topic(port: int, name: str, partitions: int) -> None:
    c = await AsyncClient.connect("127.0.0.1", port)
    try:
        body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout_ms": 10000, "validate_only": False}
        [t] = (await c.request(19, 4, body)).topics
        assert t.error_code in (0, 36), t.error_code
    finally:
        await c.close()


class ConsumerGroup_:
    """N raw consumer-protocol members: each heartbeats with its epoch and what it owns."""

    def __init__(self, group_id: str, clients: list[AsyncClient], control: AsyncClient, n: int) -> None:
        self.group_id, self.clients, self.control, self.n = group_id, clients, control, n
        self.members = [f"{group_id}-{i:05d}-member-id-x" for i in range(n)]
        self.epochs = [0] * n
        self.owned: list[list] = [[] for _ in range(n)]

    def conn(self, i: int) -> AsyncClient:
        return self.clients[i % len(self.clients)]

    async def _round(self, join: bool) -> None:
        for i in range(self.n):
            self.conn(i).send(68, CG_V, cg_body(self.group_id, self.members[i], self.epochs[i], join=join,
                                                owned=self.owned[i]))
        per_conn: dict[int, list[int]] = {}
        for i in range(self.n):
            per_conn.setdefault(i % len(self.clients), []).append(i)

        async def drain(c: int, members: list[int]) -> None:
            for i in members:
                r = (await self.clients[c].recv(68, CG_V))[1]
                assert r.error_code == 0, r.error_code
                self.epochs[i] = r.member_epoch
                if r.assignment is not None:
                    self.owned[i] = [{"topic_id": t.topic_id, "partitions": list(t.partitions)}
                                     for t in r.assignment.topic_partitions]
        await asyncio.gather(*(drain(c, ms) for c, ms in per_conn.items()))

    async def state(self) -> str:
        [g] = (await self.control.request(69, 1, {"group_ids": [self.group_id],
                                                  "include_authorized_operations": False})).groups
        return g.group_state

    def converged(self, partitions: int) -> bool:
        """Stable, as the answers show it: every member at one epoch, and what they were given
        covers the ``partitions`` once each (a member short of its target, or one still revoking,
        leaves a gap or holds an older epoch)."""
        if len(set(self.epochs)) != 1:
            return False
        given = [(t["topic_id"], p) for owned in self.owned for t in owned for p in t["partitions"]]
        return len(given) == partitions and len(set(given)) == partitions

    async def reconcile(self, partitions: int, poll: bool = False,
                        pid: int | None = None) -> tuple[float, float, float]:
        """(seconds the N pipelined joins took, seconds from the last join answered to a Stable group,
        the broker's CPU seconds in that time).

        The clock stops when the answers show the group converged (``converged``), and one
        ConsumerGroupDescribe afterwards confirms it is Stable; ``poll`` instead asks
        ConsumerGroupDescribe after every round inside the timed window (this script's measure
        before: the client decoding a 100-member description is ~3 ms of each poll)."""
        started = time.perf_counter()
        await self._round(join=True)
        joined, cpu = time.perf_counter(), process_cpu(pid)
        rounds = 0
        while not (await self.state() == "Stable" if poll else self.converged(partitions)):
            await self._round(join=False)
            rounds += 1
            assert rounds < 50, "no convergence"
        elapsed, cpu = time.perf_counter() - joined, process_cpu(pid) - cpu
        assert await self.state() == "Stable"
        return joined - started, elapsed, cpu


async def consumer_reconcile_times(port: int, n: int, runs: int, poll: bool = False,
                                   pid: int | None = None) -> list[tuple[float, float, float]]:
    await create_topic(port, CG_TOPIC, 2 * n)
    clients = await connect(port, min(n, MAX_CONNECTIONS) + 1)
    try:
        return [await ConsumerGroup_(f"cg-{n}-{uuid.uuid4().hex[:8]}", clients[1:], clients[0], n).reconcile(
            2 * n, poll, pid) for _run in range(runs + 1)][1:]  # the first is a warm-up
    finally:
        for c in clients:
            await c.close()


async def consumer_heartbeat_rate(port: int, members: int, seconds: float, window: int,
                                  connections: int = 16, pid: int | None = None) -> Loop:
    # a partition for one member in ten: the steady heartbeat does not depend on it, and forming a
    # group of 1000 one join at a time rewrites every changed target at each join (as Kafka does)
    await create_topic(port, CG_TOPIC, members // 10)
    clients = await connect(port, MAX_CONNECTIONS + 1)
    try:
        group = ConsumerGroup_("cg-heartbeat", clients[1:], clients[0], members)
        await group.reconcile(members // 10)
        frames = [encode(68, CG_V, 1, cg_body(group.group_id, m, e)) for m, e in zip(group.members, group.epochs,
                                                                                     strict=True)]
        per_conn = [frames[i::connections] for i in range(connections)]
        loop = await closed_loop(port, per_conn, window, seconds, pid)
        # correlation id, the flexible header's empty tags, throttle, then the error code
        assert loop.sample is not None and loop.sample[9:11] == b"\x00\x00", loop.sample
        return loop
    finally:
        for c in clients:
            await c.close()


async def consumer_protocol(args) -> None:
    classic_times, consumer_times, polled_times = [], [], []
    rates: dict[str, list[float]] = {"classic": [], "consumer": []}
    cpu: dict[str, list[float]] = {"classic": [], "consumer": []}
    broker = BrokerProcess()
    try:
        classic_times = await rebalance_times(broker.port, 100, args.runs)
        for _ in range(args.runs):  # alternate the two measures, so both see the same load
            consumer_times += await consumer_reconcile_times(broker.port, 100, 1, pid=broker.proc.pid)
            polled_times += await consumer_reconcile_times(broker.port, 100, 1, poll=True, pid=broker.proc.pid)
    finally:
        broker.stop()
    for _ in range(args.runs):  # alternate, so both see the same background load
        for kind in ("classic", "consumer"):
            broker = BrokerProcess()
            try:
                rate = heartbeat_rate if kind == "classic" else consumer_heartbeat_rate
                loop = await rate(broker.port, 1000, args.seconds, args.window, pid=broker.proc.pid)
                rates[kind].append(loop.rate)
                cpu[kind].append(loop.cpu_us)
            finally:
                broker.stop()
    c = statistics.median(classic_times)
    joins = statistics.median(j for j, _r, _c in consumer_times)
    k = [r for _j, r, _c in consumer_times]
    print(f"consumer protocol vs classic, 100 members (median of {args.runs}):")
    print(f"  classic rebalance (rejoin + sync)      {c * 1000:8.1f} ms")
    print(f"  consumer: 100 joins (pipelined)        {joins * 1000:8.1f} ms   (an epoch and a target each)")
    print(f"  consumer: last join -> Stable          {statistics.median(k) * 1000:8.1f} ms   "
          f"(min {min(k) * 1000:.1f}, max {max(k) * 1000:.1f}; broker CPU "
          f"{statistics.median(c for _j, _r, c in consumer_times) * 1000:.0f} ms)")
    p = [r for _j, r, _c in polled_times]
    print(f"    the same, polling Describe each round {statistics.median(p) * 1000:7.1f} ms   "
          f"(min {min(p) * 1000:.1f}, max {max(p) * 1000:.1f})")
    hc, hk = statistics.median(rates["classic"]), statistics.median(rates["consumer"])
    print(f"heartbeats, 1000 members, 16 connections x {args.window} in flight (median of {args.runs} x "
          f"{args.seconds}s):")
    print(f"  classic Heartbeat v{HEARTBEAT_V}               {hc:10,.0f} req/s")
    print(f"  ConsumerGroupHeartbeat v{CG_V}           {hk:10,.0f} req/s")
    print(f"  ratio consumer / classic             {hk / hc:10.2f}   "
          f"(each run: {', '.join(f'{k / c:.2f}' for c, k in zip(rates['classic'], rates['consumer'], strict=True))})")
    cc, ck = statistics.median(cpu["classic"]), statistics.median(cpu["consumer"])
    print(f"  broker CPU per heartbeat: classic {cc:.1f} us, consumer {ck:.1f} us (rate ratio {cc / ck:.2f})")


def child(argv: list[str]) -> None:
    """``--child canned serve ...``: the broker, with a Heartbeat handler that always says 0."""
    from odradek.broker import cli
    from odradek.broker.handlers import groups

    groups.handle_heartbeat = lambda app, ctx, req: {"throttle_time_ms": 0, "error_code": 0}
    sys.argv = ["odradek", *argv]
    cli.main()


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--formations", type=int, default=50)
    parser.add_argument("--initial-delay-ms", type=int, help="group.initial.rebalance.delay.ms "
                        "for the formation runs (default: the broker's default)")
    parser.add_argument("--only", choices=["rebalance", "heartbeat", "formation", "consumer"])
    args = parser.parse_args()
    if args.only in (None, "rebalance"):
        asyncio.run(rebalances(args))
    if args.only in (None, "heartbeat"):
        asyncio.run(heartbeats(args))
    if args.only in (None, "formation"):
        asyncio.run(formations(args))
    if args.only in (None, "consumer"):
        asyncio.run(consumer_protocol(args))


if __name__ == "__main__":
    main()
