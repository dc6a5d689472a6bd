"""The SASL state machine without sockets: session lifetimes (KIP-368) and re-authentication rules."""

from __future__ import annotations

import pytest

from odradek.broker.security import sasl as states
from odradek.broker.security.mechanism import MECHANISMS, SaslAuthenticationError, SaslSettings
from odradek.broker.security.sasl import SaslExchange, SaslListener


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


def _exchange(cap: int = 0, expiry: int | None = None) -> tuple[SaslExchange, Clock]:
    clock = Clock()
    options = {"expiry": str(expiry)} if expiry else {}
    listener = SaslListener("SASL_SSL", ["TEST-EXPIRING", "PLAIN"],
                            {"TEST-EXPIRING": SaslSettings("SASL_SSL", options),
                             "PLAIN": SaslSettings("SASL_SSL", {"user_a": "b"})},
                            {"TEST-EXPIRING": cap, "PLAIN": cap})
    return SaslExchange(listener, clock), clock


@pytest.mark.parametrize("cap, expiry_in, lifetime", [
    (0, None, 0),          # no cap, no credential expiry: unlimited
    (60_000, None, 60_000),  # connections.max.reauth.ms alone
    (0, 5_000, 5_000),     # the credential's expiry alone
    (60_000, 5_000, 5_000),  # the sooner of both
    (3_000, 5_000, 3_000),
])
def test_session_lifetime(cap, expiry_in, lifetime):
    ex, clock = _exchange(cap, None if expiry_in is None else 1_000_000 + expiry_in)
    assert ex.handshake("TEST-EXPIRING", 1)
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
    assert ex.handshake("PLAIN", 1)  # answered, as Kafka does ...
    with pytest.raises(SaslAuthenticationError):  # ... and the next token fails
        ex.evaluate(b"\0a\0b")


def test_unknown_mechanism_and_raw_framing_state():
    ex, _clock = _exchange()
    assert not ex.handshake("GSSAPI", 1)
    assert ex.handshake("PLAIN", 0) and ex.state == states.RAW
