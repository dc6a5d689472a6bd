"""``odradek-report all`` on a real standalone Spark cluster equals ``local[*]``, byte for byte.

A master and two workers (1 core, small memory each) are started on
127.0.0.1 with what pyspark's wheel ships (``bin/spark-class``; the wheel has
no ``sbin/start-*.sh``), the CLI runs in fresh processes against
``spark://…`` and against ``local[*]``, and every CSV plus the HTML summary
must be the same bytes.  Executors live in other JVMs and start their own
Python workers, so this checks what ``local[*]`` cannot: the data source's
splits and the reports' Python stages pickle, travel and import on a
cluster.  The daemons run in their own process group, torn down whatever
happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

from odradek.testing.process import free_port  # noqa: E402
from tests.spark.datagen import HOUR, T0  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90
RUN_TIMEOUT_S = 420


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": sys.executable,  # executors import this checkout's odradek
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
    })
    return env


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    spark_class = Path(env["SPARK_HOME"]) / "bin" / "spark-class"
    out = log.open("wb")
    return subprocess.Popen([str(spark_class), *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the daemon's process group (its executors too), SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as resp:
            state = json.load(resp)
    except OSError:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[str]:
    """``spark://127.0.0.1:<port>`` of a master with two ALIVE one-core workers."""
    tmp = tmp_path_factory.mktemp("cluster")
    env = _env(tmp)
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(ui)], env, tmp / "master.out")]
    try:
        for i in range(2):
            procs.append(_start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                 "--port", str(free_port()), "--webui-port", str(free_port()),
                                 "--cores", "1", "--memory", "1g", "--work-dir", str(tmp / f"work-{i}"), url],
                                env, tmp / f"worker-{i}.out"))
        deadline = time.monotonic() + START_TIMEOUT_S
        while _alive_workers(ui) < 2:
            dead = [p.args[1] for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f.read_text(errors="replace")[-2000:] for f in sorted(tmp.glob("*.out")))
                pytest.fail(f"standalone cluster did not come up in {START_TIMEOUT_S}s (exited: {dead})\n{logs}")
            time.sleep(1)
        yield url
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _report(master: str, inputs: Path, out: Path, env: dict[str, str]) -> None:
    """``odradek-report all`` in a fresh process (a test session's own SparkSession would be reused)."""
    cmd = [sys.executable, "-m", "odradek.pipeline.cli", "all", str(inputs), "--out", str(out),
           "--master", master, "--now", str(T0 + 3 * HOUR), "--retention-minutes", "1440",
           "--window", "10 minutes", "--split-mb", "0.004",  # several splits, so both workers get tasks
           "--class-archive", "off"]  # nothing written to the user's cache dir (test_cli.py covers the archive)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix in (".csv", ".html")}


# two whole `odradek-report all` runs in fresh JVMs: more than the suite's default 300 s on a busy machine
@pytest.mark.timeout(START_TIMEOUT_S + 2 * RUN_TIMEOUT_S + 60)
def test_all_reports_on_a_standalone_cluster_equal_local(cluster, scenario, tmp_path):
    env = _env(tmp_path)
    _report(cluster, scenario.parent, tmp_path / "cluster", env)
    _report("local[*]", scenario.parent, tmp_path / "local", env)
    on_cluster, local = _outputs(tmp_path / "cluster"), _outputs(tmp_path / "local")
    assert set(local) == {"overview.csv", "latest_offsets.csv", "group_timeline.csv", "expiry_audit.csv",
                          "commit_rates.csv", "lag.csv", "txn_offsets.csv", "transactions.csv", "share_groups.csv",
                          "modern_groups.csv", "summary.html"}
    for name, data in local.items():
        assert on_cluster[name] == data, name
