"""SCRAM and OAUTHBEARER exchanges in raw frames over TCP: what a client sees, byte for byte.

scramp's client (an independent implementation) computes the SCRAM messages; the frames
are SaslHandshake v1 + SaslAuthenticate (v0-v2) or, after a v0 handshake, Kafka's legacy raw
tokens.  Bad input -- a forged nonce, a wrong proof, garbage and truncated tokens, an unknown
user -- gets SASL_AUTHENTICATION_FAILED with Kafka's one generic text and a closed connection
(or, in raw framing, just the close), and the broker serves on.
"""

from __future__ import annotations

import base64
import json
import ssl
import struct
import time

import pytest
from scramp import ScramClient

from odradek.broker.wire_client import SyncClient, encode
from odradek.testing import ThreadedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
SASL_AUTHENTICATION_FAILED = 58
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def broker():
    overrides = {"connection.failed.authentication.delay.ms": "0",
                 "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
                 "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                     f'{OAUTH_MODULE} required unsecuredValidatorRequiredScope="kafka";'}
    with ThreadedBroker(security={"protocol": "SASL_PLAINTEXT", "username": "alice", "password": "alice-secret"},
                        overrides=overrides) as b:
        yield b


def _connect(b) -> SyncClient:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    return SyncClient(host, int(port))


def _closed(c: SyncClient) -> bool:
    try:
        c.sock.settimeout(5)
        return c.sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


def _handshake(c: SyncClient, mechanism: str, version: int = 1) -> None:
    r = c.request(SASL_HANDSHAKE, version, {"mechanism": mechanism})
    assert r.error_code == 0, r


def _serves_requests(c: SyncClient) -> bool:
    return len(c.request(METADATA, 9, METADATA_ALL).brokers) == 1


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_scram_exchange_over_sasl_authenticate(broker, mechanism, version):
    client = ScramClient([mechanism], "alice", "alice-secret")
    with _connect(broker) as c:
        _handshake(c, mechanism)
        first = c.request(SASL_AUTHENTICATE, version, {"auth_bytes": client.get_client_first().encode()})
        assert first.error_code == 0 and not first.error_message
        client.set_server_first(first.auth_bytes.decode())
        final = c.request(SASL_AUTHENTICATE, version, {"auth_bytes": client.get_client_final().encode()})
        assert final.error_code == 0
        client.set_server_final(final.auth_bytes.decode())  # the broker proved it knows the key
        if version >= 1:
            assert first.session_lifetime_ms == 0 and final.session_lifetime_ms == 0
        assert _serves_requests(c)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_in_legacy_raw_frames(broker, mechanism):
    client = ScramClient([mechanism], "alice", "alice-secret")
    with _connect(broker) as c:
        _handshake(c, mechanism, version=0)
        token = client.get_client_first().encode()
        c.send_raw(struct.pack(">i", len(token)) + token)
        client.set_server_first(c.recv_frame().decode())
        token = client.get_client_final().encode()
        c.send_raw(struct.pack(">i", len(token)) + token)
        client.set_server_final(c.recv_frame().decode())
        assert _serves_requests(c)


def test_legacy_raw_frames_wrong_password_just_closes(broker):
    client = ScramClient(["SCRAM-SHA-256"], "alice", "wrong")
    with _connect(broker) as c:
        _handshake(c, "SCRAM-SHA-256", version=0)
        token = client.get_client_first().encode()
        c.send_raw(struct.pack(">i", len(token)) + token)
        client.set_server_first(c.recv_frame().decode())
        token = client.get_client_final().encode()
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert _closed(c)


def _fails(c: SyncClient, token: bytes, mechanism: str = "SCRAM-SHA-256") -> None:
    r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": token})
    assert r.error_code == SASL_AUTHENTICATION_FAILED
    assert r.error_message == ("Authentication failed during authentication due to invalid credentials "
                               f"with SASL mechanism {mechanism}")
    assert _closed(c)


def _after_server_first(c: SyncClient, password: str = "alice-secret", user: str = "alice") -> ScramClient:
    client = ScramClient(["SCRAM-SHA-256"], user, password)
    _handshake(c, "SCRAM-SHA-256")
    first = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": client.get_client_first().encode()})
    assert first.error_code == 0
    client.set_server_first(first.auth_bytes.decode())
    return client


def test_wrong_password_and_unknown_user_get_the_same_answer(broker):
    with _connect(broker) as c:
        client = _after_server_first(c, password="wrong")
        _fails(c, client.get_client_final().encode())
    with _connect(broker) as c:
        _handshake(c, "SCRAM-SHA-256")
        _fails(c, ScramClient(["SCRAM-SHA-256"], "mallory", "x").get_client_first().encode())
    with _connect(broker) as c:
        assert c.request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0  # serves on


def test_forged_nonce_in_the_final_message(broker):
    with _connect(broker) as c:
        client = _after_server_first(c)
        final = client.get_client_final()
        attrs = dict(kv.split("=", 1) for kv in final.split(","))
        forged = final.replace(f"r={attrs['r']}", f"r={attrs['r'][:-1]}X")
        _fails(c, forged.encode())


@pytest.mark.parametrize("token", [b"", b"\x00\xff", b"n,,n=alice", b"n,,n=alice,r=", b"p=tls-unique,,n=alice,r=x",
                                   b"\xff" * 2000])
def test_garbage_and_truncated_first_tokens(broker, token):
    with _connect(broker) as c:
        _handshake(c, "SCRAM-SHA-256")
        _fails(c, token)


@pytest.mark.parametrize("cut", [1, 10, -1])
def test_truncated_final_token(broker, cut):
    with _connect(broker) as c:
        client = _after_server_first(c)
        final = client.get_client_final().encode()
        _fails(c, final[:cut])


# --- OAUTHBEARER ----------------------------------------------------------------------------------

def _jws(claims: dict) -> str:
    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none'})}.{part(claims)}."


def _oauth_first(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_token_expiry_is_the_session_lifetime(broker):
    now = int(time.time())
    with _connect(broker) as c:
        _handshake(c, "OAUTHBEARER")
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": _oauth_first(
            _jws({"sub": "dev", "iat": now, "exp": now + 600, "scope": ["kafka"]}))})
        assert (r.error_code, r.auth_bytes) == (0, b"")
        assert 590_000 < r.session_lifetime_ms <= 600_000  # the token's exp, minus the time since
        assert _serves_requests(c)


@pytest.mark.parametrize("claims, challenge", [
    ({"sub": "dev", "exp": 1}, {"status": "invalid_token"}),  # expired long ago
    ({"sub": "dev", "exp": "never", "scope": ["kafka"]}, {"status": "invalid_token"}),
    ({"sub": "dev", "exp": 4_000_000_000, "scope": ["other"]}, {"status": "insufficient_scope", "scope": "[kafka]"}),
])
def test_oauthbearer_refusal_is_a_json_challenge_then_58(broker, claims, challenge):
    with _connect(broker) as c:
        _handshake(c, "OAUTHBEARER")
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": _oauth_first(_jws(claims))})
        assert r.error_code == 0 and json.loads(r.auth_bytes) == challenge
        r = c.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert r.error_code == SASL_AUTHENTICATION_FAILED and json.loads(r.error_message) == challenge
        assert _closed(c)


@pytest.mark.parametrize("token", [b"", b"n,,", b"n,,\x01auth=Bearer\x01\x01", b"n,,\x01auth=Basic abc\x01\x01",
                                   b"\x01" * 3])
def test_oauthbearer_garbage_fails_at_once(broker, token):
    with _connect(broker) as c:
        _handshake(c, "OAUTHBEARER")
        _fails(c, token, "OAUTHBEARER")


def test_plaintext_request_to_the_scram_apis_unauthenticated_is_refused(broker):
    """Describe/AlterUserScramCredentials are ordinary requests: closed unanswered before login."""
    with _connect(broker) as c:
        c.send_raw(encode(50, 0, 1, {"users": None}))
        assert _closed(c)


def test_bad_oauthbearer_validator_option_stops_start_up_naming_it():
    from odradek.broker.config import ConfigError

    b = ThreadedBroker(security="SASL_PLAINTEXT", overrides={
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f'{OAUTH_MODULE} required unsecuredValidatorAllowableClockSkewMs="-5";'})
    try:
        with pytest.raises(ConfigError, match="oauthbearer.sasl.jaas.config.*negative"):
            b.start()
    finally:
        b.close()
