"""OAUTHBEARER with unsecured JWS tokens, driven by hand-built client messages (RFC 7628)."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.broker.security import oauthbearer  # noqa: F401  (registers the mechanism)
from odradek.broker.security.failures import InvalidCredentialsError, generic_failure_message
from odradek.broker.security.mechanism import MECHANISMS, SaslAuthenticationError, SaslSettings

NOW_MS = 1_700_000_000_000


def b64url(obj, pad: bool = False) -> str:
    raw = base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()
    return raw if pad else raw.rstrip("=")


def jws(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}.{signature}"


def first_message(token: str, authzid: str = "", scheme: str = "Bearer", extensions: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth={scheme} {token}\x01{extensions}\x01".encode()


def server(**jaas):
    return MECHANISMS["OAUTHBEARER"](SaslSettings("SASL_PLAINTEXT", jaas_options=jaas, now_ms=lambda: NOW_MS))


def claims(**extra):
    base = {"sub": "alice", "exp": NOW_MS / 1000 + 3600, "iat": NOW_MS / 1000}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def test_valid_token_authenticates_with_exp_as_lifetime():
    s = server()
    assert s.evaluate(first_message(jws(claims()))) == b""
    assert s.is_complete()
    assert s.principal() == "User:alice"
    assert s.session_lifetime_ms() == NOW_MS + 3_600_000


def test_fractional_exp_is_rounded_to_milliseconds():
    s = server()
    assert s.evaluate(first_message(jws(claims(exp=NOW_MS / 1000 + 1.2345)))) == b""
    assert s.session_lifetime_ms() == NOW_MS + 1235


def test_padding_is_outside_the_token_grammar():
    """Kafka's client-first grammar allows only [-_.a-zA-Z0-9] in the token: '=' fails there."""
    for filler in ("", "a", "aa"):
        tok = f"{b64url({'alg': 'none'}, pad=True)}.{b64url(claims(x=filler), pad=True)}."
        if "=" in tok:
            break
    assert "=" in tok
    with pytest.raises(InvalidCredentialsError):
        server().evaluate(first_message(tok))


def test_extensions_and_lowercase_scheme_are_accepted():
    s = server()
    assert s.evaluate(first_message(jws(claims()), scheme="bearer", extensions="traceId=123\x01")) == b""
    assert s.principal() == "User:alice"


def _refused(s, message: bytes, expected_json: str) -> None:
    """Kafka's two steps: the JSON challenge with no error, then the client's 0x01, then failure."""
    challenge = s.evaluate(message)
    assert challenge.decode() == expected_json
    assert not s.is_complete()
    with pytest.raises(SaslAuthenticationError) as exc:
        s.evaluate(b"\x01")
    assert str(exc.value) == expected_json
    assert not isinstance(exc.value, InvalidCredentialsError)


INVALID = '{"status":"invalid_token"}'


@pytest.mark.parametrize("token", [
    jws(claims(exp=NOW_MS / 1000 - 1)),  # expired
    jws(claims(exp=NOW_MS / 1000)),  # expires now: "on or after"
    jws(claims(exp=None)),  # no exp
    jws(claims(exp="tomorrow")),  # exp not a number
    jws(claims(sub=None)),  # no principal
    jws(claims(sub="  ")),  # blank principal
    jws(claims(sub=42)),  # principal not a string
    jws(claims(iat=NOW_MS / 1000 + 60)),  # issued in the future
    jws(claims(iat=NOW_MS / 1000 + 7200)),  # exp not after iat (and iat in the future)
    jws(claims(), header={"alg": "HS256"}),  # signed algorithm
    jws(claims(), header={"typ": "JWT"}),  # no alg
    jws(claims(), signature="c2ln"),  # a signature
    jws(claims()) + ".",  # four parts
    jws(claims()).rsplit(".", 2)[0],  # truncated: two parts
    "a..b",
    "bm90anNvbg.bm90anNvbg.",  # not JSON
    "W10.W10.",  # JSON, not objects
])
def test_invalid_tokens_get_the_json_challenge_then_fail(token):
    _refused(server(), first_message(token), INVALID)


def test_required_scope_missing_is_insufficient_scope():
    s = server(unsecuredValidatorRequiredScope="requiredScope other")
    tok = jws(claims(scope=["requiredScope"]))
    _refused(s, first_message(tok), '{"status":"insufficient_scope", "scope":"[requiredScope, other]"}')


def test_required_scope_present_in_list_or_string():
    s = server(unsecuredValidatorRequiredScope="requiredScope")
    assert s.evaluate(first_message(jws(claims(scope=["x", "requiredScope"])))) == b""
    s = server(unsecuredValidatorRequiredScope="requiredScope")
    assert s.evaluate(first_message(jws(claims(scope="requiredScope")))) == b""


def test_custom_claim_names():
    s = server(unsecuredValidatorPrincipalClaimName="user", unsecuredValidatorScopeClaimName="roles",
               unsecuredValidatorRequiredScope="admin")
    assert s.evaluate(first_message(jws(claims(sub=None, user="bob", roles=["admin"])))) == b""
    assert s.principal() == "User:bob"


def test_clock_skew_option_allows_slightly_expired_and_early_tokens():
    skewed = {"unsecuredValidatorAllowableClockSkewMs": "5000"}
    assert server(**skewed).evaluate(first_message(jws(claims(exp=NOW_MS / 1000 - 2, iat=None)))) == b""
    assert server(**skewed).evaluate(first_message(jws(claims(iat=NOW_MS / 1000 + 2)))) == b""
    _refused(server(**skewed), first_message(jws(claims(exp=NOW_MS / 1000 - 6, iat=None))), INVALID)


def test_negative_clock_skew_is_a_configuration_error():
    with pytest.raises(ValueError):
        server(unsecuredValidatorAllowableClockSkewMs="-1")


def test_a_second_token_after_a_challenge_is_evaluated_afresh():
    s = server()
    assert s.evaluate(first_message(jws(claims(exp=NOW_MS / 1000 - 1)))) == INVALID.encode()
    assert s.evaluate(first_message(jws(claims()))) == b""
    assert s.is_complete()


def test_authzid_must_match_the_principal():
    assert server().evaluate(first_message(jws(claims()), authzid="alice")) == b""
    with pytest.raises(SaslAuthenticationError) as exc:
        server().evaluate(first_message(jws(claims()), authzid="admin"))
    assert "different from the token's principal name (alice)" in str(exc.value)


@pytest.mark.parametrize("message", [
    b"", b"\x01", b"garbage", b"n,,", b"n,,\x01", b"n,,\x01\x01",  # no auth
    b"n,,\x01auth=Bearer\x01\x01",  # no token
    b"n,,\x01auth=Basic dXNlcjpwdw==\x01\x01",  # another scheme
    first_message(jws(claims()))[:-1],  # truncated: the final 0x01 missing
    first_message(jws(claims()))[:20],
    b"n,,\x01auth=Bearer a b\x01\x01",
    b"\xff" * 64,
])
def test_garbage_and_truncated_messages_fail_with_the_generic_text(message):
    with pytest.raises(InvalidCredentialsError) as exc:
        server().evaluate(message)
    assert str(exc.value) == generic_failure_message("OAUTHBEARER")


def test_principal_needs_completion():
    s = server()
    with pytest.raises(RuntimeError):
        s.principal()
    assert s.session_lifetime_ms() is None
