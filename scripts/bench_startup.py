#!/usr/bin/env python3
"""Start-up time and idle memory of ``odradek serve``.

For each run: spawn the broker on a free port with a fresh data dir, poll with
raw ApiVersions requests until one is answered, record the wall time from
spawn to that answer, read VmRSS from /proc, stop with SIGTERM.  Prints the
median of the runs, side by side with the cost of merely starting the Python
interpreter (the floor any Python broker pays), so the ratio is what matters.

With ``--container IMAGE`` it also times the container the same way, alternating with the
process runs: ``podman run -d`` (or docker) publishing a free 127.0.0.1 port, until the
first ApiVersions answer through it; then the container's idle memory (the broker's VmRSS
and the cgroup's usage as the engine reports it) and the image's size.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def cpu_s(pid: int) -> float:
    """CPU time the process has run so far, all its threads (``/proc/PID/task/*/schedstat``, ns;
    NaN where the kernel keeps no schedstat).  On a loaded machine the wall time to the first
    answer mostly measures the wait for a core; the CPU spent until then is what the code costs."""
    try:
        return sum(int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
                   for tid in os.listdir(f"/proc/{pid}/task")) / 1e9
    except (OSError, ValueError, IndexError):
        return float("nan")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# The yardstick (``canned_server.py``): an asyncio server answering every frame with one canned
# ApiVersions reply, started as the broker is (the same interpreter, uvloop when installed, a
# listening socket). It pays the interpreter's and asyncio's start-up and nothing of a broker's.
CANNED = str(Path(__file__).resolve().parent / "canned_server.py")
CANNED_REPLY = struct.pack(">iihi", 10, 1, 0, 0)  # size, correlation id, error, no api keys (v0)


# the HTTP surfaces of a default ``serve`` (each started after the Kafka listeners answer)
SURFACES = {"registry": "odradek.schema.registry.listener", "console": "odradek.console.listener"}


def one_run(canned: bool = False, off: tuple[str, ...] = ()) -> tuple[float, float, float]:
    """(spawn -> first ApiVersions answer seconds, idle VmRSS MB, CPU seconds until that answer) of a fresh broker (each HTTP surface
    of ``SURFACES`` on a free port, those named in ``off`` turned off), or of the canned-reply
    server with ``canned``."""
    port = free_port()
    surfaces = [x for name, setting in SURFACES.items()
                for x in ("--override", f"{setting}={'' if name in off else f'http://127.0.0.1:{free_port()}'}")]
    with tempfile.TemporaryDirectory() as data:
        argv = ([sys.executable, CANNED, str(port), CANNED_REPLY.hex()] if canned else
                [sys.executable, "-m", "odradek.broker.cli", "serve",
                 "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                 "--override", f"log.dirs={data}", *surfaces])
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not answered(port):
                if proc.poll() is not None:
                    raise SystemExit("broker exited during start-up")
                time.sleep(0.002)
            elapsed = time.perf_counter() - t0
            cpu = cpu_s(proc.pid)
            time.sleep(0.3)
            rss = rss_mb(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
    return elapsed, rss, cpu


def container_run(engine: str, image: str) -> tuple[float, float, float]:
    """(run -> first answer seconds, broker VmRSS MB, cgroup memory MB) of one fresh container."""
    port = free_port()
    name = f"odradek-bench-{os.getpid()}-{port}"
    t0 = time.perf_counter()
    subprocess.run([engine, "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:9092", image],
                   check=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not answered(port):
            if time.monotonic() > deadline:
                raise SystemExit(f"container {name} never answered")
            time.sleep(0.002)
        elapsed = time.perf_counter() - t0
        time.sleep(0.3)
        pid = int(subprocess.run([engine, "inspect", "--format", "{{.State.Pid}}", name], check=True,
                                 capture_output=True, text=True).stdout)
        stats = subprocess.run([engine, "stats", "--no-stream", "--format", "json", name],
                               capture_output=True, text=True)
        return elapsed, rss_mb(pid), _cgroup_mb(stats.stdout)
    finally:
        subprocess.run([engine, "rm", "-f", "-t", "10", name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def _cgroup_mb(stats_json: str) -> float:
    """podman's `stats --format json` mem_usage ("26.5MB / 25.2GB"), in MB; NaN if unknown."""
    try:
        entry = json.loads(stats_json)[0]
        usage = entry.get("mem_usage") or entry.get("MemUsage") or ""
        number = usage.split("/")[0].strip()
        for unit, scale in (("kB", 1e-3), ("MB", 1.0), ("GB", 1e3), ("KiB", 1 / 1024), ("MiB", 1.0),
                            ("GiB", 1024.0), ("B", 1e-6)):
            if number.endswith(unit):
                return float(number[: -len(unit)]) * scale
    except (ValueError, IndexError, KeyError):
        pass
    return float("nan")


def image_size_mb(engine: str, image: str) -> float:
    out = subprocess.run([engine, "image", "inspect", "--format", "{{.Size}}", image], check=True,
                         capture_output=True, text=True)
    return int(out.stdout.strip()) / 1e6


def interpreter_floor() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--container", metavar="IMAGE", help="also time this image (built by "
                        "scripts/container.sh build), alternating with the process runs")
    parser.add_argument("--engine", default="podman", help="podman or docker (default podman)")
    for name in SURFACES:
        parser.add_argument(f"--compare-{name}", action="store_true", help=f"also time brokers with the {name} "
                            f"off ({SURFACES[name]} empty), alternating with the default runs (every surface on)")
    args = parser.parse_args()
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: every start compiles its modules (unset it to "
              "measure what a user sees)")
    times, rsses, floors, ctimes0, crss0, ratios = [], [], [], [], [], []
    cpus, ccpus, cpu_ratios = [], [], []
    ctimes, crsses, cgroups = [], [], []
    compared = [name for name in SURFACES if getattr(args, f"compare_{name}")]
    off_times: dict[str, list[float]] = {name: [] for name in compared}
    off_rsses: dict[str, list[float]] = {name: [] for name in compared}
    for _ in range(args.runs):
        floors.append(interpreter_floor())
        t, r, c = one_run()
        times.append(t)
        rsses.append(r)
        cpus.append(c)
        for name in compared:
            t_off, r_off, _ = one_run(off=(name,))
            off_times[name].append(t_off)
            off_rsses[name].append(r_off)
        t0, r0, c0 = one_run(canned=True)
        ctimes0.append(t0)
        crss0.append(r0)
        ccpus.append(c0)
        ratios.append(t / t0)
        cpu_ratios.append(c / c0)
        if args.container:
            ct, cr, cg = container_run(args.engine, args.container)
            ctimes.append(ct)
            crsses.append(cr)
            cgroups.append(cg)
    med_t, med_floor = statistics.median(times), statistics.median(floors)
    print(f"runs: {args.runs} (python {sys.version.split()[0]}, pid {os.getpid()})")
    print(f"start-up to first ApiVersions answer: median {med_t * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); target < 500 ms")
    print(f"bare interpreter start:               median {med_floor * 1000:.0f} ms; "
          f"ratio broker/interpreter {med_t / med_floor:.1f}x")
    print(f"canned-reply asyncio server:          median {statistics.median(ctimes0) * 1000:.0f} ms "
          f"(min {min(ctimes0) * 1000:.0f}, max {max(ctimes0) * 1000:.0f}); idle RSS "
          f"{statistics.median(crss0):.1f} MB")
    print(f"ratio broker/canned, pair by pair:    median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}); target <= 1.5x")
    print(f"CPU until the first answer:           broker median {statistics.median(cpus) * 1000:.0f} ms, "
          f"canned {statistics.median(ccpus) * 1000:.0f} ms; ratio pair by pair median "
          f"{statistics.median(cpu_ratios):.2f}x (min {min(cpu_ratios):.2f}, max {max(cpu_ratios):.2f})")
    print(f"idle RSS: median {statistics.median(rsses):.1f} MB; target <= 40 MB")
    for name in compared:
        times_off, rss_off = off_times[name], off_rsses[name]
        print(f"{name + ' off:':<38}median {statistics.median(times_off) * 1000:.0f} ms "
              f"(min {min(times_off) * 1000:.0f}, max {max(times_off) * 1000:.0f}); idle RSS "
              f"{statistics.median(rss_off):.1f} MB; ratio on/off {med_t / statistics.median(times_off):.2f}x")
    if args.container:
        med_c = statistics.median(ctimes)
        print(f"container {args.container} ({args.engine}):")
        print(f"  run to first ApiVersions answer:    median {med_c * 1000:.0f} ms "
              f"(min {min(ctimes) * 1000:.0f}, max {max(ctimes) * 1000:.0f}); "
              f"ratio container/process {med_c / med_t:.1f}x")
        print(f"  idle: broker RSS median {statistics.median(crsses):.1f} MB, "
              f"cgroup memory median {statistics.median(cgroups):.1f} MB")
        print(f"  image size: {image_size_mb(args.engine, args.container):.0f} MB")


if __name__ == "__main__":
    main()
