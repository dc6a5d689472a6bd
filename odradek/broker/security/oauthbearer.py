"""OAUTHBEARER (RFC 7628) with unsecured JWS tokens, for development only.

What Kafka does when no ``sasl.server.callback.handler.class`` is set
(``OAuthBearerSaslServer``, ``OAuthBearerClientInitialResponse``,
``OAuthBearerUnsecuredValidatorCallbackHandler``, ``OAuthBearerUnsecuredJws``,
``OAuthBearerValidationUtils``):

- client initial response ``n,[a=<authzid>],^Aauth=Bearer <token>^A[key=value^A]*^A``;
- the token has three dot-separated parts, the last (signature) empty, a
  header with ``alg`` = ``none``, a numeric ``exp`` not passed, a non-blank
  string principal claim (``sub`` unless ``unsecuredValidatorPrincipalClaimName``),
  an optional numeric ``iat`` not in the future, ``exp`` after ``iat`` and every
  scope of ``unsecuredValidatorRequiredScope`` in the scope claim
  (``unsecuredValidatorScopeClaimName``, default ``scope``), with
  ``unsecuredValidatorAllowableClockSkewMs`` of slack on both times;
- a token that fails is answered, error-free, with a JSON challenge
  (``{"status":"invalid_token"}`` or ``{"status":"insufficient_scope", "scope":"[…]"}``);
  the client must reply with a single 0x01 and only then does the exchange
  fail, with that JSON as the message;
- success answers an empty token; the principal is ``User:<principal claim>``
  and the token's ``exp`` is the credential's expiry (KIP-368 re-authentication).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from dataclasses import dataclass

import structlog

from .failures import InvalidCredentialsError
from .mechanism import SaslAuthenticationError, SaslSettings, register_mechanism

log = structlog.get_logger("odradek.security")

MECHANISM = "OAUTHBEARER"
SEP = "\x01"
JAVA_LONG_MAX = 2**63 - 1
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = rf"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+{SEP})*"
CLIENT_INITIAL_RESPONSE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEP}(?P<kvpairs>{_KVPAIRS}){SEP}")
AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


class IllegalToken(Exception):
    """``OAuthBearerIllegalTokenException``: the reason stays in the log; ``scope`` asks for more."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


@dataclass(frozen=True)
class ValidatorOptions:
    """The JAAS options of ``OAuthBearerLoginModule`` the unsecured validator reads."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: dict[str, str]) -> ValidatorOptions:
        def opt(key: str) -> str:
            return (options.get(f"unsecuredValidator{key}") or "").strip()
        skew = opt("AllowableClockSkewMs")
        try:
            skew_ms = int(skew) if skew else 0
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs is not a number: {skew!r}") from None
        if skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        return cls(opt("PrincipalClaimName") or "sub", opt("ScopeClaimName") or "scope",
                   tuple(opt("RequiredScope").split()), skew_ms)


@dataclass(frozen=True)
class UnsecuredToken:
    principal: str
    expiry_ms: int  # Math.round(exp * 1000)
    scope: frozenset[str]


def _not_json(constant: str) -> None:
    """NaN and Infinity are Python's JSON extensions, not JSON: Kafka's parser refuses them."""
    raise ValueError(f"{constant} is not JSON")


def _decode_part(part: str) -> dict:
    """Base64 (either alphabet, padding optional) JSON object; Java's decoder is lenient likewise."""
    try:
        raw = base64.b64decode(part.replace("-", "+").replace("_", "/") + "=" * (-len(part) % 4), validate=True)
        value = json.loads(raw, parse_constant=_not_json)
    except (binascii.Error, ValueError):
        raise IllegalToken("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(value, dict):
        raise IllegalToken("malformed JSON")
    return value


def _number(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise IllegalToken(f"The '{name}' claim was not of type Number")
    try:
        return float(value)
    except OverflowError:  # an integer past a double: Java's Number.doubleValue() is infinite
        return math.inf if value > 0 else -math.inf


def _scope(claims: dict, name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):  # a string claim is one scope, as Kafka reads it
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise IllegalToken(f"The '{name}' claim was not of type List")
    return frozenset(str(s).strip() for s in value if str(s).strip())


def validate_unsecured(token: str, options: ValidatorOptions, now_ms: int) -> UnsecuredToken:
    """``OAuthBearerUnsecuredJws`` + ``OAuthBearerUnsecuredValidatorCallbackHandler.handleCallback``."""
    if ".." in token:
        raise IllegalToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise IllegalToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    header, claims = _decode_part(parts[0]), _decode_part(parts[1])
    if header.get("alg") != "none":
        raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise IllegalToken("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, options.scope_claim)
    exp = _number(claims, "exp")
    if exp is None:
        raise IllegalToken("No expiration time in JWT")
    principal = claims.get(options.principal_claim)
    if principal is not None and not isinstance(principal, str):
        raise IllegalToken(f"The '{options.principal_claim}' claim was not of type String")
    if principal is None or not principal.strip():
        raise IllegalToken(f"No principal name in JWT claim: {options.principal_claim}")
    iat = _number(claims, "iat")
    skew = options.clock_skew_ms
    if iat is not None and 1000 * iat > now_ms + skew:
        raise IllegalToken(f"The Issued At value ({iat} seconds) was after the indicated time ({now_ms} ms) "
                           f"plus allowable clock skew ({skew} ms)")
    if now_ms - skew >= 1000 * exp:
        raise IllegalToken(f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on "
                           f"or after the Expiration Time value ({exp} seconds)")
    if iat is not None and exp <= iat:
        raise IllegalToken(f"The Expiration Time time ({exp} seconds) was not after the Issued At time "
                           f"({iat} seconds)")
    for required in options.required_scope:
        if required not in scope:
            raise IllegalToken(f"The provided scope ({sorted(scope)}) was missing a required scope ({required})",
                               scope="[" + ", ".join(options.required_scope) + "]")
    # Java's Math.round saturates at Long.MAX_VALUE; the lifetime goes out in an int64 field
    millis = exp * 1000 + 0.5
    return UnsecuredToken(principal, JAVA_LONG_MAX if millis >= JAVA_LONG_MAX else math.floor(millis), scope)


def json_error(scope: str | None) -> str:
    """``OAuthBearerSaslServer.jsonErrorResponse``, byte for byte."""
    if scope is None:
        return '{"status":"invalid_token"}'
    return '{"status":"insufficient_scope", "scope":"' + scope + '"}'


class OAuthBearerSaslServer:
    """One OAUTHBEARER exchange, validating unsecured tokens."""

    mechanism = MECHANISM

    def __init__(self, settings: SaslSettings) -> None:
        self._options = ValidatorOptions.from_jaas(settings.jaas_options)
        self._now_ms = settings.now_ms or (lambda: int(time.time() * 1000))
        self._error: str | None = None
        self._token: UnsecuredToken | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)  # the client acknowledged our challenge
        self._error = None
        m = CLIENT_INITIAL_RESPONSE.fullmatch(token.decode("utf-8", errors="replace"))
        if m is None:
            raise self._invalid("Invalid OAUTHBEARER client first message")
        pairs = [kv.split("=", 1) for kv in m.group("kvpairs").split(SEP) if kv]
        props = dict(pairs)
        auth = props.pop("auth", None)
        if auth is None:
            raise self._invalid("Invalid OAUTHBEARER client first message: 'auth' not specified")
        am = AUTH.fullmatch(auth)
        if am is None:
            raise self._invalid("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if am.group("scheme").lower() != "bearer":
            raise self._invalid(f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
        try:
            validated = validate_unsecured(am.group("token"), self._options, self._now_ms())
        except IllegalToken as exc:
            self._error = json_error(exc.scope)
            log.info("sasl.oauthbearer_token_refused", reason=str(exc))
            return self._error.encode()
        authzid = m.group("authzid") or ""
        if authzid and authzid != validated.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different "
                f"from the token's principal name ({validated.principal})")
        self._token = validated  # extensions are all accepted by the unsecured validator
        return b""

    def _invalid(self, detail: str) -> InvalidCredentialsError:
        log.info("sasl.oauthbearer_failed", reason=detail)
        return InvalidCredentialsError(MECHANISM, detail)

    def is_complete(self) -> bool:
        return self._token is not None

    def principal(self) -> str:
        if self._token is None:
            raise RuntimeError("Authentication exchange has not completed")
        return f"User:{self._token.principal}"

    def session_lifetime_ms(self) -> int | None:
        """The token's ``exp`` in epoch milliseconds (an absolute time, as Kafka's
        ``CREDENTIAL_LIFETIME_MS`` negotiated property), or None before completion."""
        return None if self._token is None else self._token.expiry_ms


register_mechanism(MECHANISM, OAuthBearerSaslServer)
