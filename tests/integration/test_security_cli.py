"""``odradek serve`` (uvloop, JSON logs) with SASL_SSL and a second PLAINTEXT listener configured
from a properties file as a Kafka user writes it: TLS clients get in, a plaintext client on the TLS
port is closed and logged, ``odradek health`` probes the TLS port, a start-up mistake names its setting."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from odradek.broker.wire_client import SyncClient, encode
from odradek.testing.security import PLAIN_MODULE, make_security

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ODRADEK = [sys.executable, "-m", "odradek.broker.cli"]


def _events(proc, until: str, timeout: float = 20.0) -> list[dict]:
    events, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        events.append(json.loads(line))
        if events[-1]["event"] == until:
            return events
    proc.kill()
    raise AssertionError(f"no {until}: {events} {proc.stderr.read()}")


def test_serve_sasl_ssl_from_a_properties_file(tmp_path):
    _settings, client = make_security("SASL_SSL", tmp_path / "tls", password="alice-secret")
    props = tmp_path / "server.properties"
    props.write_text("\n".join([
        "listeners=EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map=EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "sasl.enabled.mechanisms=PLAIN",
        f'listener.name.external.plain.sasl.jaas.config={PLAIN_MODULE} required \\',
        '    username="admin" password="admin-secret" user_alice="alice-secret";',
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={tmp_path / 'tls' / 'server.pem'}",
        f"log.dirs={tmp_path / 'data'}",
    ]) + "\n")
    proc = subprocess.Popen([*ODRADEK, "serve", str(props)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        started = _events(proc, "broker.started")[-1]
        tls_port = int(started["listeners"][0].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", tls_port), timeout=5) as s:
            s.sendall(encode(18, 0, 1, {}))
            assert not s.recv(4).startswith(b"\x00")  # no Kafka answer: a TLS alert or a close
        failed = _events(proc, "tls.handshake_failed")[-1]
        assert failed["listener"] == "EXTERNAL"
        with SyncClient("127.0.0.1", tls_port, **client.wire()) as c:
            assert c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False}).brokers[0].port == tls_port
        health = subprocess.run([*ODRADEK, "health", str(props), "--timeout", "5"], capture_output=True, text=True,
                                timeout=30)
        assert health.returncode == 0, health.stderr
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=20)[1]
        assert proc.returncode == 0
        assert "alice-secret" not in rest and "admin-secret" not in rest
    finally:
        proc.kill()


def test_serve_refuses_a_tls_listener_without_a_key(tmp_path):
    out = subprocess.run([*ODRADEK, "serve", "--override", "listeners=SSL://127.0.0.1:0",
                          "--override", f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "ssl.keystore.location" in out.stderr
