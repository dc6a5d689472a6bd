"""Listeners, TLS and the SASL exchange at the frame level: what Kafka answers, and when it closes.

Raw frames over TCP (and TLS) against the real server: the SASL state
machine (only ApiVersions and SaslHandshake before authentication, the
legacy v0 framing, SaslAuthenticate failures and their delay, KIP-368
session expiry and re-authentication), bad input (garbage and truncated
tokens, oversized frames, a plaintext client on a TLS port), and the
advertised address of the listener a request came in on.
"""

from __future__ import annotations

import socket
import ssl
import struct

import pytest

from odradek.broker.wire_client import SaslError, SyncClient, decode, encode
from odradek.testing import Broker, ThreadedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
QUICK_FAIL = {"connection.failed.authentication.delay.ms": "0"}


def _host_port(b) -> tuple[str, int]:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def _closed(client: SyncClient) -> bool:
    """True when the broker closed the connection (nothing more can be read)."""
    try:
        client.sock.settimeout(5)
        return client.sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


def _plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


@pytest.fixture(scope="module")
def sasl_broker():
    with ThreadedBroker(security={"protocol": "SASL_PLAINTEXT", "users": {"bob": "bob-secret"}},
                        overrides=QUICK_FAIL) as b:
        yield b


def _connect(b) -> SyncClient:
    return SyncClient(*_host_port(b))


# --- before authentication --------------------------------------------------------------------

def test_a_request_before_authentication_is_closed_unanswered(sasl_broker):
    with _connect(sasl_broker) as c:
        c.send_raw(encode(METADATA, 9, 1, METADATA_ALL))
        assert _closed(c)


def test_api_versions_then_anything_but_a_handshake_is_closed(sasl_broker):
    with _connect(sasl_broker) as c:
        versions = c.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert versions.error_code == 0
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[SASL_HANDSHAKE] == (0, 1) and served[SASL_AUTHENTICATE] == (0, 2)
        c.send_raw(encode(METADATA, 9, 2, METADATA_ALL))
        assert _closed(c)


def test_unknown_mechanism_is_answered_with_the_enabled_list_then_closed(sasl_broker):
    with _connect(sasl_broker) as c:
        answer = c.request(SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]  # the enabled ones
        assert _closed(c)


def test_another_request_during_the_exchange_gets_illegal_sasl_state_then_close(sasl_broker):
    with _connect(sasl_broker) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
        answer = c.request(METADATA, 9, METADATA_ALL)
        assert answer.brokers == [] and answer.topics == []  # Metadata's error answer
        assert _closed(c)


@pytest.mark.parametrize("token, message", [
    (_plain("alice", "wrong"), "Authentication failed: Invalid username or password"),
    (_plain("mallory", "x"), "Authentication failed: Invalid username or password"),
    (_plain("", "x"), "Authentication failed: username not specified"),
    (_plain("alice", ""), "Authentication failed: password not specified"),
    (b"garbage without separators", "invalid credentials with SASL mechanism PLAIN"),
    (b"\0alice", "invalid credentials with SASL mechanism PLAIN"),  # truncated
    (b"\0alice\0pw\0extra", "invalid credentials with SASL mechanism PLAIN"),
    (b"\0\xff\xfe\0\xff", "Invalid username or password"),  # not UTF-8
    (b"", "invalid credentials with SASL mechanism PLAIN"),
])
def test_bad_plain_tokens_fail_with_58_then_close(sasl_broker, token, message):
    with _connect(sasl_broker) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
        for version in (2,):
            answer = c.request(SASL_AUTHENTICATE, version, {"auth_bytes": token})
            assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
            assert message in answer.error_message
        assert _closed(c)


def test_authzid_other_than_the_user_is_refused(sasl_broker):
    with _connect(sasl_broker) as c:
        c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        answer = c.request(SASL_AUTHENTICATE, 1, {"auth_bytes": _plain("bob", "bob-secret", authzid="alice")})
        assert answer.error_code == 58 and "authorization id" in answer.error_message


@pytest.mark.parametrize("version", [0, 1, 2])
def test_authenticate_each_version_then_requests_flow(sasl_broker, version):
    with _connect(sasl_broker) as c:
        c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        answer = c.request(SASL_AUTHENTICATE, version, {"auth_bytes": _plain("bob", "bob-secret", "bob")})
        assert answer.error_code == 0 and answer.error_message is None and answer.auth_bytes == b""
        assert c.request(METADATA, 9, METADATA_ALL).brokers[0].port == _host_port(sasl_broker)[1]
        # after authentication the SASL APIs are answered ILLEGAL_SASL_STATE and the connection stays
        again = c.request(SASL_AUTHENTICATE, version, {"auth_bytes": b"x"})
        assert again.error_code == 34
        assert again.error_message == "SaslAuthenticate request received after successful authentication"
        assert c.request(METADATA, 9, METADATA_ALL).brokers


def test_legacy_v0_handshake_then_raw_tokens(sasl_broker):
    with _connect(sasl_broker) as c:
        assert c.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = _plain("alice", sasl_broker.client.password, "alice")
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.recv_frame() == b""  # PLAIN's empty final token, as an empty raw frame
        assert c.request(METADATA, 9, METADATA_ALL).brokers


def test_legacy_raw_token_failure_just_closes(sasl_broker):
    with _connect(sasl_broker) as c:
        c.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        token = _plain("alice", "wrong")
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert _closed(c)


def test_frame_larger_than_sasl_receive_size_before_authentication_is_closed(sasl_broker):
    with _connect(sasl_broker) as c:
        c.send_raw(struct.pack(">i", 524289) + b"\0" * 64)
        assert _closed(c)
    with _connect(sasl_broker) as c:  # the broker still serves
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0


def test_garbage_before_the_handshake_is_closed(sasl_broker):
    with _connect(sasl_broker) as c:
        c.send_raw(struct.pack(">i", 3) + b"\x01\x02\x03")
        assert _closed(c)


def test_sasl_apis_on_a_plaintext_listener_get_illegal_sasl_state():
    with ThreadedBroker() as b, _connect(b) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 34
        assert c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b""}).error_code == 34
        assert c.request(METADATA, 9, METADATA_ALL).brokers  # the connection stays


def test_failed_authentication_is_answered_after_the_delay():
    """Kafka holds the failure back (connection.failed.authentication.delay.ms) before closing."""
    with ThreadedBroker(security="SASL_PLAINTEXT",
                        overrides={"connection.failed.authentication.delay.ms": "300"}) as b:
        with _connect(b) as c:
            c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            c.send_raw(encode(SASL_AUTHENTICATE, 2, 9, {"auth_bytes": _plain("alice", "wrong")}))
            c.sock.settimeout(0.1)
            with pytest.raises(TimeoutError):
                c.sock.recv(1)  # nothing yet: the answer waits for the delay
            c.sock.settimeout(5)
            cid, answer = decode(SASL_AUTHENTICATE, 2, c.recv_frame())
            assert (cid, answer.error_code) == (9, 58)
            assert _closed(c)


# --- KIP-368 session lifetime and re-authentication ---------------------------------------------

@pytest.fixture
def reauth_broker():
    with ThreadedBroker(security={"protocol": "SASL_PLAINTEXT", "users": {"bob": "bob-secret"}},
                        overrides={**QUICK_FAIL, "connections.max.reauth.ms": "60000"}) as b:
        b.control("freeze_clock")
        yield b


def _login(c: SyncClient, user: str, password: str, version: int = 2):
    assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
    return c.request(SASL_AUTHENTICATE, version, {"auth_bytes": _plain(user, password)})


def test_session_lifetime_is_announced_and_an_expired_session_is_closed(reauth_broker):
    with _connect(reauth_broker) as c:
        answer = _login(c, "bob", "bob-secret")
        assert answer.error_code == 0 and answer.session_lifetime_ms == 60000
        assert c.request(METADATA, 9, METADATA_ALL).brokers
        reauth_broker.control("advance_clock", ms=60001)
        c.send_raw(encode(METADATA, 9, 5, METADATA_ALL))
        assert _closed(c)


def test_reauthentication_on_the_same_connection_renews_the_session(reauth_broker):
    with _connect(reauth_broker) as c:
        assert _login(c, "bob", "bob-secret").error_code == 0
        reauth_broker.control("advance_clock", ms=59000)
        again = _login(c, "bob", "bob-secret")
        assert again.error_code == 0 and again.session_lifetime_ms == 60000
        reauth_broker.control("advance_clock", ms=2000)  # past the first session's end
        assert c.request(METADATA, 9, METADATA_ALL).brokers


def test_reauthentication_cannot_change_the_principal(reauth_broker):
    with _connect(reauth_broker) as c:
        assert _login(c, "bob", "bob-secret").error_code == 0
        reauth_broker.control("advance_clock", ms=2000)
        answer = _login(c, "alice", reauth_broker.client.password)
        assert answer.error_code == 58 and "Cannot change principals" in answer.error_message
        assert _closed(c)


def test_a_second_reauthentication_within_a_second_is_a_plain_request(reauth_broker):
    with _connect(reauth_broker) as c:
        assert _login(c, "bob", "bob-secret").error_code == 0
        assert _login(c, "bob", "bob-secret").error_code == 0  # the first may come at once
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 34
        assert c.request(METADATA, 9, METADATA_ALL).brokers
        reauth_broker.control("advance_clock", ms=1000)
        assert _login(c, "bob", "bob-secret").error_code == 0


def test_without_a_session_end_a_handshake_after_authentication_is_a_plain_request(sasl_broker):
    with _connect(sasl_broker) as c:
        assert _login(c, "bob", "bob-secret").session_lifetime_ms == 0
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 34
        assert c.request(METADATA, 9, METADATA_ALL).brokers


def test_v0_authenticate_has_no_lifetime_but_the_session_still_ends(reauth_broker):
    with _connect(reauth_broker) as c:
        assert _login(c, "bob", "bob-secret", version=0).error_code == 0
        reauth_broker.control("advance_clock", ms=60001)
        c.send_raw(encode(METADATA, 9, 5, METADATA_ALL))
        assert _closed(c)


# --- TLS ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ssl_broker():
    with ThreadedBroker(security="SSL") as b:
        yield b


def test_plaintext_client_on_a_tls_port_is_closed_and_the_broker_serves_on(ssl_broker, capsys):
    """The defect of issue 23: an SSL listener served plaintext Kafka to anyone."""
    with _connect(ssl_broker) as c:
        c.send_raw(encode(API_VERSIONS, 0, 1, {}))
        assert _closed(c)
    with SyncClient(*_host_port(ssl_broker), **ssl_broker.client.wire()) as c:
        assert c.request(METADATA, 9, METADATA_ALL).brokers


def test_tls_client_that_does_not_trust_the_broker_fails_the_handshake(ssl_broker):
    ctx = ssl.create_default_context()  # the system CAs: not the throw-away one
    with pytest.raises(ssl.SSLCertVerificationError):
        SyncClient(*_host_port(ssl_broker), ssl_context=ctx)


def test_client_certificate_required():
    with ThreadedBroker(security={"protocol": "SSL", "client_auth": "required"}) as b:
        without = b.client.ssl_context(client_certificate=False)
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with SyncClient(*_host_port(b), ssl_context=without) as c:
                c.request(METADATA, 9, METADATA_ALL)  # TLS 1.3: the refusal shows on first use
        with SyncClient(*_host_port(b), **b.client.wire()) as c:
            assert c.request(METADATA, 9, METADATA_ALL).brokers
            principals = b.call(lambda app: [conn.principal for conn in app.server._connections], b.app)
            assert principals == [b.client.client_principal]
            assert b.client.client_principal.startswith("User:CN=client,")


def test_client_certificate_requested_is_optional():
    with ThreadedBroker(security={"protocol": "SSL", "client_auth": "requested"}) as b:
        with SyncClient(*_host_port(b), ssl_context=b.client.ssl_context(client_certificate=False)) as c:
            assert c.request(METADATA, 9, METADATA_ALL).brokers
            principals = b.call(lambda app: [conn.principal for conn in app.server._connections], b.app)
            assert principals == ["User:ANONYMOUS"]


def test_sasl_ssl_principal_is_the_sasl_user():
    with ThreadedBroker(security="SASL_SSL") as b, SyncClient(*_host_port(b), **b.client.wire()) as c:
        assert c.request(METADATA, 9, METADATA_ALL).brokers
        principals = b.call(lambda app: [conn.principal for conn in app.server._connections], b.app)
        assert principals == ["User:alice"]


def test_wrong_password_over_the_wire_client_raises(sasl_broker):
    with pytest.raises(SaslError) as info:
        SyncClient(*_host_port(sasl_broker), sasl_plain=("alice", "nope"))
    assert info.value.code == 58


# --- several listeners --------------------------------------------------------------------------

async def test_each_listener_advertises_its_own_address(tmp_path):
    """Metadata and FindCoordinator answer with the listener the request came in on."""
    from odradek.testing.security import make_security

    settings, client = make_security("SSL", tmp_path / "tls")
    settings.pop("listeners")
    overrides = {**settings,
                 "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                 "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL,PLAINTEXT:PLAINTEXT",
                 "advertised.listeners": "INTERNAL://internal.example:19092,EXTERNAL://127.0.0.1:0",
                 "inter.broker.listener.name": "INTERNAL"}
    async with Broker(overrides=overrides) as b:
        ports = [port for _host, port in b.app.bound]
        answers = {}
        for name, port, ctx in (("INTERNAL", ports[0], None), ("EXTERNAL", ports[1], client.ssl_context()),
                                ("PLAINTEXT", ports[2], None)):
            answers[name] = await _metadata_and_coordinator(port, ctx)
        assert answers["INTERNAL"] == [("internal.example", 19092)] * 2
        assert answers["EXTERNAL"] == [("127.0.0.1", ports[1])] * 2  # port 0: the bound port
        assert answers["PLAINTEXT"] == [("127.0.0.1", ports[2])] * 2  # not advertised: where it is bound


async def _metadata_and_coordinator(port: int, ctx) -> list[tuple[str, int]]:
    from odradek.broker.wire_client import AsyncClient

    c = await AsyncClient.connect("127.0.0.1", port, ssl_context=ctx)
    try:
        meta = await c.request(METADATA, 12, METADATA_ALL)
        coord = await c.request(10, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        return [(meta.brokers[0].host, meta.brokers[0].port),
                (coord.coordinators[0].host, coord.coordinators[0].port)]
    finally:
        await c.close()


def test_tls_listener_on_a_raw_socket_gets_no_kafka_bytes(ssl_broker):
    """Nothing a plaintext client sends on the TLS port is read as a Kafka request."""
    with socket.create_connection(_host_port(ssl_broker), timeout=5) as s:
        s.sendall(encode(METADATA, 9, 1, METADATA_ALL))
        data = s.recv(4096)
        assert not data.startswith(struct.pack(">i", 1)) and (data == b"" or data[:1] == b"\x15")


def test_random_frames_before_authentication_never_get_in(sasl_broker):
    """200 random frames (random API keys, versions and bytes) on fresh connections: each is
    answered (ApiVersions, SaslHandshake) or closed; nothing else is ever answered; the broker serves on."""
    import random

    rng = random.Random(23)
    allowed = {API_VERSIONS, SASL_HANDSHAKE}
    for _ in range(200):
        api_key = rng.choice([0, 1, 3, 8, 10, 11, 17, 18, 19, 36, 60, rng.randrange(-5, 200)])
        body = rng.randbytes(rng.randrange(0, 40))
        frame = struct.pack(">hhi", api_key, rng.randrange(-1, 15), 7) + body
        with _connect(sasl_broker) as c:
            c.send_raw(struct.pack(">i", len(frame)) + frame)
            c.sock.settimeout(5)
            try:
                head = c.sock.recv(8)
            except ConnectionError:
                head = b""
            if head:
                assert api_key in allowed, (api_key, head)
    with SyncClient(*_host_port(sasl_broker), sasl_plain=("bob", "bob-secret")) as c:
        assert c.request(METADATA, 9, METADATA_ALL).brokers


def test_tls_listener_comes_back_after_broker_down(ssl_broker):
    ssl_broker.control("broker_down", seconds=0.2)
    import time

    deadline = time.monotonic() + 10
    while True:
        try:
            with SyncClient(*_host_port(ssl_broker), **ssl_broker.client.wire()) as c:
                assert c.request(METADATA, 9, METADATA_ALL).brokers
                break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_a_large_request_right_behind_the_authentication_in_one_write_is_served(sasl_broker):
    """sasl.server.max.receive.size binds only until authentication, even within one read."""
    with _connect(sasl_broker) as c:
        big = encode(METADATA, 9, 3, {**METADATA_ALL, "topics": [{"name": "t" * 200}] * 3000})
        assert len(big) > 524288
        c.send_raw(encode(SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"})
                   + encode(SASL_AUTHENTICATE, 2, 2, {"auth_bytes": _plain("bob", "bob-secret")}) + big)
        for api_key, version in ((SASL_HANDSHAKE, 1), (SASL_AUTHENTICATE, 2), (METADATA, 9)):
            cid, answer = decode(api_key, version, c.recv_frame())
            assert getattr(answer, "error_code", 0) == 0
        assert cid == 3


def test_metrics_count_authentications_expiries_and_tls_failures():
    import urllib.request

    with ThreadedBroker(security="SASL_SSL", overrides={**QUICK_FAIL, "metrics.port": "0",
                                                        "connections.max.reauth.ms": "60000"}) as b:
        b.control("freeze_clock")
        host, port = _host_port(b)
        with _connect(b) as c:  # plaintext on the TLS port
            c.send_raw(encode(API_VERSIONS, 0, 1, {}))
            assert _closed(c)
        with pytest.raises(SaslError):
            SyncClient(host, port, ssl_context=b.client.ssl_context(), sasl_plain=("alice", "nope"))
        with SyncClient(host, port, **b.client.wire()) as c:
            b.control("advance_clock", ms=60001)
            c.send_raw(encode(METADATA, 9, 5, METADATA_ALL))
            assert _closed(c)
        with SyncClient(host, port, **b.client.wire()) as c:
            text = urllib.request.urlopen(f"http://127.0.0.1:{b.app.metrics_port}/metrics", timeout=10).read().decode()
    assert 'odradek_sasl_authentications_total{listener="SASL_SSL",mechanism="PLAIN",result="succeeded"} 2.0' in text
    assert 'odradek_sasl_authentications_total{listener="SASL_SSL",mechanism="PLAIN",result="failed"} 1.0' in text
    assert 'odradek_expired_connections_killed_total{listener="SASL_SSL"} 1.0' in text
    assert 'odradek_tls_handshake_failures_total{listener="SASL_SSL"} 1.0' in text
    assert 'odradek_listener_connections{listener="SASL_SSL"} 1.0' in text


def test_a_bug_past_the_handlers_closes_that_connection_and_the_broker_serves_on(sasl_broker, monkeypatch,
                                                                               capfd):
    """The SASL exchange answers outside the handlers' own guard (``Connection._refuse``): if
    building such an answer fails (once: an OAUTHBEARER lifetime too big for int64), that
    connection is closed with a logged traceback and every other one is served as before."""
    from odradek.broker import server

    def broken(self, frame, version, correlation_id):
        raise OverflowError("an answer that cannot be encoded")

    monkeypatch.setattr(server.Connection, "_sasl_handshake", broken)
    with _connect(sasl_broker) as c:
        c.send_raw(encode(SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        assert _closed(c)
    assert "request.processing_failed" in capfd.readouterr().err  # ours, not asyncio's fatal error
    monkeypatch.undo()
    with _connect(sasl_broker) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
