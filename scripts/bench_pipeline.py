"""Pipeline throughput: the Spark job (local[2]) vs one Python process, same decoder, one run.

    .venv/bin/python scripts/bench_pipeline.py                  # 4,000,000 records
    .venv/bin/python scripts/bench_pipeline.py --records 400000 --keep /tmp/bench-logs

Generates a ``__consumer_offsets`` log shaped like a busy cluster's (groups
spread over 8 offsets partitions by Kafka's hash, each OffsetCommit request
one batch of 10 partition offsets, a rebalance every few thousand commits,
some OffsetDelete tombstones), written through ``storage.log.Log`` as a
broker writes it, in 16 MiB segments.  Then, best of ``--rounds`` (the
first two arms alternating; then the spark-agg rounds back to back in a
fresh ``local[2]`` session and in a ``local[1]`` one, each warmed up alike,
so that the scaling pair is measured the same way):

- **single**: one process decodes every segment with
  ``odradek.pipeline.decode`` into Arrow batches and aggregates them with
  pyarrow (latest committed offset and commit count per group/topic/partition);
- **spark**: ``spark.read.format("odradek-log")`` on ``local[2]`` (the same
  decoder in the Python workers; the five columns the aggregation needs
  named with ``.schema()``) and the same aggregation in Spark SQL, collected:
  every record crosses into the JVM, one task per segment (before issue 37);
- **spark-agg**: the same read with ``aggregate=latest-offsets``: each task
  keeps only each key's latest commit of its split
  (``odradek.pipeline.partial``), Spark merges keys; splits sized for the
  session's cores (``parallelism``: whole waves of equal splits); on
  ``local[2]`` and then ``local[1]`` (a second session) for the scaling
  ratio.  Both sessions start the JVM ``odradek-report`` would start for
  this input (``--quick-jvm auto``: C1 alone and the serial GC up to 1 GiB).

With ``--report-all N`` it measures ``odradek-report all`` instead (issue
37's second target: 1 M records in <= 20 s): a production-shaped log from
``scripts/gen_offsets_log.py`` (``N`` records, 2,000 groups), then, alternating
per round, the CLI as a user runs it (its own process, JVM start included)
with ``--every-record`` (every record into Spark, the path before the
``reports`` aggregation) and without (the data source aggregates per split),
and with ``--baseline DIR`` the same from another tree (``git archive main
odradek | tar -x -C DIR``): wall time, the stage times from its progress
lines, the driver's peak RSS, the Spark jobs/stages/tasks the run reports,
and a check that every CSV is the same bytes.

Prints records/s of each, their ratios (targets from issue 37: spark-agg
local[2] >= 1.8x local[1] and >= 1.2x the single process) and the
per-record decode cost of the single process (target: <= 2 µs), plus where
that time goes.  Session start-up is reported but not counted: it is paid
once per job, not per record.  The 1-minute load average is printed with
every round: the machine is shared.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.offsets.consumer_protocol import Subscription, encode_subscription  # noqa: E402
from odradek.offsets.records import (  # noqa: E402
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
    partition_for,
)
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.storage.config import LogConfig  # noqa: E402
from odradek.storage.log import Log  # noqa: E402
from odradek.storage.log_manager import OFFSETS_TOPIC, offsets_topic_config  # noqa: E402

PARTITIONS = 8
SEGMENT_BYTES = 16 << 20
PER_REQUEST = 10
T0 = 1_700_000_000_000


def generate(target: Path, records: int, groups: int = 400, distinct: int = 500_000) -> None:
    """Write the benchmark log: ``records`` offset-commit records plus a rebalance now and then.

    The first ``distinct`` records are encoded with storage's encoders; the
    rest re-append those same batches through ``Log.append`` (which assigns
    new offsets, as for any produced batch), so 4 M records take seconds to
    write while every record still costs the decoder a full decode.
    """
    config = dataclasses.replace(offsets_topic_config(LogConfig()), segment_bytes=SEGMENT_BYTES)
    now = [T0]
    logs = [Log.open(target / f"{OFFSETS_TOPIC}-{p}", config, clock=lambda: now[0]) for p in range(PARTITIONS)]
    topics = [f"topic-{i}" for i in range(20)]
    keys: dict[tuple[str, str, int], bytes] = {}
    sub = encode_subscription(Subscription(topics=topics[:2]))
    batches: list[tuple[int, bytes, int]] = []  # (partition, batch, offset-commit records)
    written = 0
    i = 0
    while written < min(records, distinct):
        g = i % groups
        group = f"consumer-group-{g:04d}"
        part = partition_for(group, PARTITIONS)
        ts = T0 + i * 7
        if i % 5000 == g % 5000:  # a rebalance: a new generation record
            value = GroupValue(protocol_type="consumer", generation=i // 5000 + 1, protocol="range",
                               leader="m-0", current_state_timestamp=ts,
                               members=[MemberValue(f"m-{m}", None, f"client-{m}", "/10.0.0.1", 300000, 10000,
                                                    sub, b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff")
                                        for m in range(3)])
            batches.append((part, encode_batch([(encode_key(GroupKey(group)), encode_value(value))],
                                               base_timestamp=ts), 0))
        items = []
        topic = topics[(g % 10) * 2 + (i // groups) % 2]  # each group reads two topics
        for p in range(min(PER_REQUEST, records - written)):
            k = (group, topic, p)
            kb = keys.get(k)
            if kb is None:
                kb = keys[k] = encode_key(OffsetKey(*k))
            if i % 997 == 0 and p == 0:
                items.append((kb, None))  # OffsetDelete
            else:
                items.append((kb, encode_value(OffsetValue(offset=i * 13 + p, leader_epoch=i // 100000,
                                                           metadata="", commit_timestamp=ts))))
        batches.append((part, encode_batch(items, base_timestamp=ts), len(items)))
        written += len(items)
        i += 1
    for part, batch, _n in batches:
        logs[part].append(batch)
    while written < records:
        for part, batch, n in batches:
            if written >= records:
                break
            logs[part].append(batch)
            written += n
    for log in logs:
        log.close()


def single_pass(refs) -> tuple[int, float, float, int]:
    """(records, decode CPU seconds, total wall seconds, result rows): decode to Arrow, aggregate with pyarrow.

    Decode is timed in process CPU time: it is the cost per record, which
    other processes on the machine should not inflate; throughput is wall time.
    """
    import pyarrow as pa

    from odradek.pipeline.decode import decode_segment_file

    cols = ["group_id", "commit_topic", "commit_partition", "offset", "record_type"]
    started = time.perf_counter()
    decode_s = 0.0
    n = 0
    parts = []
    for ref in refs:
        t = time.process_time()
        for batch in decode_segment_file(ref):
            decode_s += time.process_time() - t
            n += batch.num_rows
            parts.append(batch.select(cols))
            t = time.process_time()
        decode_s += time.process_time() - t
    table = pa.Table.from_batches(parts)
    table = table.filter(pa.compute.equal(table["record_type"], "offset_commit"))
    result = table.group_by(["group_id", "commit_topic", "commit_partition"]).aggregate(
        [("offset", "max"), ("offset", "count")])
    return n, decode_s, time.perf_counter() - started, result.num_rows


# the columns the aggregation needs: Python data sources get no column pruning, so a job names them
# (decoding is the same; fewer columns cross into the JVM); the single pass selects the same ones
SPARK_COLUMNS = "record_type string, group_id string, commit_topic string, commit_partition int, offset bigint"


def spark_pass(spark, path: str) -> tuple[int, float, int]:
    import pyspark.sql.functions as F

    started = time.perf_counter()
    df = spark.read.format("odradek-log").option("splitBytes", "0").schema(SPARK_COLUMNS).load(path)  # as before
    rows = (df.groupBy("record_type", "group_id", "commit_topic", "commit_partition")
            .agg(F.max("offset").alias("last"), F.count(F.lit(1)).alias("n")).collect())
    elapsed = time.perf_counter() - started
    n = sum(r["n"] for r in rows)
    return n, elapsed, sum(1 for r in rows if r["record_type"] == "offset_commit")


AGG_COLUMNS = "record_type string, group_id string, commit_topic string, commit_partition int, offset bigint"


def spark_aggregated_pass(spark, path: str) -> tuple[float, int, dict[tuple, int]]:
    """(seconds, keys, latest offset per key) with the data source aggregating per split."""
    import pyspark.sql.functions as F

    started = time.perf_counter()
    df = (spark.read.format("odradek-log").option("aggregate", "latest-offsets")
          .option("parallelism", str(spark.sparkContext.defaultParallelism)).schema(AGG_COLUMNS).load(path)
          .where(F.col("record_type") == "offset_commit"))
    rows = (df.groupBy("group_id", "commit_topic", "commit_partition")
            .agg(F.max("offset").alias("last")).collect())
    elapsed = time.perf_counter() - started
    return elapsed, len(rows), {(r[0], r[1], r[2]): r[3] for r in rows}


def single_latest(refs) -> dict[tuple, int]:
    """The single pass's latest offset per key (the spark-agg pass must give exactly these)."""
    import pyarrow as pa

    from odradek.pipeline.decode import decode_segment_file

    parts = [b.select(["group_id", "commit_topic", "commit_partition", "offset", "record_type"])
             for ref in refs for b in decode_segment_file(ref)]
    table = pa.Table.from_batches(parts)
    table = table.filter(pa.compute.equal(table["record_type"], "offset_commit"))
    got = table.group_by(["group_id", "commit_topic", "commit_partition"]).aggregate([("offset", "max")])
    return {(g, t, p): o for g, t, p, o in zip(*(got.column(i).to_pylist() for i in range(4)), strict=True)}


def warm_up(spark, refs) -> None:
    """Start what a session starts once, before anything is timed: the data source's planner processes
    and one Python worker per core.

    One segment per task (``splitBytes`` 0) over as many segments as the session has cores, so the
    tasks run at once and each core's worker is started here, not in the first timed round (one
    task alone starts one worker).
    """
    cores = spark.sparkContext.defaultParallelism
    paths = [r.path for r in refs[:max(cores, 1)]]
    (spark.read.format("odradek-log").option("splitBytes", "0").option("aggregate", "latest-offsets")
     .schema(AGG_COLUMNS).load(paths).groupBy("record_type").count().collect())


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def decode_breakdown(refs, limit: int = 400_000) -> dict[str, float]:
    """µs per record of each layer on the first segments (>= ``limit`` records; process CPU time, GC paused).

    The columnar path in its three steps, then the row path (``columnar=False``,
    the reference it replaced, which still decodes batches the columnar path
    leaves alone) over the same batches for comparison.
    """
    from odradek.pipeline.decode import _Chunk, _Columnar
    from odradek.protocol.columnar import decode_batches
    from odradek.protocol.records import decode_batch
    from odradek.storage.segment import iter_file_runs

    t_runs = t_records = t_columns = t_rows = 0.0
    n = 0
    gc.disable()
    try:
        for ref in refs:
            fd = os.open(ref.path, os.O_RDONLY)
            try:
                t = time.process_time()
                runs = list(iter_file_runs(fd, 0, os.fstat(fd).st_size))
                t_runs += time.process_time() - t
            finally:
                os.close(fd)
            t = time.process_time()
            decoded = [decode_batches(buf, offsets) for buf, offsets in runs]
            t_records += time.process_time() - t
            builder, out = _Columnar(ref, verify_crc=True), []
            t = time.process_time()
            for cols, (buf, offsets) in zip(decoded, runs, strict=True):
                builder.add_columns(cols, buf, offsets, out)
            t_columns += time.process_time() - t
            n += sum(b.num_rows for b in out)
            t = time.process_time()
            chunk = _Chunk(ref)
            for buf, offsets in runs:
                for off in offsets:
                    chunk.add(*decode_batch(buf, off))
            chunk.to_batch()
            t_rows += time.process_time() - t
            del chunk
            if n >= limit:
                break
    finally:
        gc.enable()
    return {"batch runs (storage.segment.iter_file_runs)": t_runs / n * 1e6,
            "records (protocol.columnar.decode_batches)": t_records / n * 1e6,
            "keys, values, Arrow columns (pipeline.decode)": t_columns / n * 1e6,
            "[row path, before: decode_batch + rows + Arrow]": t_rows / n * 1e6}


_STAGE = re.compile(r"^\[\d+/\d+\] ([\w.-]+): .*\(([\d.]+)s\)$", re.M)
_WORK = re.compile(r"Spark: (\d+) jobs, (\d+) stages, (\d+) tasks")


def _tree_rss(root: int) -> dict[str, list[float]]:
    """RSS (MiB) of ``root`` and its descendants now, by kind: ``driver`` (``root``, the CLI's Python),
    ``jvm`` (Spark's JVM: driver and executor in local mode), ``python-workers`` (the executor's
    Python workers, one entry each); from /proc, Linux only."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    page = os.sysconf("SC_PAGE_SIZE") / 2**20
    out: dict[str, list[float]] = {"driver": [], "jvm": [], "python-workers": []}
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm") as f:
                rss = int(f.read().split()[1]) * page
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except (OSError, IndexError, ValueError):
            continue
        kind = "driver" if pid == root else "jvm" if comm == "java" else "python-workers" if "python" in comm else ""
        if kind:
            out[kind].append(rss)
    return out


class _RssSampler(threading.Thread):
    """Peak RSS of a process tree, sampled every ``every`` seconds: per kind, the largest process."""

    def __init__(self, pid: int, every: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.every, self.stop = pid, every, threading.Event()
        self.peak: dict[str, float] = {}

    def run(self) -> None:
        while not self.stop.wait(self.every):
            for kind, values in _tree_rss(self.pid).items():
                if values:
                    self.peak[kind] = max(self.peak.get(kind, 0.0), max(values))


def _report_run(data: Path, out: Path, master: str, extra: list[str], root: Path = ROOT, memory: bool = False
                ) -> tuple[float, dict[str, float], float, str]:
    """One ``odradek-report all`` process from the tree at ``root``: (wall s, seconds per stage,
    driver peak RSS MiB, Spark's jobs/stages/tasks or ""); with ``memory`` the JVM's and the
    Python workers' peaks are added to the last."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "odradek.pipeline.cli", "all", str(data), "--out", str(out), "--master", master,
           "--progress-seconds", "0" if not memory else "60", "--now", "2024-05-01T00:00", *extra]
    env = {**os.environ, "PYTHONPATH": str(root)}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=root)
    sampler = _RssSampler(proc.pid) if memory else None
    if sampler is not None:
        sampler.start()
    lines = []
    for line in proc.stderr or []:
        lines.append(line)
        if memory:
            print("   " + line.rstrip(), flush=True)
    err = "".join(lines)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if sampler is not None:
        sampler.stop.set()
        sampler.join()
    if status != 0:
        raise SystemExit(f"odradek-report failed:\n{err[-3000:]}")
    found = _WORK.search(err)
    work = found.group(0) if found else ""
    if sampler is not None:
        work += "; peak RSS " + ", ".join(f"{k} {v:,.0f} MiB" for k, v in sampler.peak.items())
    return wall, {m.group(1): float(m.group(2)) for m in _STAGE.finditer(err)}, usage.ru_maxrss / 1024, work


def report_all(records: int, rounds: int, keep: str | None, master: str, baseline: str | None = None,
               every_record: bool = True, memory: bool = False) -> int:
    """``--report-all``: the CLI over a generated log, alternating arms in one run.

    Arms: ``every-record`` (``--every-record``: every record into Spark),
    ``aggregated`` (this tree), and with ``baseline`` ``before`` (the same
    aggregated run from another checkout's tree, e.g. ``git archive`` of main's
    ``odradek/`` unpacked there): the same log, the same machine, in turns.
    """
    data = Path(keep or tempfile.mkdtemp(prefix="odradek-bench-all-"))
    marker = data / f".gen-{records}"
    if not marker.exists():
        shutil.rmtree(data, ignore_errors=True)
        t = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_offsets_log.py"), str(data), "--records",
                        str(records), "--groups", "2000", "--workers", "1"], check=True, stdout=subprocess.DEVNULL)
        marker.touch()
        print(f"generated {records:,} records in {time.perf_counter() - t:.1f}s", flush=True)
    arms: dict[str, tuple[list[str], Path]] = {}
    if baseline:
        arms["before"] = ([], Path(baseline).resolve())
    if every_record:
        arms["every-record"] = (["--every-record"], ROOT)
    arms["aggregated"] = ([], ROOT)
    walls: dict[str, list[float]] = {a: [] for a in arms}
    outs = {a: Path(tempfile.mkdtemp(prefix=f"odradek-bench-{a}-")) for a in arms}
    try:
        for rnd in range(rounds):
            for arm, (extra, root) in arms.items():
                load = _load()
                wall, stages, rss, work = _report_run(data, outs[arm], master, extra, root, memory)
                walls[arm].append(wall)
                print(f"round {rnd + 1} {arm:<12}: {wall:6.1f}s wall, driver RSS {rss:.0f} MiB ({load} before); "
                      + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()) + (f"; {work}" if work else ""),
                      flush=True)
            csvs = sorted(p.name for p in outs["aggregated"].glob("*.csv"))
            differ = sorted({f"{arm}:{n}" for arm in arms for n in csvs
                             if (outs[arm] / n).read_bytes() != (outs["aggregated"] / n).read_bytes()})
            print(f"round {rnd + 1}: {len(csvs)} CSVs, {'all the same bytes' if not differ else 'DIFFER: ' + str(differ)}",
                  flush=True)
    finally:
        for out in outs.values():
            shutil.rmtree(out, ignore_errors=True)
        if keep is None:
            shutil.rmtree(data, ignore_errors=True)
    best = {a: min(w) for a, w in walls.items()}
    print(f"\nodradek-report all, {records:,} records, {master}, best of {rounds} (target <= 20 s): "
          + ", ".join(f"{a} {w:.1f}s" for a, w in best.items())
          + "".join(f"; {a}/aggregated {best[a] / best['aggregated']:.2f}x" for a in best if a != "aggregated")
          + f"; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keep", help="data dir to reuse (generated there if missing)")
    ap.add_argument("--budget", type=float, default=270, help="seconds; later rounds are skipped past it")
    ap.add_argument("--report-all", type=int, metavar="N",
                    help="measure `odradek-report all` over a generated N-record log instead (A/B)")
    ap.add_argument("--master", default="local[2]", help="with --report-all")
    ap.add_argument("--baseline", metavar="DIR",
                    help="with --report-all: another tree (holding odradek/) run as the 'before' arm")
    ap.add_argument("--no-every-record", action="store_true", help="with --report-all: skip the every-record arm")
    ap.add_argument("--memory", action="store_true",
                    help="with --report-all: sample the RSS of the CLI, Spark's JVM and the Python workers every "
                         "second, and echo the CLI's progress lines")
    args = ap.parse_args()
    if args.report_all:
        return report_all(args.report_all, args.rounds, args.keep, args.master, args.baseline,
                          not args.no_every_record, args.memory)

    from odradek.pipeline import local_session
    from odradek.pipeline.cli import jvm_options
    from odradek.pipeline.decode import find_segments

    started = time.perf_counter()
    own = args.keep is None
    data = Path(args.keep or tempfile.mkdtemp(prefix="odradek-bench-"))
    marker = data / f".bench-{args.records}"
    if not marker.exists():
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        t = time.perf_counter()
        generate(data, args.records)
        marker.touch()
        print(f"generated {args.records:,} offset records in {time.perf_counter() - t:.1f}s", flush=True)
    refs = find_segments([str(data)])
    size = sum(os.path.getsize(r.path) for r in refs)
    print(f"log: {len(refs)} segments in {PARTITIONS} partitions, {size / 2**20:.0f} MiB", flush=True)

    # the JVM odradek-report would start for this input (--quick-jvm auto)
    conf = {"spark.driver.extraJavaOptions": jvm} if (jvm := jvm_options("auto", lambda: size)) else {}
    print(f"JVM options: {jvm or 'the defaults'}", flush=True)
    t = time.perf_counter()
    spark = local_session("local[2]", app_name="bench-pipeline", shuffle_partitions=4, conf=conf)
    warm_up(spark, refs)
    print(f"spark session + worker start: {time.perf_counter() - t:.1f}s (not counted)", flush=True)
    setup_s = time.perf_counter() - started

    singles, sparks, aggs, decodes = [], [], [], []
    aggs1: list[float] = []
    expected = single_latest(refs)
    try:
        for rnd in range(args.rounds):
            elapsed = time.perf_counter() - started
            if rnd and elapsed + (elapsed - setup_s) / rnd > args.budget:
                print(f"round {rnd + 1} skipped: would pass the {args.budget:.0f}s budget", flush=True)
                break
            n, decode_s, total_s, groups = single_pass(refs)
            singles.append(n / total_s)
            decodes.append(decode_s / n * 1e6)
            print(f"round {rnd + 1} single: {n:,} records in {total_s:.2f}s = {n / total_s:,.0f} rec/s "
                  f"(decode {decode_s / n * 1e6:.2f} µs/record CPU), {groups:,} partitions", flush=True)
            m, spark_s, sgroups = spark_pass(spark, str(data))
            assert (m, sgroups) == (n, groups), (m, n, sgroups, groups)
            sparks.append(m / spark_s)
            print(f"round {rnd + 1} spark : {m:,} records in {spark_s:.2f}s = {m / spark_s:,.0f} rec/s "
                  f"({_load()})", flush=True)
        # the scaling pair is measured alike: each in a session of its own, warmed up the same way,
        # its rounds back to back (every record into the JVM leaves garbage and a grown heap that
        # the next passes of that session would pay for, on local[2] only)
        spark.stop()
        spark = local_session("local[2]", app_name="bench-pipeline-2", shuffle_partitions=4, conf=conf)
        warm_up(spark, refs)
        for rnd in range(len(singles)):
            agg_s, keys, latest = spark_aggregated_pass(spark, str(data))
            assert latest == expected, "spark-agg disagrees with the single process"
            aggs.append(n / agg_s)
            print(f"round {rnd + 1} spark-agg local[2]: {n:,} records ({keys:,} keys) in {agg_s:.2f}s = "
                  f"{n / agg_s:,.0f} rec/s ({_load()})", flush=True)
        breakdown = decode_breakdown(refs)
        spark.stop()
        spark = local_session("local[1]", app_name="bench-pipeline-1", shuffle_partitions=4, conf=conf)
        warm_up(spark, refs)
        for rnd in range(len(aggs)):
            agg_s, keys, latest = spark_aggregated_pass(spark, str(data))
            assert latest == expected
            aggs1.append(n / agg_s)
            print(f"round {rnd + 1} spark-agg local[1]: {n:,} records in {agg_s:.2f}s = {n / agg_s:,.0f} rec/s "
                  f"({_load()})", flush=True)
    finally:
        spark.stop()
        if own:
            shutil.rmtree(data, ignore_errors=True)

    best_single, best_spark = max(singles), max(sparks)
    print()
    print(f"single process : {best_single:>12,.0f} records/s (best of {len(singles)})")
    print(f"spark local[2] : {best_spark:>12,.0f} records/s (best of {len(sparks)})")
    print(f"ratio          : {best_spark / best_single:.2f}x   (every record into Spark)")
    best_agg, best_agg1 = max(aggs), max(aggs1)
    print(f"spark-agg [2]  : {best_agg:>12,.0f} records/s = {best_agg / best_single:.2f}x single "
          f"(target >= 1.2x), {best_agg / best_spark:.2f}x spark")
    print(f"spark-agg [1]  : {best_agg1:>12,.0f} records/s; local[2]/local[1] = {best_agg / best_agg1:.2f}x "
          f"(target >= 1.8x)")
    print(f"decode         : {min(decodes):.2f} µs/record CPU (target <= 2 µs; median {statistics.median(decodes):.2f})")
    for layer, us in breakdown.items():
        print(f"  {layer:<48} {us:.2f} µs/record")
    print(f"machine        : {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"whole run {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
