"""SCRAM-SHA-256/512 server side, driven by scramp's client (an independent implementation)
and by hand-built messages for what scramp's client never sends."""

from __future__ import annotations

import base64

import pytest
from scramp import ScramClient

from odradek.broker.security import scram
from odradek.broker.security.failures import InvalidCredentialsError, generic_failure_message
from odradek.broker.security.mechanism import MECHANISMS, SaslAuthenticationError, SaslSettings
from odradek.broker.security.scram import (
    SCRAM_MECHANISMS,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)
from odradek.broker.security.scram_store import ScramCredentialStore

MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def _store(*users: tuple[str, str, str], **kw) -> ScramCredentialStore:
    store = ScramCredentialStore(None)
    for name, password, mech in users:
        store.put(name, mech, credential_from_password(SCRAM_MECHANISMS[mech], password, **kw))
    return store


def _server(store, mech="SCRAM-SHA-256"):
    return MECHANISMS[mech](SaslSettings("SASL_PLAINTEXT", credentials=store))


def _exchange(server, client: ScramClient) -> None:
    first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(first.decode())
    final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(final.decode())  # raises unless the server's signature checks out


@pytest.mark.parametrize("mech", MECHS)
def test_scramp_client_authenticates(mech):
    server = _server(_store(("alice", "alice-secret", mech)), mech)
    _exchange(server, ScramClient([mech], "alice", "alice-secret"))
    assert server.is_complete()
    assert server.principal() == "User:alice"
    assert server.session_lifetime_ms() is None


def test_both_mechanisms_are_registered():
    for mech in MECHS:
        assert MECHANISMS[mech](SaslSettings("L")).mechanism == mech


@pytest.mark.parametrize("mech", MECHS)
def test_wrong_password_fails_with_kafkas_generic_text(mech):
    server = _server(_store(("alice", "alice-secret", mech)), mech)
    client = ScramClient([mech], "alice", "wrong")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    with pytest.raises(InvalidCredentialsError) as exc:
        server.evaluate(client.get_client_final().encode())
    assert str(exc.value) == generic_failure_message(mech)
    assert not server.is_complete()


def test_unknown_user_looks_like_a_wrong_password():
    server = _server(_store(("alice", "alice-secret", "SCRAM-SHA-256")))
    client = ScramClient(["SCRAM-SHA-256"], "mallory", "x")
    with pytest.raises(SaslAuthenticationError) as exc:
        server.evaluate(client.get_client_first().encode())
    assert str(exc.value) == generic_failure_message("SCRAM-SHA-256")


def test_user_of_the_other_mechanism_only_is_unknown():
    server = _server(_store(("alice", "alice-secret", "SCRAM-SHA-512")), "SCRAM-SHA-256")
    with pytest.raises(InvalidCredentialsError):
        server.evaluate(b"n,,n=alice,r=abc")


def test_no_store_refuses_everyone():
    with pytest.raises(InvalidCredentialsError):
        _server(None).evaluate(b"n,,n=alice,r=abc")


def test_rfc7677_vector():
    """RFC 7677 section 3: user/pencil, fixed nonces, 4096 iterations; the server-final must match."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    mech = SCRAM_MECHANISMS["SCRAM-SHA-256"]
    store = ScramCredentialStore(None)
    store.put("user", mech.name, credential_from_password(mech, "pencil", salt=salt))
    server = _server(store)
    orig = scram.secure_random_string
    scram.secure_random_string = lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    try:
        first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    finally:
        scram.secure_random_string = orig
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.principal() == "User:user"


def test_server_nonce_is_base36_and_fresh():
    store = _store(("alice", "pw", "SCRAM-SHA-256"))
    nonces = set()
    for _ in range(5):
        first = _server(store).evaluate(b"n,,n=alice,r=CLIENT").decode()
        nonce = first.split(",")[0][2:]
        assert nonce.startswith("CLIENT")
        tail = nonce[len("CLIENT"):]
        assert tail and all(c in "0123456789abcdefghijklmnopqrstuvwxyz" for c in tail)
        nonces.add(tail)
    assert len(nonces) == 5


def _hand_client(mech: str, password: str, first_bare: str, gs2: str = "n,,", server=None,
                 final_nonce: str | None = None, proof_mangle=None) -> tuple[bytes, bytes]:
    """A hand-computed client (RFC 5802 arithmetic) to send what scramp's client never does."""
    m = SCRAM_MECHANISMS[mech]
    server_first = server.evaluate((gs2 + first_bare).encode()).decode()
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    nonce = attrs["r"] if final_nonce is None else final_nonce
    salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
    sp = salted_password(m, password, salt, iterations)
    cred = credential_from_salted_password(m, sp, salt, iterations)
    import hmac as _hmac
    client_key = _hmac.new(sp, b"Client Key", m.hash).digest()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={nonce}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = _hmac.new(cred.stored_key, auth, m.hash).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    if proof_mangle:
        proof = proof_mangle(proof)
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    return server.evaluate(final), _hmac.new(cred.server_key, auth, m.hash).digest()


def test_hand_client_matches_and_server_signature_verifies():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-512")), "SCRAM-SHA-512")
    reply, expected = _hand_client("SCRAM-SHA-512", "pw", "n=alice,r=abc", server=server)
    assert reply == b"v=" + base64.b64encode(expected)


def test_nonce_mismatch_in_final_message_fails():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    with pytest.raises(InvalidCredentialsError) as exc:
        _hand_client("SCRAM-SHA-256", "pw", "n=alice,r=abc", server=server, final_nonce="abcFORGED")
    assert "nonce" in exc.value.detail


def test_final_nonce_without_the_server_part_fails():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    with pytest.raises(InvalidCredentialsError):
        _hand_client("SCRAM-SHA-256", "pw", "n=alice,r=abc", server=server, final_nonce="abc")


@pytest.mark.parametrize("mangle", [lambda p: bytes([p[0] ^ 1]) + p[1:], lambda p: p[:-1], lambda p: p + b"x"])
def test_wrong_or_misshapen_proof_fails(mangle):
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    with pytest.raises(InvalidCredentialsError):
        _hand_client("SCRAM-SHA-256", "pw", "n=alice,r=abc", server=server, proof_mangle=mangle)


def test_authzid_equal_to_the_user_is_accepted():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    _hand_client("SCRAM-SHA-256", "pw", "n=alice,r=abc", gs2="n,a=alice,", server=server)
    assert server.principal() == "User:alice"


def test_authzid_of_another_user_fails_with_kafkas_own_message():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    with pytest.raises(SaslAuthenticationError) as exc:
        server.evaluate(b"n,a=admin,n=alice,r=abc")
    assert not isinstance(exc.value, InvalidCredentialsError)
    assert str(exc.value) == ("Authentication failed: Client requested an authorization id that is "
                              "different from username")


def test_unknown_extension_is_ignored_and_kept_in_the_auth_message():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    _hand_client("SCRAM-SHA-256", "pw", "n=alice,r=abc,foo=bar", server=server)
    assert server.is_complete()


def test_reserved_m_attribute_is_accepted():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    first = server.evaluate(b"n,,m=ext,n=alice,r=abc")
    assert first.startswith(b"r=abc")


def test_tokenauth_extension_fails_without_delegation_tokens():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    with pytest.raises(InvalidCredentialsError):
        server.evaluate(b"n,,n=alice,r=abc,tokenauth=true")


def test_escaped_user_names():
    server = _server(_store(("a,b=c", "pw", "SCRAM-SHA-256")))
    _exchange(server, ScramClient(["SCRAM-SHA-256"], "a,b=c", "pw"))
    assert server.principal() == "User:a,b=c"


def test_short_salt_from_an_admin_client_works():
    """librdkafka's test sets salt b"salt"; scramp's own server would refuse a salt under 12 bytes."""
    mech = SCRAM_MECHANISMS["SCRAM-SHA-256"]
    store = ScramCredentialStore(None)
    store.put("bob", mech.name, credential_from_salted_password(mech, salted_password(mech, "pw", b"salt", 10000),
                                                                 b"salt", 10000))
    server = _server(store)  # (scramp's client refuses it too: the hand-built client here)
    _hand_client("SCRAM-SHA-256", "pw", "n=bob,r=abc", server=server)
    assert server.principal() == "User:bob"


def test_password_is_not_saslprepped():
    """Kafka hashes the UTF-8 password as is: a non-ASCII space is not mapped to a space."""
    mech = SCRAM_MECHANISMS["SCRAM-SHA-256"]
    a = credential_from_password(mech, "pass\u00a0word", salt=b"s" * 16)
    b = credential_from_password(mech, "pass word", salt=b"s" * 16)
    assert a.stored_key != b.stored_key


def test_stored_credential_below_minimum_iterations_is_refused():
    mech = SCRAM_MECHANISMS["SCRAM-SHA-256"]
    store = ScramCredentialStore(None)
    store.put("old", mech.name, credential_from_salted_password(mech, b"k" * 32, b"salt", 1000))
    with pytest.raises(InvalidCredentialsError) as exc:
        _server(store).evaluate(b"n,,n=old,r=abc")
    assert "Iterations 1000" in exc.value.detail


@pytest.mark.parametrize("token", [
    b"", b"\x00", b"garbage", b"n,,", b"n,,n=alice", b"n,,n=alice,r=", b"y,,n=alice,r=abc",
    b"p=tls-unique,,n=alice,r=abc", b"n,,n=al=ice,r=abc", b"n,,n=alice,r=a b", b"\xff\xfe" * 40,
    b"n,,n=alice,r=abc,=x", b"n,,n=alice,r=abc\x00",
])
def test_garbage_and_truncated_client_first_fail(token):
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    with pytest.raises(InvalidCredentialsError):
        server.evaluate(token)
    with pytest.raises(SaslAuthenticationError):  # a failed exchange stays failed
        server.evaluate(b"n,,n=alice,r=abc")


@pytest.mark.parametrize("token", [
    b"", b"c=biws", b"c=biws,r=", b"c=biws,p=AAAA", b"garbage", b"c=bi!s,r=x,p=AAAA", b"c=biws,r=x,p=A",
])
def test_garbage_and_truncated_client_final_fail(token):
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(InvalidCredentialsError):
        server.evaluate(token)
    assert not server.is_complete()


def test_token_after_completion_is_refused_and_principal_needs_completion():
    server = _server(_store(("alice", "pw", "SCRAM-SHA-256")))
    with pytest.raises(RuntimeError):
        server.principal()
    _exchange(server, ScramClient(["SCRAM-SHA-256"], "alice", "pw"))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"n,,n=alice,r=abc")


def test_credentials_never_show_their_keys():
    cred = credential_from_password(SCRAM_MECHANISMS["SCRAM-SHA-256"], "pw")
    text = repr(cred) + str(cred)
    assert base64.b64encode(cred.stored_key).decode() not in text and "hidden" in text


@pytest.mark.parametrize("mech", MECHS)
def test_the_client_sides_of_kafka_python_and_aiokafka(mech):
    """The SCRAM code those clients run on the wire, driven in-process against the server."""
    from aiokafka.conn import ScramAuthenticator
    from kafka.net.sasl.scram import ScramClient as KafkaPythonScram

    store = _store(("u=1,x", "s3cret", mech), ("alice", "s3cret", mech))
    kp = KafkaPythonScram("alice", "s3cret", mech)  # (it does not escape '=' and ',' in names)
    server = _server(store, mech)
    kp.process_server_first_message(server.evaluate(kp.first_message()))
    kp.process_server_final_message(server.evaluate(kp.final_message()))
    assert server.principal() == "User:alice"

    ak = ScramAuthenticator(loop=None, sasl_plain_username="u=1,x", sasl_plain_password="s3cret",
                            sasl_mechanism=mech)
    server = _server(store, mech)
    ak.process_server_first_message(server.evaluate(ak.first_message().encode()).decode())
    ak.process_server_final_message(server.evaluate(ak.final_message().encode()).decode())
    assert server.principal() == "User:u=1,x"
