"""Ports as a user meets them with the image: ``scripts/container.sh run`` on another host port,
and the test control endpoint reached through a published port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.container.engine import SCRIPT, free_port, unique

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

ODRADEK = [sys.executable, "-m", "odradek.broker.cli"]
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False}


def _metadata_brokers(port: int, timeout: float = 60.0) -> list[tuple[str, int]]:
    """The brokers a Metadata answer on 127.0.0.1:port names, once the broker answers."""
    from odradek.broker.wire_client import SyncClient

    deadline = time.monotonic() + timeout
    while True:
        try:
            with SyncClient("127.0.0.1", port) as c:
                return [(b.host, b.port) for b in c.request(3, 9, METADATA_ALL).brokers]
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _control(endpoint: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(ODRADEK + ["control", "--endpoint", endpoint, *argv], capture_output=True,
                          text=True, timeout=60)


def test_container_script_run_advertises_the_port_it_publishes_and_the_control_endpoint(engine):
    port, control_port = free_port(), free_port()
    name, volume = unique("script"), unique("vol")
    env = {**os.environ, "ODRADEK_ENGINE": engine.exe, "ODRADEK_IMAGE": engine.image, "ODRADEK_PORT": str(port),
           "ODRADEK_CONTROL_PORT": str(control_port), "ODRADEK_NAME": name, "ODRADEK_VOLUME": volume}
    proc = subprocess.Popen(["bash", str(SCRIPT), "run"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # before the fix: [("localhost", 9092)], another broker or nothing
        assert _metadata_brokers(port) == [("localhost", port)]
        endpoint = f"127.0.0.1:{control_port}"
        added = _control(endpoint, "add_fault", "api=Heartbeat", "error=NOT_COORDINATOR", "times=1")
        assert added.returncode == 0, added.stderr
        assert [f["apis"] for f in json.loads(_control(endpoint, "faults").stdout)] == [["Heartbeat"]]
        captured = _control(endpoint, "captured", "api=Metadata")
        assert captured.returncode == 0 and json.loads(captured.stdout), captured.stderr  # capture is on
    finally:
        engine("rm", "-f", "-t", "0", name, check=False)
        proc.wait(timeout=60)
        engine("volume", "rm", "-f", volume, check=False)


def test_a_bare_control_port_is_reachable_through_a_published_port(engine):
    """``KAFKA_ODRADEK_CONTROL_LISTENER=9644`` (just a port): the image binds it on every
    interface of the container (odradek.control.host=0.0.0.0), not on its unreachable loopback."""
    control_port = free_port()
    c = engine.run(env={"KAFKA_ODRADEK_CONTROL_LISTENER": "9644"}, publish={control_port: 9644})
    c.wait_healthy()
    out = _control(f"127.0.0.1:{control_port}", "clock")
    assert out.returncode == 0, out.stderr + c.logs()[-2000:]
    assert json.loads(out.stdout)["frozen"] is False
    off = _control(f"127.0.0.1:{control_port}", "captured")
    assert off.returncode == 1 and "capture is off" in off.stderr
