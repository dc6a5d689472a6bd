"""The broker's memory and responsiveness under a hostile run: RSS at start, peak and end.

Runs ``odradek serve`` as a child process (one per source tree given, side by
side in one run) and, against each, in order:

0. stall: a small client's acks=1 Produce p99, idle and then while four
   connections send legal zstd/lz4/gzip batches decompressing to ~250 MiB
   (the cap is 256 MiB); the ratio is the loop's stall under legal input;
1. amplification: Fetches naming one 1 MB partition 300 times with max_bytes
   2**31-1, from two connections at once, while a probe connection times
   ApiVersions round trips (the loop's stall for other clients);
2. garbage: compressed batches that do not decompress, a zstd bomb;
3. fuzz: mutated frames for every served API and version (tests/hostile_requests.py);
4. 1,000 idle connections and 200 never-finished frames, opened and dropped.

RSS is read from /proc (VmRSS; VmHWM for the peak); "end" is after the
hostile clients are gone and the broker idled 3 s.  Usage:

    python scripts/bench_hostile.py [--baseline PATH_TO_OTHER_CHECKOUT] [--rounds 10]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import SyncClient  # noqa: E402
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.testing.process import memory_mb, reset_peak, serving  # noqa: E402
from tests.hostile_requests import ServedTable as Served  # noqa: E402
from tests.hostile_requests import fuzz  # noqa: E402


def phase_peak(pid: int) -> float:
    """The peak RSS since the last call (VmHWM, then reset through clear_refs)."""
    peak = memory_mb(pid)["VmHWM"]
    reset_peak(pid)
    return peak


def fetch_body(topic: str, copies: int) -> dict:
    part = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
            "partition_max_bytes": 2 << 20}
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 2**31 - 1, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [part]} for _ in range(copies)]}


def amplification(port: int) -> tuple[int, float]:
    """(largest answer in bytes, slowest probe round trip in ms) over 2 x 3 amplified Fetches."""
    with SyncClient("127.0.0.1", port, timeout=120) as c:
        c.request(19, 5, {"topics": [{"name": "amp", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000})
        c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "amp", "partition_data": [{"index": 0, "records": encode_batch([(b"k", b"x" * 1_000_000)])}]}]})
    biggest = [0]
    done = threading.Event()
    slowest = [0.0]

    def probe() -> None:
        with SyncClient("127.0.0.1", port, timeout=120) as c:
            while not done.is_set():
                t = time.perf_counter()
                c.request(18, 0, {})
                slowest[0] = max(slowest[0], (time.perf_counter() - t) * 1000)
                time.sleep(0.005)

    def amplify() -> None:
        with SyncClient("127.0.0.1", port, timeout=120) as c:
            for _ in range(3):
                r = c.request(1, 12, fetch_body("amp", 300))
                size = sum(len(p.records or b"") for t in r.responses for p in t.partitions)
                biggest[0] = max(biggest[0], size)

    prober = threading.Thread(target=probe)
    prober.start()
    workers = [threading.Thread(target=amplify) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    prober.join()
    return biggest[0], slowest[0]


STALL_CODECS = (4, 3, 1, 4)  # zstd, lz4, gzip, zstd: one per loading connection


def near_cap_batch(codec: int, record_bytes: int) -> bytes:
    """A legal batch whose records area decompresses to ~250 MiB (the cap is 256 MiB)."""
    value = (b"odradek-" * (record_bytes // 8 + 1))[:record_bytes]
    return encode_batch([(b"k", value)] * ((250 << 20) // (record_bytes + 12)), compression=codec)


def probe_p99(port: int, samples: int, running=lambda: True) -> float:
    """p99 in ms of a small client's acks=1 Produce round trips (``samples`` of them, or fewer
    once ``running`` says the load is over)."""
    batch = encode_batch([(b"k", b"v" * 100)])
    times = []
    with SyncClient("127.0.0.1", port, timeout=120) as c:
        while len(times) < samples and (running() or not times):
            t = time.perf_counter()
            c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "probe", "partition_data": [{"index": 0, "records": batch}]}]})
            times.append((time.perf_counter() - t) * 1000)
            time.sleep(0.002)
    times.sort()
    return times[min(len(times) - 1, int(len(times) * 0.99))]


def stall(port: int, batches: dict[int, bytes], rounds: int) -> tuple[float, float, int]:
    """(idle p99, p99 while four connections send near-cap compressed batches, batches sent)."""
    with SyncClient("127.0.0.1", port, timeout=120) as c:
        c.request(19, 5, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": "max.message.bytes", "value": str(16 << 20)}]} for name in ("probe", "stall")],
            "timeout_ms": 5000})
    idle = probe_p99(port, 300)
    sent = [0]
    active = [len(STALL_CODECS)]
    lock = threading.Lock()

    def load(codec: int) -> None:
        with SyncClient("127.0.0.1", port, timeout=300) as c:
            for _ in range(rounds):
                r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
                    {"name": "stall", "partition_data": [{"index": 0, "records": batches[codec]}]}]})
                assert r.responses[0].partition_responses[0].error_code == 0, r
                with lock:
                    sent[0] += 1
        with lock:
            active[0] -= 1

    loaders = [threading.Thread(target=load, args=(codec,)) for codec in STALL_CODECS]
    for t in loaders:
        t.start()
    time.sleep(0.2)
    loaded = probe_p99(port, 100_000, running=lambda: active[0] > 0)
    for t in loaders:
        t.join()
    return idle, loaded, sent[0]


def garbage(port: int) -> None:
    import crc32c

    def forged(area: bytes, codec: int) -> bytes:
        tail = struct.pack(">hiqqqhii", codec, 1, 0, 0, -1, -1, -1, 2) + area
        return struct.pack(">qiibI", 0, len(tail) + 9, -1, 2, crc32c.crc32c(tail)) + tail

    batches = [forged(bytes(range(64)), codec) for codec in (1, 2, 3, 4)]
    batches.append(encode_batch([(b"k", bytes(200 << 20))], compression=4))  # 200 MiB of zeros
    with SyncClient("127.0.0.1", port, timeout=120) as c:
        for data in batches * 5:
            c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": "amp", "partition_data": [{"index": 0, "records": data}]}]})
        for ts in (0, 10**12, 2 * 10**12):
            c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "amp", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})


def idle_and_partial(port: int) -> None:
    socks = []
    try:
        for i in range(1200):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 6 == 0:
                s.sendall(struct.pack(">i", 1 << 20) + b"\x00\x12")  # a 1 MiB frame that never comes
            socks.append(s)
        time.sleep(1)
    finally:
        for s in socks:
            s.close()


def run(src: Path, rounds: int, batches: dict[int, bytes], stall_rounds: int) -> dict:
    with serving(src=src) as (proc, port):
        with SyncClient("127.0.0.1", port) as c:
            served = Served(c.request(18, 0, {}).api_keys)
        start = memory_mb(proc.pid)["VmRSS"]
        overall = memory_mb(proc.pid)["VmHWM"]
        idle_p99, loaded_p99, stall_sent = stall(port, batches, stall_rounds)
        if rounds == 0:  # --rounds 0: the stall phase only
            return {"idle_p99": idle_p99, "loaded_p99": loaded_p99, "stall_sent": stall_sent}
        phase_peak(proc.pid)
        biggest, slowest = amplification(port)
        peaks = [phase_peak(proc.pid)]
        garbage(port)
        peaks.append(phase_peak(proc.pid))
        stats = fuzz(port, served, rounds, seed=7, wait=10.0, deadline=time.monotonic() + 600)
        peaks.append(phase_peak(proc.pid))
        idle_and_partial(port)
        peaks.append(phase_peak(proc.pid))
        time.sleep(3)
        end = memory_mb(proc.pid)["VmRSS"]
        alive = proc.poll() is None
    return {"start": start, "peaks": peaks, "peak": max(overall, *peaks), "end": end,
            "biggest": biggest, "stall_ms": slowest, "frames": stats.sent, "failures": len(stats.failures),
            "alive": alive, "idle_p99": idle_p99, "loaded_p99": loaded_p99, "stall_sent": stall_sent}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, help="another checkout's root, run side by side")
    ap.add_argument("--rounds", type=int, default=10, help="fuzz rounds per served API version (0: only the stall phase)")
    ap.add_argument("--record-bytes", type=int, default=1000, help="value size of the near-cap batches' records")
    ap.add_argument("--stall-rounds", type=int, default=3, help="near-cap batches per loading connection")
    args = ap.parse_args()
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    batches = {codec: near_cap_batch(codec, args.record_bytes) for codec in set(STALL_CODECS)}
    print("| tree | small Produce p99: idle / 4 near-cap loaders (ratio) | RSS start "
          "| peak: amplification / garbage / fuzz / idle | end | largest Fetch answer | "
          "slowest probe | fuzz frames | alive |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, src in trees:
        r = run(src, args.rounds, batches, args.stall_rounds)
        if args.rounds == 0:
            print(f"| {name} | {r['idle_p99']:.1f} / {r['loaded_p99']:.1f} ms "
                  f"({r['loaded_p99'] / r['idle_p99']:.1f}x, {r['stall_sent']} batches) |", flush=True)
            continue
        peaks = " / ".join(f"{p:.0f}" for p in r["peaks"])
        print(f"| {name} | {r['idle_p99']:.1f} / {r['loaded_p99']:.1f} ms "
              f"({r['loaded_p99'] / r['idle_p99']:.1f}x, {r['stall_sent']} batches) | {r['start']:.0f} MB "
              f"| {peaks} MB | {r['end']:.0f} MB "
              f"| {r['biggest'] / 1e6:.1f} MB | {r['stall_ms']:.0f} ms | {r['frames']} "
              f"({r['failures']} failed) | {r['alive']} |", flush=True)


if __name__ == "__main__":
    main()
