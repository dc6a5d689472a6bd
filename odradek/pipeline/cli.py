"""``odradek-report``: the reports and the offline compaction from a shell, on Spark ``local[*]``.

    odradek-report all /var/lib/odradek --out report/          # every report + summary.html
    odradek-report latest-offsets /data/broker-1 /data/broker-2 --out out/
    odradek-report expiry-audit /var/lib/odradek --out out/ --retention-minutes 10080
    odradek-report compact /var/lib/odradek --verify           # broker stopped

Every stage prints one progress line to stderr.  Decoding happens once, and
aggregates where the data is: the data source's reader, over splits planned
in this process (``datasource.read_planned``), keeps per split only what the
reports read -- each key's winning commit, group records, transactional
commits and markers, and partial counts for the overview and commit rates
(``aggregate=reports``, :mod:`odradek.pipeline.partial`) -- written to
``<out>/aggregated.parquet`` (by the tasks themselves with pyarrow in a
local session, ``datasource.write_planned``), which every report reads.  ``--every-record``
decodes every record to ``<out>/records.parquet`` instead (the full-record
path; the reports give the same rows), as ``--binary-files`` always does;
``--from-records`` starts from either, written earlier.  The reports are
then computed a few at a time (``--concurrent-reports``); the last line
counts the run's Spark jobs, stages and tasks.  A local session's JVM maps
a class-data archive kept in the user's cache dir (:mod:`.classarchive`).
On a cluster use
``spark-submit`` (docs/PIPELINE.md); ``--master`` here only picks the local
master.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.pipeline.classarchive import ClassArchive

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPORTS = ("overview", "latest-offsets", "group-timeline", "expiry-audit", "commit-rates", "lag", "txn-offsets",
           "transactions", "share-groups", "modern-groups")


class Stages:
    """``[n/total] name: what happened (seconds)`` lines on stderr.

    On long runs, ``progress`` (called every ``every`` seconds while a stage
    runs, e.g. :func:`spark_progress`) adds a line of where Spark is.
    """

    def __init__(self, total: int, progress: Callable[[], str | None] | None = None, every: float = 10.0) -> None:
        self.total = total
        self.n = 0
        self.progress = progress
        self.every = every

    def run(self, name: str, fn: Callable[[], str]) -> None:
        self.n += 1
        started = time.perf_counter()
        print(f"[{self.n}/{self.total}] {name} ...", file=sys.stderr, flush=True)
        done = threading.Event()
        ticker = None
        if self.progress is not None and self.every > 0:
            ticker = threading.Thread(target=self._tick, args=(name, started, done), daemon=True)
            ticker.start()
        try:
            message = fn()
        finally:
            done.set()
            if ticker is not None:
                ticker.join()
        print(f"[{self.n}/{self.total}] {name}: {message} ({time.perf_counter() - started:.1f}s)",
              file=sys.stderr, flush=True)

    def _tick(self, name: str, started: float, done: threading.Event) -> None:
        assert self.progress is not None
        while not done.wait(self.every):
            try:
                line = self.progress()
            except Exception:  # noqa: BLE001 -- progress must never fail the report
                line = None
            if line:
                print(f"[{self.n}/{self.total}] {name}: {line} ({time.perf_counter() - started:.0f}s)",
                      file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        print(f"      {message}", file=sys.stderr, flush=True)


def spark_progress(spark: SparkSession) -> Callable[[], str | None]:
    """Where Spark is: each active stage's finished/running/total tasks, input records and bytes so far.

    Tasks come from the status tracker; records and bytes from Spark's
    status store (the UI's numbers, counted as tasks finish: a stage's
    input, output or shuffle write, whichever is largest), read through the
    JVM.
    """
    sc = spark.sparkContext
    tracker = sc.statusTracker()

    def metrics() -> dict[int, tuple[int, int]]:
        """(records, bytes) so far per active stage id; {} if Spark's internal store is not reachable."""
        try:
            seq = sc._jsc.sc().statusStore().activeStages()
            stages = [seq.apply(i) for i in range(seq.size())]
            return {sd.stageId(): (max(sd.inputRecords(), sd.outputRecords(), sd.shuffleWriteRecords()),
                                   max(sd.inputBytes(), sd.outputBytes(), sd.shuffleWriteBytes()))
                    for sd in stages}
        except Exception:  # noqa: BLE001 -- the store's API is Spark's internal one; tasks alone will do
            return {}

    def line() -> str | None:
        parts = []
        done = metrics()
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is None:
                continue
            text = f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks, {info.numActiveTasks} running"
            if sid in done:
                rows, size = done[sid]
                text += f", {rows:,} records, {size / 2**20:,.1f} MiB in finished tasks"
            parts.append(text)
        return "; ".join(parts) or None

    return line


def _next_job_id(spark: SparkSession) -> int:
    """The id the session's next Spark job gets (ids only grow): where this run's jobs start."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1) + 1


def spark_work(spark: SparkSession, first_job: int = 0) -> str:
    """``Spark: N jobs, M stages, T tasks`` run since job ``first_job`` (skipped stages not counted).

    From the status tracker, which keeps the last ``spark.ui.retainedJobs``
    (1000) jobs: what a run costs Spark, whatever the wall clock says.
    """
    tracker = spark.sparkContext.statusTracker()
    jobs = [j for j in tracker.getJobIdsForGroup(None) if j >= first_job]
    stage_ids = {s for j in jobs if (info := tracker.getJobInfo(j)) is not None for s in info.stageIds}
    ran = [info for s in stage_ids if (info := tracker.getStageInfo(s)) is not None and info.numCompletedTasks]
    return (f"Spark: {len(jobs)} jobs, {len(ran)} stages, {sum(i.numCompletedTasks for i in ran)} tasks"
            + (f" (the last {len(jobs)} retained)" if len(jobs) >= 1000 else ""))


def _concurrency(args: argparse.Namespace, spark: SparkSession, reports: int) -> int:
    """Reports computed at once: ``--concurrent-reports``, else the session's cores (at most 4)."""
    wanted = args.concurrent_reports or min(4, spark.sparkContext.defaultParallelism)
    return max(1, min(wanted, reports))


def _parse_time(raw: str | None) -> int:
    """``--now``: epoch ms or an ISO-8601 time (UTC unless it says otherwise)."""
    if raw is None:
        return int(time.time() * 1000)
    if raw.lstrip("-").isdigit():
        return int(raw)
    t = _dt.datetime.fromisoformat(raw)
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return int(t.timestamp() * 1000)


def _topic_configs(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """``--topic-config orders:cleanup.policy=compact`` (repeatable)."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        topic, sep, kv = item.partition(":")
        key, eq, value = kv.partition("=")
        if not sep or not eq or not topic or not key:
            raise SystemExit(f"odradek-report: --topic-config wants TOPIC:KEY=VALUE, got {item!r}")
        out.setdefault(topic, {})[key] = value
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="odradek-report", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def inputs(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("paths", nargs="*", help="data dirs, parents of data dirs, or partition dirs")
        sp.add_argument("--out", required=True,
                        help="output directory: local, or a Hadoop URI (hdfs://, s3a://) on a cluster")
        sp.add_argument("--records-path", help="where the decoded records go (default: <out>/records.parquet)")
        sp.add_argument("--from-records",
                        help="read an aggregated.parquet or records.parquet written by an earlier run instead")
        sp.add_argument("--every-record", action="store_true",
                        help="decode every record to <out>/records.parquet (no aggregation in the data source)")
        sp.add_argument("--binary-files", action="store_true",
                        help="read through binaryFile + mapInArrow (Hadoop filesystems: hdfs://, s3a://)")
        sp.add_argument("--topics", help="comma-separated topics to read (default: all)")
        sp.add_argument("--master", default="local[*]", help="Spark master for the local session")
        sp.add_argument("--progress-seconds", type=float, default=10,
                        help="a progress line per active Spark stage this often (0: off)")
        sp.add_argument("--split-mb", type=float, default=128,
                        help="MiB of segments per Spark task (0: one task per segment file)")
        sp.add_argument("--no-csv", action="store_true", help="Parquet only")
        sp.add_argument("--quick-jvm", choices=("auto", "on", "off"), default="auto",
                        help="local session only: the JVM with C1 alone and the serial GC (auto: inputs up to 1 GiB)")
        sp.add_argument("--class-archive", choices=("on", "off"), default="on",
                        help="local session only: keep the JVM's loaded classes in an archive in the user's cache "
                             "dir (Java's AppCDS; written by the first run, mapped by later ones)")
        sp.add_argument("--concurrent-reports", type=int, default=0,
                        help="reports computed at once, each its own Spark jobs (0: the session's cores, at most 4)")
        sp.add_argument("--window", default="1 minute", help="commit-rate window (Spark interval)")
        sp.add_argument("--now", help="audit time: epoch ms or ISO-8601 (default: now)")
        sp.add_argument("--retention-minutes", type=int, default=10080, help="offsets.retention.minutes")

    for name in ("all", *REPORTS):
        inputs(sub.add_parser(name, help="every report and summary.html" if name == "all" else f"the {name} report"))

    c = sub.add_parser("compact", help="compact every compacted partition of data dirs (broker stopped)")
    c.add_argument("data_dirs", nargs="+")
    c.add_argument("--verify", action="store_true", help="check every key's newest value survives before the swap")
    c.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                   help="a topic's config (e.g. orders:cleanup.policy=compact); repeatable")
    c.add_argument("--now", help="cleaning time: epoch ms or ISO-8601 (default: now)")
    c.add_argument("--master", default="local[*]")
    c.add_argument("--no-spark", action="store_true", help="run in this process, one partition after another")
    return p


# A short-lived JVM spends much of its CPU in C2, the optimising JIT, compiling code that has
# finished running by the time it is compiled; C1 alone and the serial collector suit a run of a
# minute or two on a few cores.  Longer runs keep the JVM's defaults.
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUICK_JVM_MAX_BYTES = 1 << 30


def _input_bytes(args: argparse.Namespace) -> int:
    """Bytes the run reads: the segments under the inputs, or the ``--from-records`` Parquet (local only)."""
    from odradek.pipeline.decode import find_segments
    from odradek.pipeline.reports import is_local

    if args.from_records:
        root = Path(args.from_records.removeprefix("file:"))
        if not is_local(args.from_records) or not root.exists():
            return QUICK_JVM_MAX_BYTES + 1
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    if args.binary_files or not all(is_local(p) for p in args.paths):
        return QUICK_JVM_MAX_BYTES + 1
    return sum(os.path.getsize(r.path) for r in find_segments([str(p) for p in args.paths]))


def _starts_local(args: argparse.Namespace) -> bool:
    """Whether this run starts its own local session (no active one, not under spark-submit)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is None and "PYSPARK_GATEWAY_PORT" not in os.environ


def jvm_options(choice: str, input_bytes: Callable[[], int]) -> str | None:
    """``--quick-jvm`` (``auto``/``on``/``off``): the local session's JVM options (None: the JVM's defaults).

    ``auto`` takes the quick JVM for inputs up to :data:`QUICK_JVM_MAX_BYTES`
    (``input_bytes`` is only called then); the benchmark asks the same.
    """
    quick = choice == "on" or (choice == "auto" and input_bytes() <= QUICK_JVM_MAX_BYTES)
    return QUICK_JVM_OPTIONS if quick else None


def _jvm_options(args: argparse.Namespace) -> str | None:
    return jvm_options(args.quick_jvm, lambda: _input_bytes(args))


def _session(master: str, binary: bool, jvm_options: str | None = None,
             archive: ClassArchive | None = None) -> tuple[SparkSession, bool]:
    """The session to use, and whether this run owns (and so stops) it.

    An active session (tests, notebooks) is reused as is.  Under
    ``spark-submit`` the master and resources are spark-submit's: the session
    is built from its configuration.  Otherwise a local session is started,
    its JVM with ``jvm_options`` and the class archive's (``archive``, see
    :mod:`odradek.pipeline.classarchive`).
    """
    from pyspark.sql import SparkSession

    from odradek.pipeline import local_session

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    conf = {"spark.sql.execution.arrow.maxRecordsPerBatch": "1"} if binary else {}
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # launched by spark-submit
        builder = SparkSession.builder.appName("odradek-report")
        for k, v in conf.items():
            builder = builder.config(k, v)
        return builder.getOrCreate(), True
    options = " ".join(o for o in (jvm_options, archive.java_options() if archive else None) if o)
    if options:
        conf["spark.driver.extraJavaOptions"] = options
    return local_session(master, conf=conf, data_source=False), True


def _records(spark: SparkSession, args: argparse.Namespace, stages: Stages, names: Sequence[str]) -> DataFrame:
    from odradek.pipeline.datasource import read_binary_files, read_planned, write_planned
    from odradek.pipeline.partial import window_ms
    from odradek.pipeline.reports import is_aggregated, is_local, local_path, parquet_rows

    if args.from_records:
        df = spark.read.parquet(args.from_records)
        kind = "rows" if is_aggregated(df) else "records"
        stages.run("records", lambda: f"{parquet_rows(spark, args.from_records):,} {kind} in {args.from_records}")
        return df
    if not args.paths:
        raise SystemExit("odradek-report: give data dirs (or --from-records)")
    aggregated = not (args.binary_files or args.every_record)
    default_name = "aggregated.parquet" if aggregated else "records.parquet"
    target = args.records_path or f"{args.out.rstrip('/')}/{default_name}"

    def decode() -> str:
        if args.binary_files:
            df = read_binary_files(spark, args.paths)
            if args.topics:
                df = df.where(df.topic.isin([t.strip() for t in args.topics.split(",")]))
        else:
            options = {"splitBytes": str(int(args.split_mb * 2**20))}
            if args.topics:
                options["topics"] = args.topics
            if aggregated:
                options.update(aggregate="reports", windowMs=str(window_ms(args.window)))
            if is_local(target) and spark.sparkContext.master.startswith("local"):
                rows = write_planned(spark, args.paths, local_path(target), **options)  # the tasks write it
                return f"{rows:,} {'rows' if aggregated else 'records'} -> {target}"
            df = read_planned(spark, args.paths, **options)
        df.write.mode("overwrite").parquet(target)
        return f"{parquet_rows(spark, target):,} {'rows' if aggregated else 'records'} -> {target}"
    stages.run("decode", decode)
    return spark.read.parquet(target)


def _report(args: argparse.Namespace, names: Sequence[str]) -> int:
    from odradek.pipeline import reports
    from odradek.pipeline.html import Summary, render

    out = args.out.rstrip("/") or "/"
    if reports.is_local(out):
        Path(out.removeprefix("file:")).mkdir(parents=True, exist_ok=True)
    html_stage = 1 if args.command == "all" else 0
    archive = ClassArchive.for_local_session() if args.class_archive == "on" and _starts_local(args) else None
    spark, owned = _session(args.master, args.binary_files, _jvm_options(args), archive)
    stages = Stages(1 + len(names) + html_stage, spark_progress(spark), args.progress_seconds)
    first_job = _next_job_id(spark)
    try:
        records = _records(spark, args, stages, names)
        now = _parse_time(args.now)
        produced: dict[str, DataFrame] = {}
        sections: dict[str, list[reports.Section]] = {}  # the summary's, each computed once its report is written
        overview_done = threading.Event()
        labels: list[Callable[[dict], str]] = []
        label_lock = threading.Lock()

        def label(row: dict) -> str:
            """The summary's group labels (they need the overview's data dirs: waited for)."""
            overview_done.wait()
            with label_lock:
                if not labels:
                    labels.append(reports.summary_label(produced))
            return labels[0](row)

        def write(name: str, df: DataFrame) -> str:
            try:
                paths = reports.write_report(df, out, name.replace("-", "_"), csv=not args.no_csv)
                produced[name] = spark.read.parquet(paths[0])
            finally:
                if name == "overview":
                    overview_done.set()
            if html_stage:
                sections[name] = reports.summary_sections(name, produced[name], label)
            return f"{reports.parquet_rows(spark, paths[0]):,} rows -> " + ", ".join(paths)

        pool = ThreadPoolExecutor(max_workers=_concurrency(args, spark, len(names)), thread_name_prefix="report")
        running: dict[str, Future[str]] = {}

        def offsets() -> DataFrame | None:
            """The latest-offsets report this run writes (waited for), which expiry-audit and lag read."""
            if "latest-offsets" in running:
                running["latest-offsets"].result()
            return produced.get("latest-offsets")

        builders: dict[str, Callable[[], DataFrame]] = {
            "overview": lambda: reports.overview(records),
            "latest-offsets": lambda: reports.latest_offsets(records),
            "group-timeline": lambda: reports.group_timeline(records),
            "expiry-audit": lambda: reports.expiry_audit(records, now_ms=now,
                                                         retention_ms=args.retention_minutes * 60_000,
                                                         offsets=offsets()),
            "commit-rates": lambda: reports.commit_rates(records, args.window),
            "lag": lambda: reports.consumer_lag(records, offsets()),
            "txn-offsets": lambda: reports.transactional_offsets(records),
            "transactions": lambda: reports.transactions(records),
            "share-groups": lambda: reports.share_groups(records),
            "modern-groups": lambda: reports.modern_groups(records),
        }
        if "overview" not in names:
            overview_done.set()
        try:
            for name in names:
                running[name] = pool.submit(lambda name=name: write(name, builders[name]()))
            for name in names:
                stages.run(name, running[name].result)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if html_stage:
            def summary() -> str:
                page = Summary("Odradek log report", now, [str(p) for p in args.paths] or [args.from_records])
                reports.build_summary(page, produced, sections=sections)
                target = f"{out}/summary.html"
                reports.write_text(spark, target, render(page))
                return target
            stages.run("summary.html", summary)
        stages.note(spark_work(spark, first_job))
        return 0
    finally:
        if owned:
            spark.stop()
            if archive is not None:
                from pyspark import SparkContext

                archive.finish(SparkContext._gateway, stages.note)


def _compact(args: argparse.Namespace) -> int:
    from odradek.pipeline.compact import CompactionError, compact_data_dir

    configs = _topic_configs(args.topic_config)
    now = _parse_time(args.now)
    spark, owned = (None, False) if args.no_spark else _session(args.master, False)
    status = 0
    try:
        stages = Stages(len(args.data_dirs))
        for d in args.data_dirs:
            def run(d: str = d) -> str:
                nonlocal status
                try:
                    results = compact_data_dir(d, now_ms=now, topic_configs=configs, verify=args.verify,
                                               spark=spark, progress=stages.note)
                except CompactionError as exc:
                    status = 1
                    return f"refused: {exc}"
                done = [r for r in results if r.status == "compacted"]
                bad = [r for r in results if r.status == "failed"]
                if bad:
                    status = 1
                before = sum(r.bytes_before for r in done)
                after = sum(r.bytes_after for r in done)
                return (f"{len(done)} compacted, {len(results) - len(done) - len(bad)} unchanged, {len(bad)} failed; "
                        f"{before:,} -> {after:,} bytes")
            stages.run(f"compact {d}", run)
    finally:
        if owned and spark is not None:
            spark.stop()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "compact":
        return _compact(args)
    names = REPORTS if args.command == "all" else (args.command,)
    return _report(args, names)


if __name__ == "__main__":
    sys.exit(main())
