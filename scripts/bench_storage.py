"""Storage engine benchmark: append throughput, open+replay speed, event-loop lag under compaction.

Prints the median of several runs of each figure:

- append: 1 KiB batches (10 records of ~90 bytes), fsync.mode=never (sync
  appends) and fsync.mode=always (append_async, 1 and 64 concurrent
  appenders sharing group-commit fsyncs);
- replay: open a 1,000,000-record offsets-like log (keys ~35 B, values
  ~40 B, 100 records per batch) and decode every record, both after a clean
  shutdown (recovery point = log end) and after a crash (every batch's CRC
  re-validated on open);
- loop lag: the worst delay of a coroutine ticking every 5 ms while a 100 MB
  compacted log is cleaned in a worker thread (appends keep going meanwhile).

Targets on the 2-core reference machine: append >= 100 MB/s with fsync never,
replay >= 500,000 records/s, loop lag < 50 ms.  Usage:
``python scripts/bench_storage.py [--runs 3] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog  # noqa: E402

from odradek.protocol.records import encode_batch, iter_batches  # noqa: E402
from odradek.storage.config import FsyncMode, LogConfig  # noqa: E402
from odradek.storage.log import Log  # noqa: E402

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up only


def one_kib_batch(i: int) -> bytes:
    return encode_batch([(b"key-%06d-%d" % (i, j), b"v" * 80) for j in range(10)])


def bench_append_never(tmp: Path, n: int) -> tuple[float, float]:
    batches = [one_kib_batch(i) for i in range(64)]
    size = sum(len(batches[i % 64]) for i in range(n))
    log = Log.open(tmp / "never-0", LogConfig(segment_bytes=256 << 20))
    append = log.append
    t0 = time.perf_counter()
    for i in range(n):
        append(batches[i & 63])
    dt = time.perf_counter() - t0
    log.close()
    shutil.rmtree(tmp / "never-0")
    return n * 10 / dt, size / dt / 1e6


async def _append_always(tmp: Path, n: int, concurrency: int) -> tuple[float, float, int]:
    batches = [one_kib_batch(i) for i in range(64)]
    log = Log.open(tmp / "always-0", LogConfig(fsync=FsyncMode.ALWAYS))
    per = n // concurrency

    async def producer(k: int) -> None:
        for i in range(per):
            await log.append_async(batches[(k + i) & 63])

    t0 = time.perf_counter()
    await asyncio.gather(*(producer(k) for k in range(concurrency)))
    dt = time.perf_counter() - t0
    total = per * concurrency
    size = sum(len(batches[i & 63]) for i in range(total))
    await log.aclose()
    shutil.rmtree(tmp / "always-0")
    return total * 10 / dt, size / dt / 1e6, total


def build_offsets_log(directory: Path, records: int) -> None:
    log = Log.open(directory, LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=100 << 20))
    groups = 500
    for b in range(records // 100):
        recs = []
        for j in range(100):
            n = b * 100 + j
            key = b"\x00\x01\x00\x08group-%03d\x00\x06orders\x00\x00\x00%c" % (n % groups, n % 64)
            value = b"\x00\x03" + n.to_bytes(8, "big") + b"\xff\xff\xff\xff\x00\x00" + b"\x00" * 14 + b"%012d" % n
            recs.append((key, value))
        log.append(encode_batch(recs), validate=False)
    log.close()


def replay(directory: Path, recovery_point: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    log = Log.open(directory, LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=100 << 20),
                   recovery_point=recovery_point)
    count = 0
    pos = log.log_start_offset
    end = log.log_end_offset
    while pos < end:
        data = log.read(pos, 8 << 20)
        for h, recs in iter_batches(data, verify_crc=False):
            count += len(recs)
            pos = h.base_offset + h.last_offset_delta + 1
    dt = time.perf_counter() - t0
    log.close()
    return dt, count


def build_big_compacted(directory: Path, megabytes: int) -> int:
    log = Log.open(directory, LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=16 << 20))
    templates = []
    for t in range(97):
        templates.append(encode_batch([(b"member-key-%05d" % ((t * 50 + j) * 7 % 20000), b"x" * 200)
                                       for j in range(50)]))
    target = megabytes << 20
    i = 0
    while log.size_bytes < target:
        log.append(templates[i % 97], validate=False)
        i += 1
    log.roll()
    log.close()
    return i


async def _compaction_lag(directory: Path) -> tuple[float, float, int, float]:
    log = Log.open(directory, LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=16 << 20),
                   recovery_point=1 << 62)
    done = False
    worst = 0.0
    appended = 0

    async def probe() -> None:
        nonlocal worst
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            worst = max(worst, time.perf_counter() - t - 0.005)

    async def appender() -> None:
        nonlocal appended
        b = encode_batch([(b"live-key", b"y" * 100)])
        while not done:
            log.append(b)
            appended += 1
            await asyncio.sleep(0.001)

    tasks = [asyncio.ensure_future(probe()), asyncio.ensure_future(appender())]
    await asyncio.sleep(0.05)
    size_in = log.size_bytes
    t0 = time.perf_counter()
    stats = await log.compact()
    dt = time.perf_counter() - t0
    done = True
    await asyncio.gather(*tasks)
    await log.aclose()
    assert stats is not None and stats.bytes_in >= size_in * 0.9
    return worst * 1000, dt, appended, size_in / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = ap.parse_args()
    runs = args.runs
    n_append = 20_000 if args.quick else 60_000
    n_always = 2_000 if args.quick else 6_000
    n_replay = 100_000 if args.quick else 1_000_000
    mb_compact = 10 if args.quick else 100
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-"))
    try:
        print(f"odradek storage benchmark (median of {runs} runs)")
        res = [bench_append_never(base, n_append) for _ in range(runs)]
        print(f"append 1KiB batches, fsync never:        {statistics.median(r[0] for r in res):>12,.0f} records/s"
              f"  {statistics.median(r[1] for r in res):8.1f} MB/s")
        for conc in (1, 64):
            n = n_always // (8 if conc == 1 else 1)
            res2 = [asyncio.run(_append_always(base, n, conc)) for _ in range(runs)]
            print(f"append 1KiB batches, fsync always x{conc:<3d}   {statistics.median(r[0] for r in res2):>12,.0f}"
                  f" records/s  {statistics.median(r[1] for r in res2):8.1f} MB/s")

        src = base / "offsets-0"
        t0 = time.perf_counter()
        build_offsets_log(src, n_replay)
        build_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in src.glob("*.log"))
        for label, rp in (("clean shutdown", 1 << 62), ("after crash, CRC all", 0)):
            res3 = [replay(src, rp) for _ in range(runs)]
            dt = statistics.median(r[0] for r in res3)
            count = res3[0][1]
            assert count == n_replay, count
            print(f"open+replay {count:,} records ({size / 1e6:.0f} MB), {label + ':':<22s}"
                  f" {dt:6.2f} s = {count / dt:>10,.0f} records/s")
        print(f"  (building that log took {build_s:.1f} s)")

        template = base / "template-0"
        build_big_compacted(template, mb_compact)
        res4 = []
        for r in range(runs):
            d = base / f"compact{r}-0"
            shutil.copytree(template, d)
            res4.append(asyncio.run(_compaction_lag(d)))
            shutil.rmtree(d)
        lag = statistics.median(r[0] for r in res4)
        worst = max(r[0] for r in res4)
        print(f"compaction of {res4[0][3]:.0f} MB: {statistics.median(r[1] for r in res4):.1f} s; event-loop lag"
              f" (5 ms probe) median-of-max {lag:.1f} ms, worst {worst:.1f} ms;"
              f" {statistics.median(r[2] for r in res4):,.0f} appends during compaction")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
