"""``odradek serve`` / ``odradek health`` as a user runs them: a real process, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration

ODRADEK = [sys.executable, "-m", "odradek.broker.cli"]


def _serve(data_dir, *extra, env=None):
    cmd = ODRADEK + ["serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                     "--override", f"log.dirs={data_dir}", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _wait_started(proc, timeout=20.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        event = json.loads(line)
        if event["event"] == "broker.started":
            return event
    proc.kill()
    raise AssertionError(f"broker did not start: {proc.stderr.read()}")


def _health(bootstrap):
    return subprocess.run(ODRADEK + ["health", "--bootstrap", bootstrap, "--timeout", "2"],
                          capture_output=True, text=True, timeout=30)


def test_serve_health_sigterm_and_lock(tmp_path):
    proc = _serve(tmp_path)
    try:
        started = _wait_started(proc)
        bootstrap = started["advertised"]
        ok = _health(bootstrap)
        assert ok.returncode == 0, ok.stderr
        assert "healthy" in ok.stdout

        second = _serve(tmp_path)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 1
        assert "in use by another broker" in err

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        stopped = _health(bootstrap)
        assert stopped.returncode == 1
        assert "unhealthy" in stopped.stderr
    finally:
        proc.kill()
        proc.wait()


def test_env_configuration_reaches_the_broker(tmp_path):
    """The container sets KAFKA_* variables; they must be honoured like Kafka's images do."""
    proc = subprocess.Popen(ODRADEK + ["serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0",
                                            "KAFKA_LOG_DIRS": str(tmp_path), "KAFKA_NODE_ID": "7",
                                            "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka.example:29092"})
    try:
        started = _wait_started(proc)
        assert started["node_id"] == 7
        assert started["advertised"] == "kafka.example:29092"
        assert started["data_dir"] == str(tmp_path)
        port = started["listeners"][0].rsplit(":", 1)[1]
        # the container's HEALTHCHECK runs `odradek health` with the same environment
        health = subprocess.run(ODRADEK + ["health"], capture_output=True, text=True, timeout=30,
                                env={**os.environ, "KAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{port}"})
        assert health.returncode == 0, health.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def test_print_config_shows_values_and_sources(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("node.id=3\n")
    out = subprocess.run(ODRADEK + ["serve", str(props), "--print-config", "--override",
                                    "log.level=debug"], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "KAFKA_LOG_FORMAT": "json"})
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert "3" in lines["node.id"] and f"file:{props}" in lines["node.id"]
    assert "(override)" in lines["log.level"]
    assert "(env)" in lines["log.format"]
    assert "(default)" in lines["listeners"]


def test_invalid_setting_stops_startup_naming_it(tmp_path):
    out = subprocess.run(ODRADEK + ["serve", "--override", "node.id=banana"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2
    assert "node.id" in out.stderr
