"""The SASL authenticator without sockets: every state against every kind of frame, the exchange's
answers and failures, session lifetimes (KIP-368) and re-authentication rules."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.security import authenticator as states
from odradek.broker.security.authenticator import SaslAuthenticator, SaslListener, SaslStateError
from odradek.broker.security.mechanism import MECHANISMS, SaslAuthenticationError, SaslSettings
from odradek.protocol.errors import ErrorCode


class _Expiring:
    """A one-message mechanism whose credential expires at a given wall time (as OAUTHBEARER's ``exp``)."""

    mechanism = "TEST-EXPIRING"

    def __init__(self, settings: SaslSettings) -> None:
        self.expiry = int(settings.jaas_options.get("expiry", "0")) or None
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if not token:
            raise SaslAuthenticationError("empty")
        self.user = token.decode()
        return b""

    def is_complete(self) -> bool:
        return self.user is not None

    def principal(self) -> str:
        return f"User:{self.user}"

    def session_lifetime_ms(self) -> int | None:
        return self.expiry


@pytest.fixture(autouse=True)
def mechanism():
    MECHANISMS["TEST-EXPIRING"] = _Expiring
    yield
    del MECHANISMS["TEST-EXPIRING"]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _exchange(cap: int = 0, expiry: int | None = None) -> tuple[SaslAuthenticator, Clock]:
    clock = Clock()
    options = {"expiry": str(expiry)} if expiry else {}
    listener = SaslListener("SASL_SSL", ["TEST-EXPIRING", "PLAIN"],
                            {"TEST-EXPIRING": SaslSettings("SASL_SSL", options),
                             "PLAIN": SaslSettings("SASL_SSL", {"user_a": "b"})},
                            {"TEST-EXPIRING": cap, "PLAIN": cap})
    return SaslAuthenticator(listener, clock), clock


@pytest.mark.parametrize("cap, expiry_in, lifetime", [
    (0, None, 0),          # no cap, no credential expiry: unlimited
    (60_000, None, 60_000),  # connections.max.reauth.ms alone
    (0, 5_000, 5_000),     # the credential's expiry alone
    (60_000, 5_000, 5_000),  # the sooner of both
    (3_000, 5_000, 3_000),
])
def test_session_lifetime(cap, expiry_in, lifetime):
    ex, clock = _exchange(cap, None if expiry_in is None else 1_000_000 + expiry_in)
    assert ex.handshake("TEST-EXPIRING", 1).failure is None
    assert ex.evaluate(b"alice") == (b"", lifetime)
    assert ex.complete and ex.principal == "User:alice"
    assert (ex.expires_at is None) == (lifetime == 0)
    clock.now += lifetime or 10**9
    assert ex.expired() == (lifetime != 0)


def test_an_expired_credential_gives_a_session_that_is_already_over():
    ex, _clock = _exchange(0, expiry=999_000)
    ex.handshake("TEST-EXPIRING", 1)
    assert ex.evaluate(b"alice") == (b"", 0)
    assert ex.expired()


def test_reauthentication_keeps_mechanism_and_principal():
    ex, clock = _exchange(cap=10_000)
    ex.handshake("TEST-EXPIRING", 1)
    ex.evaluate(b"alice")
    assert ex.may_reauthenticate()
    ex.start_reauthentication()
    assert ex.state == states.HANDSHAKE
    ex.handshake("TEST-EXPIRING", 1)
    with pytest.raises(SaslAuthenticationError, match="Cannot change principals"):
        ex.evaluate(b"mallory")
    ex, clock = _exchange(cap=10_000)
    ex.handshake("TEST-EXPIRING", 1)
    ex.evaluate(b"alice")
    ex.start_reauthentication()
    assert ex.handshake("PLAIN", 1).failure is None  # answered, as Kafka does ...
    with pytest.raises(SaslAuthenticationError):  # ... and the next token fails
        ex.evaluate(b"\0a\0b")


def test_unknown_mechanism_fails_and_v0_handshake_gives_raw_framing():
    ex, _clock = _exchange()
    reply = ex.handshake("GSSAPI", 1)
    assert reply.answer == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                            "mechanisms": ["TEST-EXPIRING", "PLAIN"]}
    assert reply.failure.delayed and ex.state == states.FAILED
    ex, _clock = _exchange()
    assert ex.handshake("PLAIN", 0).failure is None and ex.state == states.RAW


# --- every state against every kind of frame ------------------------------------------------------

def _frame(api_key: int, version: int = 1, correlation_id: int = 7) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, -1)


FRAMES = {
    "ApiVersions": _frame(18, 3),
    "SaslHandshake": _frame(17),
    "SaslAuthenticate": _frame(36),
    "Metadata": _frame(3),
    "malformed": b"\0\x03",
}


def _in_state(state: str) -> tuple[SaslAuthenticator, Clock]:
    """An authenticator brought to ``state`` by the moves a client makes (COMPLETE: a session that
    ends in 10 s; the variants below name theirs)."""
    ex, clock = _exchange(cap=10_000)
    if state == "handshake":
        ex.api_versions_served(True)
    elif state == "raw":
        ex.handshake("TEST-EXPIRING", 0)
    elif state == "authenticate":
        ex.handshake("TEST-EXPIRING", 1)
    elif state.startswith("complete"):
        ex, clock = _exchange(cap=0 if state == "complete, no end" else 10_000)
        ex.handshake("TEST-EXPIRING", 1)
        ex.authenticate(b"alice")
        if state == "complete, expired":
            clock.now += 10_000
        elif state == "complete, renewed within a second":
            ex.receive(FRAMES["SaslHandshake"])
            ex.handshake("TEST-EXPIRING", 1)
            ex.authenticate(b"alice")
            clock.now += 500
    elif state == "failed":
        ex.handshake("GSSAPI", 1)
    return ex, clock


S, V, H, A, T, R, C = (states.SERVE, states.SERVE_API_VERSIONS, states.DO_HANDSHAKE, states.DO_AUTHENTICATE,
                       states.DO_TOKEN, states.REFUSE, states.CLOSE)
# state -> (ApiVersions, SaslHandshake, SaslAuthenticate, Metadata, malformed): what Kafka does
EXPECTED = {
    "initial": (V, H, C, C, C),
    "handshake": (C, H, C, C, C),
    "raw": (T, T, T, T, T),  # after a v0 handshake every frame is a bare token
    "authenticate": (R, R, A, R, C),
    "complete, no end": (S, S, S, S, C),
    "complete": (S, H, S, S, C),  # a session with an end: a SaslHandshake re-authenticates
    "complete, renewed within a second": (S, S, S, S, C),  # a handshake is then an ordinary request
    "complete, expired": (C, H, C, C, C),  # renewal still allowed; anything else closes
    "failed": (C, C, C, C, C),
}
NEXT = {  # the state after the frame's decision (before the exchange's own answer moves it)
    ("initial", "ApiVersions"): "handshake",
    ("complete", "SaslHandshake"): "handshake",
    ("complete, expired", "SaslHandshake"): "handshake",
}


@pytest.mark.parametrize("state", list(EXPECTED))
@pytest.mark.parametrize("frame", list(FRAMES))
def test_every_state_against_every_frame(state, frame):
    ex, _clock = _in_state(state)
    before = ex.state
    step = ex.receive(FRAMES[frame])
    assert step.action == EXPECTED[state][list(FRAMES).index(frame)]
    if step.action == states.SERVE_API_VERSIONS:
        ex.api_versions_served(True)
    assert ex.state == {"initial": states.INITIAL, "handshake": states.HANDSHAKE}.get(
        NEXT.get((state, frame)), before)
    if step.action in (states.CLOSE, states.REFUSE):
        assert step.reason and step.event  # the connection's close reason and log line
    if frame != "malformed" and step.action != states.DO_TOKEN:
        assert (step.api_key, step.correlation_id) == (struct.unpack_from(">h", FRAMES[frame])[0], 7)
    if state == "complete, expired" and step.action == states.CLOSE and frame != "malformed":
        assert step.expired


def test_api_versions_of_a_version_not_served_keeps_the_initial_state():
    ex, _clock = _in_state("initial")
    assert ex.receive(FRAMES["ApiVersions"]).action == states.SERVE_API_VERSIONS
    ex.api_versions_served(False)
    assert ex.state == states.INITIAL  # the client may retry a lower version


def test_a_refused_request_fails_at_once():
    ex, _clock = _in_state("authenticate")
    assert ex.receive(FRAMES["Metadata"]).action == states.REFUSE
    failure = ex.refused()
    assert not failure.delayed and ex.state == states.FAILED


# --- the exchange's answers and failures ----------------------------------------------------------

@pytest.mark.parametrize("state", ["initial", "handshake"])
@pytest.mark.parametrize("version, after", [(0, states.RAW), (1, states.AUTHENTICATE)])
def test_handshake_answers_the_enabled_mechanisms(state, version, after):
    ex, _clock = _in_state(state)
    reply = ex.handshake("PLAIN", version)
    assert reply == states.Reply({"error_code": ErrorCode.NONE, "mechanisms": ["TEST-EXPIRING", "PLAIN"]})
    assert ex.state == after


@pytest.mark.parametrize("state", ["raw", "authenticate", "complete", "failed"])
def test_a_handshake_the_state_does_not_take_is_a_bug(state):
    ex, _clock = _in_state(state)
    with pytest.raises(SaslStateError):
        ex.handshake("PLAIN", 1)


@pytest.mark.parametrize("state", ["initial", "handshake", "complete", "failed"])
def test_a_token_the_state_does_not_take_is_a_bug(state):
    ex, _clock = _in_state(state)
    with pytest.raises(SaslStateError):
        ex.token(b"alice")


def test_authenticate_completes_with_the_session_lifetime():
    ex, _clock = _in_state("authenticate")
    reply = ex.authenticate(b"alice")
    assert reply.answer == {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": b"",
                            "session_lifetime_ms": 10_000}
    assert reply.lifetime_ms == 10_000 and ex.state == states.COMPLETE and ex.principal == "User:alice"


def test_plain_completes_or_fails_in_one_message():
    ex, _clock = _exchange()
    ex.handshake("PLAIN", 1)
    reply = ex.authenticate(b"\0a\0wrong")
    assert reply.failure is not None and ex.state == states.FAILED
    ex, _clock = _exchange()
    ex.handshake("PLAIN", 1)
    reply = ex.authenticate(b"\0a\0b")
    assert reply.failure is None and reply.lifetime_ms == 0 and ex.complete


def test_a_refused_token_answers_sasl_authentication_failed_after_the_delay():
    ex, _clock = _in_state("authenticate")
    reply = ex.authenticate(b"")
    assert reply.answer == {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": "empty",
                            "auth_bytes": b"", "session_lifetime_ms": 0}
    assert reply.failure.delayed and not reply.failure.bug and ex.state == states.FAILED


def test_a_mechanism_bug_refuses_the_client_with_kafkas_generic_text():
    ex, _clock = _in_state("authenticate")
    ex.server.evaluate = lambda token: 1 / 0
    reply = ex.authenticate(b"alice")
    assert reply.failure.bug and isinstance(reply.failure.error, ZeroDivisionError)
    assert reply.answer["error_message"] == states.GENERIC_FAILURE.format("TEST-EXPIRING")
    assert ex.state == states.FAILED and ex.principal is None


def test_a_raw_token_answers_a_bare_challenge_or_fails_without_an_answer():
    ex, _clock = _in_state("raw")
    assert ex.token(b"alice") == states.Reply(b"", None, 10_000)
    ex, _clock = _in_state("raw")
    reply = ex.token(b"")
    assert reply.answer is None and reply.failure.message == "empty" and ex.state == states.FAILED


def test_reauthentication_to_another_mechanism_is_answered_then_its_token_fails():
    ex, _clock = _in_state("complete")
    assert ex.receive(FRAMES["SaslHandshake"]).action == states.DO_HANDSHAKE
    assert ex.handshake("PLAIN", 1).failure is None
    reply = ex.authenticate(b"\0a\0b")
    assert "mechanism of the first authentication" in reply.failure.message


def test_every_table_entry_names_known_states_and_actions():
    known = {states.INITIAL, states.HANDSHAKE, states.RAW, states.AUTHENTICATE, states.COMPLETE, states.FAILED}
    assert set(states.FRAMES) == set(states.TRANSITIONS) == known
    assert {s for moves in states.TRANSITIONS.values() for s in moves.values()} <= known
