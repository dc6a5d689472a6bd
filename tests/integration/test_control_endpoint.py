"""The control endpoint and ``odradek control``: the same operations from outside the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from odradek.broker import cli
from odradek.broker.control import BrokerControl
from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode
from odradek.testing import ThreadedBroker
from odradek.testing.process import free_port
from tests.integration.test_cli import _serve

pytestmark = pytest.mark.integration

HEARTBEAT = {"group_id": "g", "generation_id": 1, "member_id": "m"}


@pytest.fixture
def controlled():
    with ThreadedBroker(overrides={"odradek.control.listener": "0"}) as b:
        yield b


def _run(capsys, b, *argv) -> tuple[int, str, str]:
    host, port = b.app.control_address
    code = cli.main(["control", "--endpoint", f"{host}:{port}", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_endpoint_is_off_by_default_and_binds_loopback_when_on(broker, controlled):
    assert broker.app.control_address is None and broker.app.control_endpoint is None
    assert controlled.app.control_address[0] == "127.0.0.1"


def test_cli_adds_lists_and_removes_a_fault_that_real_requests_then_get(controlled, capsys):
    code, out, _ = _run(capsys, controlled, "add_fault", "api=Heartbeat", "error=NOT_COORDINATOR", "times=1")
    assert code == 0
    rule_id = json.loads(out)
    with SyncClient("127.0.0.1", controlled.app.endpoint.port) as c:
        assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.NOT_COORDINATOR
        code, out, _ = _run(capsys, controlled, "faults")
        assert (code, json.loads(out)) == (0, [])  # spent
        code, out, _ = _run(capsys, controlled, "coordinator_unavailable", "group=g",
                            "error=COORDINATOR_NOT_AVAILABLE")
        assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        (rule,) = json.loads(_run(capsys, controlled, "faults")[1])
        assert rule["group_id"] == "g" and "Heartbeat" in rule["apis"] and rule["fired"] == 1
        assert _run(capsys, controlled, "remove_fault", f"rule_id={rule['id']}")[1].strip() == "true"
        assert c.request(12, 3, HEARTBEAT).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert rule_id >= 1


def test_cli_queries_the_capture_as_json(controlled, capsys):
    assert _run(capsys, controlled, "set_capture", "max_requests=100")[0] == 0
    with SyncClient("127.0.0.1", controlled.app.endpoint.port) as c:
        c.request(12, 3, HEARTBEAT)
    code, out, _ = _run(capsys, controlled, "captured", "api=Heartbeat", "group_id=g")
    (req,) = json.loads(out)
    assert (code, req["api"], req["body"]["member_id"], req["client_id"]) == (0, "Heartbeat", "m", "odradek-wire")


@pytest.mark.parametrize("argv, message", [
    (["add_fault", "api=Produce", "error=NOT_COORDINATOR"], "NOT_COORDINATOR (16) is not an error Produce"),
    (["add_fault", "api=Heartbeat", "error=NOT_COORDINATOR", "colour=red"], "unexpected keyword argument"),
    (["no_such_thing"], "no operation 'no_such_thing'"),
])
def test_cli_reports_a_refused_call_in_one_line(controlled, capsys, argv, message):
    code, out, err = _run(capsys, controlled, *argv)
    assert code == 1 and out == "" and message in err and "Traceback" not in err


def test_cli_without_an_endpoint_says_how_to_name_one(capsys, tmp_path):
    (tmp_path / "server.properties").write_text("node.id=1\n")
    code = cli.main(["control", "faults", "--config", str(tmp_path / "server.properties")])
    assert code == 2 and "give --endpoint HOST:PORT" in capsys.readouterr().err


def test_an_operation_added_to_the_facade_is_reachable_from_outside(controlled, capsys, monkeypatch):
    monkeypatch.setattr(BrokerControl, "echo", lambda self, text: text.upper(), raising=False)
    assert "echo" in json.loads(_run(capsys, controlled)[1])
    assert json.loads(_run(capsys, controlled, "echo", "text=hi")[1]) == "HI"
    assert controlled.control("echo", text="py") == "PY"


def test_cli_advances_sparing_a_connection_that_just_spoke_and_not_a_silent_one(controlled, capsys):
    """``spare_active`` from outside: the connection heard from within the window stays open
    past ``connections.max.idle.ms``; one silent for longer than the window is closed."""
    import time

    with SyncClient("127.0.0.1", controlled.app.endpoint.port) as silent, \
            SyncClient("127.0.0.1", controlled.app.endpoint.port) as talking:
        silent.request(18, 0, {})
        time.sleep(0.6)
        talking.request(18, 0, {})
        code, out, _ = _run(capsys, controlled, "advance_clock", "ms=3600000", "spare_active=0.3")
        assert code == 0 and json.loads(out) > 0
        assert talking.request(18, 0, {}).error_code == 0
        silent.sock.settimeout(10)
        assert silent.sock.recv(1) == b""  # closed as idle
    code, _, err = _run(capsys, controlled, "advance_clock", "ms=1", "spare_active=-1")
    assert code != 0 and "spare_active must be" in err


def test_a_port_only_endpoint_binds_the_control_host_and_the_cli_takes_seconds(tmp_path):
    """As in the container image (odradek.control.host=0.0.0.0): "just a port" binds every
    interface, so a published port reaches it; ``odradek control`` reads the same settings and
    takes ``advance_clock seconds=5`` as the Python API does."""
    port = free_port()
    env = {"KAFKA_ODRADEK_CONTROL_LISTENER": str(port), "KAFKA_ODRADEK_CONTROL_HOST": "0.0.0.0"}
    proc = _serve(tmp_path, env={**env, "KAFKA_LOG_FORMAT": "json"})
    try:
        listening = _wait_for_event(proc, "control.listening")
        assert (listening["host"], listening["port"]) == ("0.0.0.0", port)
        before = _control(env, "clock")
        assert before.returncode == 0, before.stderr
        after = _control(env, "advance_clock", "seconds=5")
        assert after.returncode == 0, after.stderr
        assert json.loads(after.stdout) >= json.loads(before.stdout)["now_ms"] + 5000
        both = _control(env, "advance_clock", "seconds=1", "ms=500")
        assert json.loads(both.stdout) >= json.loads(after.stdout) + 1500
        bad = _control(env, "advance_clock", "seconds=-1")
        assert bad.returncode == 1 and "forward" in bad.stderr
    finally:
        proc.kill()
        proc.wait()


def _control(env: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek.broker.cli", "control", *argv], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})


def _wait_for_event(proc, name: str, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        event = json.loads(line)
        if event["event"] == name:
            return event
    proc.kill()
    raise AssertionError(f"no {name}: {proc.stderr.read()}")


def test_captured_says_when_capture_is_off(tmp_path):
    """``odradek serve`` captures nothing unless asked: ``captured`` says so (and how to turn it
    on) instead of an empty list a test would take for "no such request"."""
    port = free_port()
    env = {"KAFKA_ODRADEK_CONTROL_LISTENER": str(port)}
    proc = _serve(tmp_path, env={**env, "KAFKA_LOG_FORMAT": "json"})
    try:
        _wait_for_event(proc, "control.listening")
        off = _control(env, "captured", "api=Heartbeat")
        assert off.returncode == 1 and off.stdout == ""
        assert "capture is off" in off.stderr and "set_capture" in off.stderr, off.stderr
        assert _control(env, "set_capture", "max_requests=100").returncode == 0
        on = _control(env, "captured", "api=Heartbeat")
        assert (on.returncode, json.loads(on.stdout)) == (0, [])
    finally:
        proc.kill()
        proc.wait()


def test_captured_in_process_raises_when_capture_is_off(broker):
    from odradek.broker.control import CaptureOff

    assert broker.capture()["max_requests"] == 1000  # the test brokers capture by default
    broker.set_capture(0)
    assert broker.capture() == {"enabled": False, "max_requests": 0, "held": 0}
    with pytest.raises(CaptureOff, match="capture is off"):
        broker.captured("Heartbeat")
    broker.set_capture(10)
    assert broker.captured("Heartbeat") == []
