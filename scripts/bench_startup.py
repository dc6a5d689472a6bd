#!/usr/bin/env python3
"""Start-up time and idle memory of ``odradek serve``.

For each run: spawn the broker on a free port with a fresh data dir, poll with
raw ApiVersions requests until one is answered, record the wall time from
spawn to that answer, read VmRSS from /proc, stop with SIGTERM.  Prints the
median of the runs, side by side with the cost of merely starting the Python
interpreter (the floor any Python broker pays), so the ratio is what matters.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # size, key, version, corr, null client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answered(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(API_VERSIONS_V0)
            size = struct.unpack(">i", s.recv(4))[0]
            return size > 0
    except OSError:
        return False


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def one_run() -> tuple[float, float]:
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "odradek.broker.cli", "serve",
                                 "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                 "--override", f"log.dirs={data}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not answered(port):
                if proc.poll() is not None:
                    raise SystemExit("broker exited during start-up")
                time.sleep(0.002)
            elapsed = time.perf_counter() - t0
            time.sleep(0.3)
            rss = rss_mb(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
    return elapsed, rss


def interpreter_floor() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    times, rsses, floors = [], [], []
    for _ in range(args.runs):
        floors.append(interpreter_floor())
        t, r = one_run()
        times.append(t)
        rsses.append(r)
    med_t, med_floor = statistics.median(times), statistics.median(floors)
    print(f"runs: {args.runs} (python {sys.version.split()[0]}, pid {os.getpid()})")
    print(f"start-up to first ApiVersions answer: median {med_t * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); target < 500 ms")
    print(f"bare interpreter start:               median {med_floor * 1000:.0f} ms; "
          f"ratio broker/interpreter {med_t / med_floor:.1f}x")
    print(f"idle RSS: median {statistics.median(rsses):.1f} MB; target < 60 MB")


if __name__ == "__main__":
    main()
