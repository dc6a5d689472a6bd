#!/usr/bin/env python3
"""OffsetCommit / OffsetFetch throughput and latency against ``odradek serve`` over loopback.

The broker runs in its own process (so its CPU is its own on this 2-core
machine); the client is one asyncio process sending pre-encoded frames and
counting size-prefixed responses without decoding them, so it costs little.
Each figure is the median of ``--runs`` runs:

1. OffsetCommit v8, 1 partition per request, 16 connections each keeping
   ``--window`` requests in flight (closed loop): requests/s, p50/p99 latency.
   With ``log.fsync.mode`` never and always (always: acknowledged after fsync,
   group commit).
2. The same at half the measured max rate, paced (open loop): p50/p99, with
   the share of CPU the hypervisor stole meanwhile; beside it the canned-reply
   server under the same paced load (the machine's own tail, no work per
   request) and, for fsync always, the disk alone under the same fsync load
   (no broker): both bound how low that latency can go.
3. OffsetCommit with 1000 partitions per request: partition-offsets/s.
4. OffsetFetch v8 of 10,000 committed partitions in one request: latency.

Topics are created with CreateTopics.  10,000 partitions do not fit as real
logs under this machine's open-file limit (about two descriptors per
partition, ``ulimit -n`` 20000), so the 1000-partition and fetch runs start
the broker through this script's ``--child`` launcher, which answers "does
this topic-partition exist" from a fixed table instead of the data plane;
everything else (coordinator, offsets log, codec, server) is the real broker.

5. ``--ratios``: partition-offsets/s of OffsetCommit v8 at 1, 100 and 1,000
   partitions per request, each beside the canned-reply server answering the
   same load with a reply of the same shape, pair by pair in one run; then
   OffsetFetch v8 latency for 100 and 10,000 committed partitions.

    python scripts/bench_offsets.py [--runs 3] [--seconds 3] [--profile] [--ratios]

``--profile`` runs the never-fsync commit load with the broker under
cProfile and prints where its time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import SyncClient, encode  # noqa: E402
from odradek.testing.process import SERVE, free_port, serve_args, stop, wait_until_serving  # noqa: E402

TOPIC = "bench"  # 1000 partitions
FETCH_TOPICS = [f"bench-fetch-{i}" for i in range(10)]  # 10 x 1000 partitions
CONNECTIONS = 16
_SIZE = struct.Struct(">i")


# --- broker process -------------------------------------------------------------------------------

def overrides(port: int, data: str, fsync: str) -> list[str]:
    return [f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}", f"log.fsync.mode={fsync}",
            "log.level=warning", "log.format=json"]


def serves(port: int, api_key: int) -> bool | None:
    """Whether the broker advertises ``api_key`` (None: not answering yet)."""
    try:
        with SyncClient("127.0.0.1", port, timeout=1.0) as c:
            r = c.request(18, 3, {"client_software_name": "bench", "client_software_version": "1"})
    except OSError:
        return None
    return any(k.api_key == api_key for k in r.api_keys)


_LEFT: list[str] = []


@atexit.register
def _remove_data_dirs() -> None:
    """Delete the brokers' data dirs only when the script ends.

    Each broker creates a 1000-partition topic (2000+ files); deleting them
    between runs (this disk is mounted with ``discard``) would put that I/O
    inside the next run's fsync latencies.
    """
    for path in _LEFT:
        shutil.rmtree(path, ignore_errors=True)


class BrokerProcess:
    def __init__(self, fsync: str, profile: str | None = None, child: bool = False):
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix="bench-offsets-")
        args = serve_args(overrides(self.port, self.data, fsync))
        if child or profile:
            cmd = [sys.executable, __file__, "--child", *args, *(["--fixed-topics"] if child else [])]
            if profile:
                cmd += ["--child-profile", profile]
        else:
            cmd = [*SERVE, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_serving(self.proc, self.port)

    def stop(self) -> None:
        stop(self.proc)
        _LEFT.append(self.data)  # removed at exit: see _remove_data_dirs


def create_topics(port: int) -> None:
    topics = [{"name": TOPIC, "num_partitions": 1000, "replication_factor": 1, "assignments": [],
               "configs": []}]
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        r = c.request(19, 5, {"topics": topics, "timeout_ms": 30000, "validate_only": False})
    bad = [(t.name, t.error_code) for t in r.topics if t.error_code not in (0, 36)]
    if bad:
        raise RuntimeError(f"CreateTopics failed: {bad}")


def start_broker(fsync: str, profile: str | None = None, fixed_topics: bool = False) -> BrokerProcess:
    """A broker with the bench topics (created with CreateTopics unless ``fixed_topics``)."""
    broker = BrokerProcess(fsync, profile, child=fixed_topics)
    if not fixed_topics:
        if not serves(broker.port, 19):
            broker.stop()
            raise RuntimeError("the broker does not serve CreateTopics")
        create_topics(broker.port)
    return broker


# --- requests -------------------------------------------------------------------------------------------

def commit_frame(group: str, partitions: list[int], topic: str = TOPIC) -> bytes:
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": 1000 + p, "committed_leader_epoch": 0,
                 "commit_timestamp": -1, "committed_metadata": ""} for p in partitions]}]}
    return encode(8, 8, 1, body)


def fetch_frame(group: str, topics: list[str], partitions: int) -> bytes:
    body = {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": t, "partition_indexes": list(range(partitions))}
                                   for t in topics]}], "require_stable": False}
    return encode(9, 8, 1, body)


class Counter(asyncio.Protocol):
    """Counts size-prefixed responses; records each one's latency (responses come in order)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.sent: deque[float] = deque()
        self.latencies: list[float] = []
        self.done = 0
        self.waiter: asyncio.Future | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, frame: bytes) -> None:
        self.sent.append(time.perf_counter())
        self.transport.write(frame)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        now = time.perf_counter()
        pos = 0
        while len(buf) - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if len(buf) - pos - 4 < size:
                break
            pos += 4 + size
            self.latencies.append(now - self.sent.popleft())
            self.done += 1
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)
        del buf[:pos]


async def connect(port: int, n: int) -> list[Counter]:
    loop = asyncio.get_running_loop()
    out = []
    for _ in range(n):
        _, proto = await loop.create_connection(Counter, "127.0.0.1", port)
        out.append(proto)
    return out


async def closed_loop(port: int, frames: list[bytes], window: int, seconds: float
                      ) -> tuple[float, list[float]]:
    """Each connection keeps ``window`` requests in flight; returns (requests/s, latencies)."""
    conns = await connect(port, len(frames))
    stop = time.perf_counter() + seconds

    async def drive(c: Counter, frame: bytes) -> None:
        for _ in range(window):
            c.send(frame)
        while time.perf_counter() < stop:
            c.waiter = asyncio.get_running_loop().create_future()
            await c.waiter
            while len(c.sent) < window:
                c.send(frame)
        while c.sent:
            c.waiter = asyncio.get_running_loop().create_future()
            await c.waiter

    for c in conns:  # warm-up: one round trip each
        c.send(frames[0])
    await asyncio.sleep(0.2)
    for c in conns:
        c.latencies.clear()
        c.done = 0
    t0 = time.perf_counter()
    await asyncio.gather(*(drive(c, f) for c, f in zip(conns, frames, strict=True)))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.transport.close()
    lat = [x for c in conns for x in c.latencies]
    return len(lat) / elapsed, lat


async def paced(port: int, frames: list[bytes], rate: float, seconds: float) -> list[float]:
    """Open loop at ``rate`` requests/s spread over the connections; returns latencies.

    One pacing loop serves every connection (a send burst every 0.5 ms), so
    the client's own wake-ups stay few and leave the CPU to the broker.
    """
    conns = await connect(port, len(frames))
    start = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) * rate) + 1
        while sent < due:
            i = sent % len(conns)
            conns[i].send(frames[i])
            sent += 1
        await asyncio.sleep(0.0005)
    for c in conns:
        while c.sent:
            c.waiter = asyncio.get_running_loop().create_future()
            await c.waiter
    for c in conns:
        c.transport.close()
    return [x for c in conns for x in c.latencies]


async def one_shot(port: int, frame: bytes, repeat: int) -> list[float]:
    (c,) = await connect(port, 1)
    for _ in range(repeat):
        c.waiter = asyncio.get_running_loop().create_future()
        c.send(frame)
        await c.waiter
    c.transport.close()
    return c.latencies


def cpu_seconds(pid: int) -> float:
    """CPU time of a process so far (Linux /proc): its threads' schedstat in ns where the kernel
    keeps it (a fetch of 100 partitions is well under a 10 ms tick), else user + system ticks."""
    from bench_startup import cpu_s

    spent = cpu_s(pid)
    if spent == spent:  # not NaN
        return spent
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] * 1000


# --- scenarios ------------------------------------------------------------------------------------------

def commit_frames() -> list[bytes]:
    return [commit_frame(f"bench-{i}", [i]) for i in range(CONNECTIONS)]


def run_commit(fsync: str, args) -> dict:
    rates, p50s, p99s, half50, half99, cpu, steal, max_steal = [], [], [], [], [], [], [], []
    canned50, canned99, canned_steal = [], [], []
    for _ in range(args.runs):
        broker = start_broker(fsync)
        try:
            before = cpu_seconds(broker.proc.pid)
            with StealMeter() as meter:
                rate, lat = asyncio.run(closed_loop(broker.port, commit_frames(), args.window, args.seconds))
            cpu.append((cpu_seconds(broker.proc.pid) - before) / (rate * args.seconds) * 1e6)
            rates.append(rate)
            max_steal.append(meter.share)
            p50s.append(pct(lat, 50))
            p99s.append(pct(lat, 99))
            with StealMeter() as meter:
                lat = asyncio.run(paced(broker.port, commit_frames(), rate / 2, args.seconds))
            half50.append(pct(lat, 50))
            half99.append(pct(lat, 99))
            steal.append(meter.share)
        finally:
            broker.stop()
        with StealMeter() as meter:
            lat = canned_paced(rate / 2, args.seconds)
        canned50.append(pct(lat, 50))
        canned99.append(pct(lat, 99))
        canned_steal.append(meter.share)
    out = {"fsync": fsync, "rate": statistics.median(rates), "cpu_us": statistics.median(cpu),
           "p50": statistics.median(p50s), "p99": statistics.median(p99s),
           "half_p50": statistics.median(half50), "half_p99": statistics.median(half99),
           "max_runs": list(zip(rates, max_steal, strict=True)),
           "half_runs": list(zip(half99, steal, strict=True)),
           "canned_p50": statistics.median(canned50), "canned_p99": statistics.median(canned99),
           "canned_runs": list(zip(canned99, canned_steal, strict=True))}
    if fsync == "always":
        disk = [disk_reference(rate / 2, args.seconds) for rate in rates]
        out["disk_p50"] = statistics.median(d[0] for d in disk)
        out["disk_p99"] = statistics.median(d[1] for d in disk)
    return out


class StealMeter:
    """The share of CPU time the hypervisor gave to others (``steal`` in /proc/stat) during a block.

    This VM's tail latencies follow it: a run where the host takes 10-25 % of
    the CPU for a while shows a p99 several times that of a quiet run.
    """

    share = 0.0

    @staticmethod
    def _read() -> list[int]:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]

    def __enter__(self) -> StealMeter:
        self._start = self._read()
        return self

    def __exit__(self, *exc) -> None:
        delta = [b - a for a, b in zip(self._start, self._read(), strict=True)]
        self.share = delta[7] / (sum(delta) or 1)  # user nice system idle iowait irq softirq steal


def disk_reference(rate: float, seconds: float) -> tuple[float, float]:
    """The disk alone under the always-mode load: (p50, p99) ms from a write to its fsync's end.

    The broker's shape, with no broker: the bench's 16 groups share one
    offsets partition (``offsets.topic.num.partitions`` is 1), so one file
    takes ``rate`` appends/s while fsync rounds run back to back, each
    covering every append made before it started (group commit).  A commit
    cannot be acknowledged before that, so this is the floor under the
    always-mode latency.
    """
    directory = tempfile.mkdtemp(prefix="bench-offsets-disk-")
    _LEFT.append(directory)
    fd = os.open(os.path.join(directory, "00000000000000000000.log"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    written: list[float] = []  # when each append was made
    latencies: list[float] = []
    done = threading.Event()

    def syncer() -> None:
        synced = 0
        while not done.is_set() or synced < len(written):
            upto = len(written)
            if upto == synced:
                time.sleep(0.0001)
                continue
            os.fsync(fd)
            end = time.perf_counter()
            latencies.extend(end - t for t in written[synced:upto])
            synced = upto

    thread = threading.Thread(target=syncer)
    thread.start()
    try:
        start = time.perf_counter()
        sent = 0
        while (now := time.perf_counter()) - start < seconds:  # paced like the client: every 0.5 ms
            due = int((now - start) * rate) + 1
            while sent < due:
                os.write(fd, b"x" * 120)  # about one 1-partition commit batch
                written.append(time.perf_counter())
                sent += 1
            time.sleep(0.0005)
    finally:
        done.set()
        thread.join()
        os.close(fd)
    return pct(latencies, 50), pct(latencies, 99)


def run_baseline(args) -> dict:
    """A server that only frames and answers a canned OffsetCommit reply, same client, same run.

    The ratio to it is what the broker's own work costs (about 120k/s on this machine in 2026-11).
    """
    rates, cpu = [], []
    for _ in range(args.runs):
        with CannedServer() as server:
            before = cpu_seconds(server.pid)
            rate, _ = asyncio.run(closed_loop(server.port, commit_frames(), args.window, args.seconds))
            cpu.append((cpu_seconds(server.pid) - before) / (rate * args.seconds) * 1e6)
            rates.append(rate)
    return {"rate": statistics.median(rates), "cpu_us": statistics.median(cpu)}


class CannedServer:
    """The canned-reply server (``--canned``) in its own process, for ``with``; its reply
    carries ``partitions`` partitions (the shape of the broker's answer to the same load): an
    OffsetCommit answer, or with ``fetch`` an OffsetFetch v8 answer (the partitions under
    ``FETCH_TOPICS``, 1,000 a topic at most)."""

    def __init__(self, partitions: int = 1, fetch: bool = False) -> None:
        self.partitions = partitions
        self.fetch = fetch

    def __enter__(self) -> CannedServer:
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, __file__, "--canned", str(self.port),
                                      str(self.partitions), *(["fetch"] if self.fetch else [])])
        self.pid = self.proc.pid
        while serves_tcp(self.port) is False:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


def canned_paced(rate: float, seconds: float) -> list[float]:
    """Latencies of the canned server under the same paced load: what this machine alone adds.

    No work per request, yet its tail moves with the VM's steal time; the
    broker's half-rate tail is read against it.
    """
    with CannedServer() as server:
        return asyncio.run(paced(server.port, commit_frames(), rate, seconds))


def serves_tcp(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def canned(port: int, partitions: int = 1, fetch: bool = False) -> int:
    """The canned server: read size-prefixed frames, answer each with a fixed v8 reply."""
    from canned_server import run

    return run(port, encode_canned_fetch_reply(partitions) if fetch else encode_canned_reply(partitions))


def encode_canned_reply(partitions: int = 1) -> bytes:
    from odradek.protocol import headers
    from odradek.protocol.registry import APIS

    body = APIS[8].response.build({"throttle_time_ms": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": p, "error_code": 0}
                                       for p in range(partitions)]}]}, 8)
    return headers.encode_response(1, 1, body)


def encode_canned_fetch_reply(partitions: int) -> bytes:
    """The broker's OffsetFetch v8 answer's shape for ``partitions`` committed partitions."""
    from odradek.protocol import headers
    from odradek.protocol.registry import APIS

    per_topic = min(partitions, 1000)
    topics = [{"name": t, "partitions": [
        {"partition_index": p, "committed_offset": 1000 + p, "committed_leader_epoch": 0,
         "metadata": "", "error_code": 0} for p in range(per_topic)]}
        for t in FETCH_TOPICS[:partitions // per_topic]]
    body = APIS[9].response.build({"throttle_time_ms": 0, "groups": [
        {"group_id": "fetch-group", "topics": topics, "error_code": 0}]}, 8)
    return headers.encode_response(1, 1, body)  # correlation id 1, flexible header


def run_bulk(args) -> dict:
    rates, fetch_ms = [], []
    for _ in range(args.runs):
        broker = start_broker("never", fixed_topics=True)
        try:
            frames = [commit_frame(f"bulk-{i}", list(range(1000))) for i in range(4)]
            rate, _ = asyncio.run(closed_loop(broker.port, frames, 2, args.seconds))
            rates.append(rate * 1000)
            for i, topic in enumerate(FETCH_TOPICS):  # 10,000 committed partitions in one group
                asyncio.run(one_shot(broker.port, commit_frame("fetch-group", list(range(1000)), topic), 1))
                del i
            lat = asyncio.run(one_shot(broker.port, fetch_frame("fetch-group", FETCH_TOPICS, 1000), 20))
            fetch_ms.append(statistics.median(lat) * 1000)
        finally:
            broker.stop()
    return {"partition_offsets": statistics.median(rates),
            "fetch_ms": statistics.median(fetch_ms)}


# (partitions per request, connections, requests in flight per connection)
RATIO_LOADS = ((1, CONNECTIONS, 16), (100, 4, 16), (1000, 4, 2))


def run_ratios(args) -> None:
    """Partition-offsets/s beside the canned server, pair by pair; OffsetFetch latencies."""
    pairs: dict[int, list[tuple[float, float]]] = {n: [] for n, _, _ in RATIO_LOADS}
    cpu_us: dict[int, list[float]] = {n: [] for n, _, _ in RATIO_LOADS}
    canned_cpu_us: dict[int, list[float]] = {n: [] for n, _, _ in RATIO_LOADS}
    fetch_ms: dict[int, list[float]] = {100: [], 10_000: []}
    fetch_cpu_ms: dict[int, list[float]] = {100: [], 10_000: []}
    canned_fetch_ms: dict[int, list[float]] = {100: [], 10_000: []}
    for _ in range(args.runs):
        broker = start_broker("never", fixed_topics=True)
        try:
            rates = {}
            for n, conns, window in RATIO_LOADS:
                frames = [commit_frame(f"ratio-{n}-{i}", list(range(n))) for i in range(conns)]
                before = cpu_seconds(broker.proc.pid)
                rates[n] = asyncio.run(closed_loop(broker.port, frames, window, args.seconds))[0] * n
                # the broker's own CPU per partition-offset: steadier than rates on a shared machine
                cpu_us[n].append((cpu_seconds(broker.proc.pid) - before) / (rates[n] * args.seconds) * 1e6)
            for topic in FETCH_TOPICS:  # 10,000 committed partitions in one group
                asyncio.run(one_shot(broker.port, commit_frame("fetch-group", list(range(1000)), topic), 1))
            for n, topics, per_topic in ((100, FETCH_TOPICS[:1], 100), (10_000, FETCH_TOPICS, 1000)):
                before = cpu_seconds(broker.proc.pid)
                lat = asyncio.run(one_shot(broker.port, fetch_frame("fetch-group", topics, per_topic), 20))
                fetch_cpu_ms[n].append((cpu_seconds(broker.proc.pid) - before) / len(lat) * 1000)
                fetch_ms[n].append(statistics.median(lat) * 1000)
        finally:
            broker.stop()
        for n, conns, window in RATIO_LOADS:
            frames = [commit_frame(f"ratio-{n}-{i}", list(range(n))) for i in range(conns)]
            with CannedServer(n) as server:
                before = cpu_seconds(server.pid)
                canned_rate = asyncio.run(closed_loop(server.port, frames, window, args.seconds))[0] * n
                canned_cpu_us[n].append((cpu_seconds(server.pid) - before) / (canned_rate * args.seconds) * 1e6)
            pairs[n].append((rates[n], canned_rate))
        for n, topics, per_topic in ((100, FETCH_TOPICS[:1], 100), (10_000, FETCH_TOPICS, 1000)):
            with CannedServer(n, fetch=True) as server:  # the same request, an answer of the same size
                lat = asyncio.run(one_shot(server.port, fetch_frame("fetch-group", topics, per_topic), 20))
            canned_fetch_ms[n].append(statistics.median(lat) * 1000)
    print(f"OffsetCommit v8 partition-offsets/s, broker (fsync never) beside the canned-reply server, "
          f"{args.runs} runs of {args.seconds:g} s:")
    for n, conns, window in RATIO_LOADS:
        ratios = [b / c for b, c in pairs[n]]
        print(f"  {n:>5} partitions/request ({conns} conns x {window}): broker "
              f"{statistics.median(b for b, _ in pairs[n]):>11,.0f}/s  canned "
              f"{statistics.median(c for _, c in pairs[n]):>11,.0f}/s  ratio median "
              f"{statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}); broker CPU "
              f"{statistics.median(cpu_us[n]):.2f} us per partition-offset, canned "
              f"{statistics.median(canned_cpu_us[n]):.2f}: CPU ratio canned/broker "
              f"{statistics.median(c / b for b, c in zip(cpu_us[n], canned_cpu_us[n], strict=True)):.2f} "
              f"(the rate ratio when each server is bound by its own CPU)")
    for n, values in fetch_ms.items():
        print(f"  OffsetFetch v8 of {n:>6,} partitions over TCP: median of runs {statistics.median(values):.2f} ms "
              f"(each run's median: {', '.join(f'{v:.2f}' for v in values)}); the canned server's answer "
              f"of the same size {statistics.median(canned_fetch_ms[n]):.2f} ms "
              f"({', '.join(f'{v:.2f}' for v in canned_fetch_ms[n])}); broker CPU per fetch "
              f"{statistics.median(fetch_cpu_ms[n]):.2f} ms (what a fetch costs when it need not wait for a core)")
    print(f"  (load average when done: {open('/proc/loadavg').read().split()[0]})")


def run_profile(args) -> None:
    out = tempfile.mktemp(prefix="bench-offsets-", suffix=".prof")
    n = args.partitions
    broker = start_broker("never", profile=out, fixed_topics=n > 1)
    try:
        frames = commit_frames() if n == 1 else [commit_frame(f"p-{i}", list(range(n))) for i in range(4)]
        rate, _ = asyncio.run(closed_loop(broker.port, frames, args.window, args.seconds))
    finally:
        broker.stop()
    import pstats

    print(f"profiled broker: {rate:,.0f} OffsetCommit/s of {n} partitions (under cProfile)")
    stats = pstats.Stats(out)
    stats.sort_stats("tottime").print_stats(25)
    os.unlink(out)


# --- the --child launcher ---------------------------------------------------------------------------------

class FixedTopics:
    """Stands in for the data plane's registry when the broker has none (benchmarks only)."""

    def __init__(self) -> None:
        self.counts = {TOPIC: 1000, **{t: 1000 for t in FETCH_TOPICS}}

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)

    async def drain(self) -> None:
        """Nothing under way (``BrokerApp.stop`` waits for the registry's creates and deletes)."""


def child(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--override", action="append", default=[])
    parser.add_argument("--child-profile")
    parser.add_argument("--fixed-topics", action="store_true")
    args = parser.parse_args(argv)
    from odradek.broker import logging_setup as logs
    from odradek.broker.app import BrokerApp
    from odradek.broker.config import Config
    from odradek.broker.gcpolicy import GcPolicy

    config = Config.load(None, overrides=args.override)
    logs.configure(config["log.format"], config["log.level"])

    async def serve() -> None:
        app = BrokerApp(config)
        await app.start()
        if args.fixed_topics:
            app.topics = FixedTopics()  # what the offsets handlers ask; the data plane keeps its own
        GcPolicy().install(asyncio.get_running_loop())  # as ``odradek serve`` does
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await app.stop()

    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    if args.child_profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        runner(serve())
        prof.disable()
        prof.dump_stats(args.child_profile)
    else:
        runner(serve())
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    if len(sys.argv) > 2 and sys.argv[1] == "--canned":
        return canned(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1, "fetch" in sys.argv[4:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--window", type=int, default=8, help="requests in flight per connection")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--partitions", type=int, default=1,
                        help="with --profile: partitions per OffsetCommit (fixed topics)")
    parser.add_argument("--ratios", action="store_true", help="only the ratio and fetch figures (5.)")
    args = parser.parse_args()
    if args.profile:
        run_profile(args)
        return 0
    if args.ratios:
        run_ratios(args)
        return 0
    print(f"OffsetCommit v8, 1 partition/request, {CONNECTIONS} connections x {args.window} in flight; "
          f"medians of {args.runs} runs of {args.seconds:g} s; {os.cpu_count()} cores shared with the client")
    never = None
    for fsync in ("never", "always"):
        r = run_commit(fsync, args)
        never = never or r
        print(f"  fsync={r['fsync']:<6}  {r['rate']:>9,.0f} commits/s   p50 {r['p50']:6.2f} ms  "
              f"p99 {r['p99']:6.2f} ms   | at half rate: p50 {r['half_p50']:5.2f} ms  "
              f"p99 {r['half_p99']:5.2f} ms   | broker CPU {r['cpu_us']:.0f} us/commit "
              f"(= {1e6 / r['cpu_us']:,.0f}/s per core)")
        print("     each run (steal): max rate " + ", ".join(f"{x:,.0f}/s ({st:.0%})" for x, st in r["max_runs"])
              + "; half-rate p99 "
              + ", ".join(f"{p:.1f} ms ({st:.0%})" for p, st in r["half_runs"]))
        print(f"     the canned-reply server at that half rate (no work per request): "
              f"p50 {r['canned_p50']:5.2f} ms  p99 {r['canned_p99']:5.2f} ms; each run: "
              + ", ".join(f"{p:.1f} ms ({st:.0%})" for p, st in r["canned_runs"]))
        if "disk_p99" in r:
            print(f"     the disk alone at that half rate (one file, appends + back-to-back fsync rounds, no broker): "
                  f"p50 {r['disk_p50']:5.2f} ms  p99 {r['disk_p99']:5.2f} ms")
    base = run_baseline(args)
    print(f"  canned-reply server     {base['rate']:>9,.0f} replies/s   (same client, same run; "
          f"{base['cpu_us']:.0f} us CPU/reply): the broker does {never['rate'] / base['rate']:.0%} of it")
    print(f"  (load average when done: {open('/proc/loadavg').read().split()[0]}; other work on "
          "the machine lowers the first figures, not the CPU per commit)")
    b = run_bulk(args)
    print(f"OffsetCommit, 1000 partitions/request (4 connections x 2): "
          f"{b['partition_offsets']:,.0f} partition-offsets/s")
    print(f"OffsetFetch v8 of 10,000 partitions: {b['fetch_ms']:.1f} ms per request (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
