"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's ``ScramSaslServer`` runs them.

The arithmetic (PBKDF2 ``Hi``, HMAC, H) is the standard library's (importing
scramp for three one-line functions cost a start-up ~20 ms); the exchange is
driven here because Kafka's grammar differs from scramp's server in ways
real deployments hit: Kafka accepts any salt a client chose through
AlterUserScramCredentials (scramp's server refuses salts under 12 bytes),
Kafka's extensions (``tokenauth=true``) and the reserved ``m=`` attribute,
and it neither SASLpreps the user name nor the password.

Kafka's behaviour kept (``ScramSaslServer``, ``ScramMessages``, ``ScramFormatter``):

- only the GS2 flag ``n`` (no channel binding); an authzid must equal the user;
- the user is looked up at client-first; an unknown user, a stored credential
  under the mechanism's minimum iterations, a final message whose nonce is not
  the server-first nonce, or a wrong proof all fail with the same generic text
  (``failures.InvalidCredentialsError``), so a client cannot tell them apart;
- the server nonce is a random 130-bit number in base 36;
- the AuthMessage uses the client-first-bare rebuilt from the user, nonce and
  extensions, and the client-final without proof rebuilt as ``c=…,r=…``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac as _hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from hmac import compare_digest

import structlog

from .failures import InvalidCredentialsError
from .mechanism import SaslAuthenticationError, SaslSettings, register_mechanism

log = structlog.get_logger("odradek.security")


def hmac(hf, key: bytes, msg: bytes) -> bytes:
    """HMAC(key, msg) with the hash constructor ``hf`` (RFC 5802's HMAC)."""
    return _hmac.new(key, msg=msg, digestmod=hf).digest()


def h(hf, msg: bytes) -> bytes:
    """H(msg) (RFC 5802's H)."""
    return hf(msg).digest()


def hi(hf, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with HMAC-``hf`` (RFC 5802's Hi)."""
    return hashlib.pbkdf2_hmac(hf().name, password, salt, int(iterations))

MIN_ITERATIONS = 4096  # ScramMechanism.minIterations (both mechanisms)
MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS
DEFAULT_ITERATIONS = 4096  # kafka-storage / kafka-configs default


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, its wire type byte and its hash."""

    name: str
    type: int  # org.apache.kafka.clients.admin.ScramMechanism: 1 = SHA-256, 2 = SHA-512
    hash: Callable

    @property
    def min_iterations(self) -> int:
        return MIN_ITERATIONS


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, hashlib.sha256)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, hashlib.sha512)
SCRAM_MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in SCRAM_MECHANISMS.values()}


@dataclass(frozen=True)
class ScramCredential:
    """What Kafka stores per (user, mechanism): never the password nor the salted password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys stay out of logs and tracebacks (ScramCredentialValue.toString)
        return "ScramCredential(salt=[hidden], stored_key=[hidden], server_key=[hidden], iterations=[hidden])"


def credential_from_salted_password(mechanism: ScramMechanism, salted_password: bytes, salt: bytes,
                                    iterations: int) -> ScramCredential:
    """StoredKey and ServerKey from a client-computed salted password
    (``ScramControlManager.finishUpsertion``)."""
    client_key = hmac(mechanism.hash, salted_password, b"Client Key")
    return ScramCredential(bytes(salt), h(mechanism.hash, client_key),
                           hmac(mechanism.hash, salted_password, b"Server Key"), iterations)


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) on the UTF-8 password, not SASLprepped (``ScramFormatter.hi``)."""
    return hi(mechanism.hash, password.encode("utf-8"), salt, iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, *, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    """A new credential as ``kafka-storage format --add-scram`` makes it (``ScramFormatter.generateCredential``)."""
    salt = secure_random_string().encode("ascii") if salt is None else salt
    return credential_from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations),
                                           salt, iterations)


def secure_random_string() -> str:
    """``ScramFormatter.secureRandomString``: a random 130-bit number written in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


# --- ScramMessages' grammar ---------------------------------------------------------------
_ALPHA = r"[A-Za-z]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # [\x01-\x7F] except ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # [\x21-\x7E] except ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # '=' only as =2C / =3D
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,{_ALPHA}={_VALUE})*"

# patterns, compiled (and cached by ``re``) at the first exchange, not at import: a broker
# without a SCRAM listener never pays for them
CLIENT_FIRST = (
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
CLIENT_FINAL = (
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")


@dataclass(frozen=True)
class ClientFirst:
    saslname: str
    nonce: str
    authzid: str
    extensions: dict[str, str]

    @classmethod
    def parse(cls, token: bytes) -> ClientFirst:
        m = re.fullmatch(CLIENT_FIRST, token.decode("utf-8", errors="replace"))
        if m is None:
            raise ValueError("Invalid SCRAM client first message format")
        ext = m.group("extensions")
        extensions = dict(item.split("=", 1) for item in ext[1:].split(",")) if ext else {}
        return cls(m.group("saslname"), m.group("nonce"), m.group("authzid") or "", extensions)

    def bare(self) -> str:
        """``ClientFirstMessage.clientFirstMessageBare``: rebuilt, without any ``m=``."""
        tail = "".join(f",{k}={v}" for k, v in self.extensions.items())
        return f"n={self.saslname},r={self.nonce}{tail}"


@dataclass(frozen=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes

    @classmethod
    def parse(cls, token: bytes) -> ClientFinal:
        m = re.fullmatch(CLIENT_FINAL, token.decode("utf-8", errors="replace"))
        if m is None:
            raise ValueError("Invalid SCRAM client final message format")
        try:
            channel = base64.b64decode(m.group("channel"), validate=True)
            proof = base64.b64decode(m.group("proof"), validate=True)
        except binascii.Error:  # the grammar admits e.g. 'a===' shapes Java's decoder rejects too
            raise ValueError("Invalid SCRAM client final message format") from None
        return cls(channel, m.group("nonce"), proof)

    def without_proof(self) -> str:
        return f"c={base64.b64encode(self.channel_binding).decode()},r={self.nonce}"


def username(saslname: str) -> str:
    """``ScramFormatter.username``: undo the =2C / =3D escapes."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError("Invalid username")
    return name.replace("=3D", "=")


def _token_auth(extensions: dict[str, str]) -> bool:
    return extensions.get("tokenauth", "").lower() == "true"  # ScramExtensions.tokenAuthenticated


class ScramSaslServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, settings: SaslSettings) -> None:
        self.mechanism = mechanism.name
        self._mech = mechanism
        self._store = settings.credentials
        self._state = "first"
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self._user = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._client_first(token)
            if self._state == "final":
                return self._client_final(token)
            raise SaslAuthenticationError(f"Unexpected challenge in Sasl server state {self._state.upper()}")
        except InvalidCredentialsError as exc:
            self._fail()
            log.info("sasl.scram_failed", mechanism=self.mechanism, reason=exc.detail)
            raise
        except SaslAuthenticationError:
            self._fail()
            raise

    def _fail(self) -> None:
        self._state = "failed"
        self._credential = None

    def _invalid(self, detail: str) -> InvalidCredentialsError:
        return InvalidCredentialsError(self.mechanism, detail)

    def _client_first(self, token: bytes) -> bytes:
        try:
            first = ClientFirst.parse(token)
            user = username(first.saslname)
        except ValueError as exc:
            raise self._invalid(str(exc)) from None
        if _token_auth(first.extensions):  # no delegation tokens on this broker
            raise self._invalid(f"Token Authentication failed: Invalid tokenId : {user}")
        credential = self._store.get(user, self.mechanism) if self._store is not None else None
        if credential is None:
            raise self._invalid(f"Authentication failed: Invalid user credentials (user {user!r})")
        if first.authzid and first.authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < self._mech.min_iterations:
            raise self._invalid(f"Iterations {credential.iterations} is less than the minimum "
                                f"{self._mech.min_iterations} for {self.mechanism}")
        self._first, self._user, self._credential = first, user, credential
        self._nonce = first.nonce + secure_random_string()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        try:
            final = ClientFinal.parse(token)
        except ValueError as exc:
            raise self._invalid(str(exc)) from None
        if final.nonce != self._nonce:
            raise self._invalid("Invalid client nonce in the final client message.")
        auth_message = f"{self._first.bare()},{self._server_first},{final.without_proof()}".encode()
        hf, credential = self._mech.hash, self._credential
        client_signature = hmac(hf, credential.stored_key, auth_message)
        if len(final.proof) != len(client_signature):
            raise self._invalid("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, final.proof, strict=True))
        if not compare_digest(h(hf, client_key), credential.stored_key):
            raise self._invalid("Invalid client credentials")
        signature = hmac(hf, credential.server_key, auth_message)
        self._state = "complete"
        self._credential = None
        return b"v=" + base64.b64encode(signature)

    def is_complete(self) -> bool:
        return self._state == "complete"

    def principal(self) -> str:
        if not self.is_complete():
            raise RuntimeError("Authentication exchange has not completed")
        return f"User:{self._user}"

    def session_lifetime_ms(self) -> int | None:
        return None  # only delegation tokens expire, and there are none here


def _factory(mechanism: ScramMechanism) -> Callable[[SaslSettings], ScramSaslServer]:
    return lambda settings: ScramSaslServer(mechanism, settings)


for _mechanism in SCRAM_MECHANISMS.values():
    register_mechanism(_mechanism.name, _factory(_mechanism))
