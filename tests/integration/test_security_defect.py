"""Issue 23's defect: a listener named SSL started and served plaintext Kafka to anyone.

Uses only settings and the in-process broker (no security helper), so it runs
unchanged against a broker without TLS support -- where it fails.
"""

from __future__ import annotations

import socket

import pytest

from odradek.broker.wire_client import encode
from odradek.testing import ThreadedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _start_fails_or_closes_plaintext(overrides: dict) -> bool:
    """True when the SSL listener refuses to start or does not answer plaintext Kafka."""
    try:
        broker = ThreadedBroker(overrides=overrides).start()
    except Exception:  # refused at start-up (a ConfigError naming the settings)
        return True
    try:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(encode(18, 0, 1, {}))
            try:
                data = s.recv(4)
            except ConnectionError:
                return True
            return data == b"" or data[:1] == b"\x15"  # closed, or a TLS alert: no Kafka answer
    finally:
        broker.close()


def test_ssl_listener_without_key_does_not_serve_plaintext():
    assert _start_fails_or_closes_plaintext({"listeners": "SSL://127.0.0.1:0"})


def test_ssl_listener_with_a_key_does_not_answer_plaintext_kafka(tmp_path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    pem = tmp_path / "server.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(pem))
    assert _start_fails_or_closes_plaintext({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": str(pem)})
