"""``odradek-report``: every report, the HTML summary, and compaction, as a user runs them."""

from __future__ import annotations

import csv
import re
import shutil

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

import pyarrow.parquet as pq  # noqa: E402

from odradek.pipeline.cli import main  # noqa: E402
from tests.spark.datagen import HOUR, T0  # noqa: E402

pytestmark = pytest.mark.spark


def test_all_reports_and_the_summary(spark, scenario, tmp_path, capsys):
    out = tmp_path / "report"
    rc = main(["all", str(scenario.parent), "--out", str(out), "--now", str(T0 + 3 * HOUR), "--no-csv",
               "--retention-minutes", "1440", "--window", "10 minutes", "--progress-seconds", "0"])
    assert rc == 0
    progress = capsys.readouterr().err
    assert re.findall(r"^\[(\d+)/12\] (\S+): ", progress, re.M) == [
        ("1", "decode"), ("2", "overview"), ("3", "latest-offsets"), ("4", "group-timeline"),
        ("5", "expiry-audit"), ("6", "commit-rates"), ("7", "lag"), ("8", "txn-offsets"), ("9", "transactions"),
        ("10", "share-groups"), ("11", "modern-groups"), ("12", "summary.html")]
    assert re.search(r"^ +Spark: [1-9]\d* jobs, [1-9]\d* stages, [1-9]\d* tasks$", progress, re.M)
    for name in ("aggregated", "overview", "latest_offsets", "group_timeline", "expiry_audit", "commit_rates", "lag",
                 "txn_offsets", "transactions", "share_groups", "modern_groups"):
        assert (out / f"{name}.parquet").is_dir(), name
    audit = pq.read_table(out / "expiry_audit.parquet").to_pylist()
    assert {(r["group_id"], r["topic"], r["partition"]) for r in audit if r["expired"]} == {("simple-app", "orders", 1)}

    page = (out / "summary.html").read_text()
    assert page.count("<svg") == 3  # commit rate, lag, generations
    assert "<script" not in page and "<link" not in page
    assert set(re.findall(r"https?://[^\"' ]+", page)) == {"http://www.w3.org/2000/svg"}  # namespace only
    assert "orders-app" in page and "explicit-expiry" in page
    # KIP-848 / KIP-932 groups as their records leave them: type, group, epoch, live members, records, last event
    section = page.split("<h2>Consumer and share groups (KIP-848, KIP-932)</h2>", 1)[1].split("</table>", 1)[0]
    groups = {tuple(re.findall(r"<td>(.*?)</td>", row)[1:]) for row in re.findall(r"<tr>(.*?)</tr>", section)
              if "<td>" in row}
    assert {(kind, group.rsplit("/", 1)[-1], *rest) for kind, group, *rest in groups} == {
        ("consumer", "cg-app", "3", "1", "16", "group-epoch"), ("share", "share-app", "1", "1", "2", "group-epoch")}

    # a single report from those records, with its CSV: one file, nested columns flattened
    again = tmp_path / "again"
    assert main(["latest-offsets", "--from-records", str(out / "aggregated.parquet"), "--out", str(again)]) == 0
    with open(again / "latest_offsets.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["source_dir"], r["group_id"], r["topic"], int(r["partition"]), int(r["committed_offset"]))
            for r in rows} == scenario.expected_latest()
    assert not (again / "records.parquet").exists()


def test_compact_command(scenario, tmp_path, capsys):
    data = tmp_path / "broker-a"
    shutil.copytree(scenario.dirs["broker-a"], data)
    assert main(["compact", str(data), "--no-spark", "--verify", "--now", str(T0 + HOUR)]) == 0
    err = capsys.readouterr().err
    assert "1 compacted, 0 unchanged, 0 failed" in err
    assert "__consumer_offsets-0: compacted" in err


def test_outputs_on_a_hadoop_filesystem(spark, records, tmp_path, monkeypatch):
    """With --out hdfs://... the reports are Spark directories and the page goes through Hadoop's API."""
    from odradek.pipeline import reports

    monkeypatch.setattr(reports, "is_local", lambda path: False)  # file:// through the Hadoop code path
    base = f"file://{tmp_path}/out"
    written = reports.write_report(reports.overview(records), base, "overview")
    assert written == [f"{base}/overview.parquet", f"{base}/overview.csv"]
    assert (tmp_path / "out" / "overview.csv").is_dir()
    assert reports.parquet_rows(spark, written[0]) == 10  # data dir x topic x record type
    reports.write_text(spark, f"{base}/summary.html", "<p>é</p>")
    assert (tmp_path / "out" / "summary.html").read_text(encoding="utf-8") == "<p>é</p>"


def test_reports_from_the_aggregating_data_source_are_the_every_record_bytes(spark, scenario, tmp_path):
    """`all` aggregates per split (small splits here: many partials to merge); every CSV is the full path's."""
    common = ["--now", str(T0 + 3 * HOUR), "--retention-minutes", "1440", "--window", "10 minutes",
              "--progress-seconds", "0"]
    full, agg = tmp_path / "full", tmp_path / "agg"
    assert main(["all", str(scenario.parent), "--out", str(full), "--every-record", *common]) == 0
    assert main(["all", str(scenario.parent), "--out", str(agg), "--split-mb", "0.004", *common]) == 0
    csvs = sorted(p.name for p in full.glob("*.csv"))
    assert len(csvs) == 10
    for name in csvs:
        assert (agg / name).read_bytes() == (full / name).read_bytes(), name
    assert (agg / "aggregated.parquet").is_dir() and not (agg / "records.parquet").exists()
    assert pq.read_table(agg / "aggregated.parquet").num_rows < pq.read_table(full / "records.parquet").num_rows
    alone = tmp_path / "alone"
    assert main(["lag", str(scenario.parent), "--out", str(alone), *common]) == 0
    assert (alone / "lag.csv").read_bytes() == (full / "lag.csv").read_bytes()


def test_a_small_input_gets_a_quick_jvm(scenario, monkeypatch):
    from odradek.pipeline import cli

    def options(*argv: str) -> str | None:
        return cli._jvm_options(cli._parser().parse_args(["all", *argv, "--out", "/tmp/unused"]))

    assert options(str(scenario.parent)) == cli.QUICK_JVM_OPTIONS
    assert options(str(scenario.parent), "--quick-jvm", "off") is None
    assert options("hdfs://nn/data", "--binary-files") is None  # size unknown: the JVM's defaults
    assert options("hdfs://nn/data", "--binary-files", "--quick-jvm", "on") == cli.QUICK_JVM_OPTIONS
    monkeypatch.setattr(cli, "QUICK_JVM_MAX_BYTES", 10)
    assert options(str(scenario.parent)) is None


def test_long_stages_print_progress_lines(capsys):
    import time

    from odradek.pipeline.cli import Stages

    ticks = iter(["stage 3: 1/4 tasks, 1 running", None, "stage 3: 3/4 tasks, 1 running"] + [None] * 100)
    stages = Stages(2, lambda: next(ticks), every=0.05)
    stages.run("decode", lambda: (time.sleep(0.4), "done")[1])
    err = capsys.readouterr().err
    assert re.search(r"^\[1/2\] decode: stage 3: 1/4 tasks, 1 running \(\d+s\)$", err, re.M)
    assert "3/4 tasks" in err and err.rstrip().endswith("decode: done (0.4s)")


def test_spark_progress_reads_the_active_stages(spark):
    import threading
    import time

    from odradek.pipeline.cli import spark_progress

    line = spark_progress(spark)
    assert line() is None  # nothing running
    seen: list[str] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            got = line()
            if got:
                seen.append(got)
            stop.wait(0.2)

    t = threading.Thread(target=poll)
    t.start()
    try:
        spark.sparkContext.parallelize(range(4), 4).map(lambda x: time.sleep(1.5) or x).collect()
    finally:
        stop.set()
        t.join()
    assert any(re.search(r"stage \d+: \d+/4 tasks, \d+ running", s) for s in seen), seen


@pytest.mark.slow
def test_the_first_local_run_writes_the_jvms_class_archive_and_the_next_maps_it(scenario, tmp_path):
    """Two runs as a user runs them (their own JVM): the first writes the archive, the second uses it."""
    import os
    import subprocess
    import sys

    from odradek.pipeline.classarchive import ClassArchive

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    outs = []
    for run in ("first", "second"):
        out = tmp_path / run
        done = subprocess.run([sys.executable, "-m", "odradek.pipeline.cli", "latest-offsets", str(scenario.parent),
                               "--out", str(out), "--progress-seconds", "0"], env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append((out, done.stderr))
    archives = list((tmp_path / "cache" / "odradek").glob("spark-*.jsa"))
    if ClassArchive.for_local_session(tmp_path / "cache" / "odradek") is None:
        pytest.skip("this Spark's classpath cannot be archived (a conf dir with files on it)")
    assert len(archives) == 1 and archives[0].stat().st_size > 0
    assert "class archive" in outs[0][1] and "class archive" not in outs[1][1]
    assert not list((tmp_path / "cache" / "odradek").glob(".*.tmp"))
    assert (outs[0][0] / "latest_offsets.csv").read_bytes() == (outs[1][0] / "latest_offsets.csv").read_bytes()
