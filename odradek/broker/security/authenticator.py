"""Kafka's ``SaslServerAuthenticator`` as a sans-I/O state machine: frames in, decisions and answers out.

On a SASL listener a connection starts unauthenticated and hands every frame
to its ``SaslAuthenticator`` (``server.Connection._sasl_process``); the
authenticator says what to do with the frame (``receive``), and builds the
answers of the SASL exchange itself (``handshake``, ``authenticate``,
``token``).  Nothing here knows a socket, a codec or a clock but the
``now_ms`` it is given: the connection decodes, encodes, sends, delays and
closes.  h11's ``_state.py`` is the model: the states, what each does with
each kind of frame (``FRAMES``) and the outcomes that move it (``TRANSITIONS``)
are tables; a move the tables lack is a bug that raises.

States, as Kafka's (``SaslState``):

- ``INITIAL``: ApiVersions or SaslHandshake; any other request is closed without an answer;
- ``HANDSHAKE``: after ApiVersions, only SaslHandshake;
- ``RAW``: after a v0 SaslHandshake the tokens come as raw size-prefixed frames;
- ``AUTHENTICATE``: after a v1 SaslHandshake, only SaslAuthenticate; another
  request gets its own answer with ILLEGAL_SASL_STATE, then the connection closes;
- ``COMPLETE``: ordinary requests; when the session has an end (KIP-368), a
  SaslHandshake starts a re-authentication -- at most one start a second --
  on the same mechanism, ending with the same principal
  (``KafkaChannel.maybeBeginServerReauthentication``), and any other request
  after the end closes the connection;
- ``FAILED``: authentication failed; the connection is closing, any frame closes it.

Mechanisms are made only through the ``MECHANISMS`` registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...protocol import headers
from ...protocol.errors import ErrorCode
from .mechanism import MECHANISMS, SaslAuthenticationError, SaslServer, SaslSettings

INITIAL, HANDSHAKE, RAW, AUTHENTICATE, COMPLETE, FAILED = (
    "initial", "handshake", "raw", "authenticate", "complete", "failed")
REAUTH_MIN_INTERVAL_MS = 1000  # KafkaChannel: at most one re-authentication start per second
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36

# kinds of frame
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, OTHER, TOKEN, MALFORMED = (
    "ApiVersions", "SaslHandshake", "SaslAuthenticate", "other request", "raw token", "malformed")
FRAME_KINDS = {headers.API_VERSIONS_KEY: API_VERSIONS, SASL_HANDSHAKE_KEY: SASL_HANDSHAKE,
               SASL_AUTHENTICATE_KEY: SASL_AUTHENTICATE}

# what the connection does with a frame
SERVE = "serve"  # an ordinary request: the handlers answer it
SERVE_API_VERSIONS = "serve ApiVersions"  # the handler answers; then ``api_versions_served``
DO_HANDSHAKE = "handshake"  # decode SaslHandshake, answer ``handshake(mechanism, version)``
DO_AUTHENTICATE = "authenticate"  # decode SaslAuthenticate, answer ``authenticate(auth_bytes)``
DO_TOKEN = "token"  # the frame is a bare token: send ``token(frame)``'s bare challenge
REFUSE = "refuse"  # the request's own answer with ILLEGAL_SASL_STATE, then close at once
CLOSE = "close"  # close without an answer

FRAMES: dict[str, dict[str, str]] = {
    INITIAL: {API_VERSIONS: SERVE_API_VERSIONS, SASL_HANDSHAKE: DO_HANDSHAKE,
              SASL_AUTHENTICATE: CLOSE, OTHER: CLOSE, MALFORMED: CLOSE},
    HANDSHAKE: {API_VERSIONS: CLOSE, SASL_HANDSHAKE: DO_HANDSHAKE,
                SASL_AUTHENTICATE: CLOSE, OTHER: CLOSE, MALFORMED: CLOSE},
    RAW: {TOKEN: DO_TOKEN},
    AUTHENTICATE: {API_VERSIONS: REFUSE, SASL_HANDSHAKE: REFUSE,
                   SASL_AUTHENTICATE: DO_AUTHENTICATE, OTHER: REFUSE, MALFORMED: CLOSE},
    # two guards refine these (``receive``): a SaslHandshake re-authenticates only a session
    # that may be renewed now; any other frame after the session's end closes it
    COMPLETE: {API_VERSIONS: SERVE, SASL_HANDSHAKE: SERVE, SASL_AUTHENTICATE: SERVE, OTHER: SERVE,
               MALFORMED: CLOSE},
    FAILED: {API_VERSIONS: CLOSE, SASL_HANDSHAKE: CLOSE, SASL_AUTHENTICATE: CLOSE, OTHER: CLOSE,
             MALFORMED: CLOSE},
}

# outcomes that move the state
VERSIONS_SERVED, HANDSHAKE_V0, HANDSHAKE_V1, AUTHENTICATED, REAUTHENTICATE, FAILURE = (
    "ApiVersions served", "v0 handshake", "v1+ handshake", "authenticated", "re-authenticate", "failure")

TRANSITIONS: dict[str, dict[str, str]] = {
    INITIAL: {VERSIONS_SERVED: HANDSHAKE, HANDSHAKE_V0: RAW, HANDSHAKE_V1: AUTHENTICATE, FAILURE: FAILED},
    HANDSHAKE: {HANDSHAKE_V0: RAW, HANDSHAKE_V1: AUTHENTICATE, FAILURE: FAILED},
    RAW: {AUTHENTICATED: COMPLETE, FAILURE: FAILED},
    AUTHENTICATE: {AUTHENTICATED: COMPLETE, FAILURE: FAILED},
    COMPLETE: {REAUTHENTICATE: HANDSHAKE, FAILURE: FAILED},
    FAILED: {FAILURE: FAILED},
}

GENERIC_FAILURE = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


class SaslStateError(Exception):
    """A move the tables do not allow: a bug of the caller, never a client's doing."""


@dataclass
class SaslListener:
    """A SASL listener's settings: enabled mechanisms, each one's ``SaslSettings`` and session cap."""

    name: str
    mechanisms: list[str]
    settings: dict[str, SaslSettings]
    reauth_ms: dict[str, int] = field(default_factory=dict)  # connections.max.reauth.ms per mechanism
    max_receive_size: int = 524288
    failed_delay_ms: int = 100


@dataclass(frozen=True, slots=True)
class Step:
    """What to do with one frame: ``action`` and the frame's header as peeked (None for a raw token).

    ``reason``: why the connection closes (CLOSE, REFUSE); ``event``/``note``:
    the log line the connection writes for it.
    """

    action: str
    api_key: int | None = None
    version: int = 0
    correlation_id: int = 0
    reason: str | None = None
    event: str | None = None
    note: str | None = None
    expired: bool = False  # closed because the session is over (Kafka's expired-connections-killed)


@dataclass(frozen=True, slots=True)
class Failure:
    """Authentication failed: answer (if any) after ``connection.failed.authentication.delay.ms``, then close."""

    reason: str  # the connection's close reason
    message: str | None = None  # what the client is told (SaslAuthenticate's error_message)
    error: Exception | None = None  # what the mechanism raised, for the log
    bug: bool = False  # the mechanism raised something other than a refusal
    delayed: bool = True


@dataclass(frozen=True, slots=True)
class Reply:
    """The outcome of one SASL request: the answer to send, and a failure or a completed session."""

    answer: Any = None  # the response body (dict), or the bare challenge (bytes) of a raw token
    failure: Failure | None = None
    lifetime_ms: int | None = None  # set once authenticated: the session lifetime announced (0 = none)


class SaslAuthenticator:
    """One connection's authentication state; the connection frames, this decides."""

    def __init__(self, listener: SaslListener, now_ms: Callable[[], int]) -> None:
        self.listener = listener
        self.now_ms = now_ms
        self.state = INITIAL
        self.server: SaslServer | None = None
        self.mechanism: str | None = None
        self.principal: str | None = None  # set once authenticated
        self.reauthenticating = False
        self.reauth_started_at: int | None = None
        self.expires_at: int | None = None  # the session's end (KIP-368), None: never

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def _move(self, outcome: str) -> None:
        try:
            self.state = TRANSITIONS[self.state][outcome]
        except KeyError:
            raise SaslStateError(f"{outcome!r} in SASL state {self.state!r}") from None

    # --- frames ------------------------------------------------------------------------------------

    def receive(self, frame: bytes | memoryview) -> Step:
        """What the connection does with ``frame`` in the current state (``FRAMES``, plus the session guards)."""
        if self.state == RAW:
            return Step(DO_TOKEN)
        try:
            api_key, version, correlation_id = headers.peek_request(frame)
        except ValueError:
            return Step(CLOSE, reason="malformed frame during SASL authentication", event="sasl.malformed_frame")
        kind = FRAME_KINDS.get(api_key, OTHER)
        action = FRAMES[self.state][kind]
        step = Step(action, api_key, version, correlation_id)
        if self.state == COMPLETE:
            if kind == SASL_HANDSHAKE and self.may_reauthenticate():
                self.start_reauthentication()
                return Step(DO_HANDSHAKE, api_key, version, correlation_id, event="sasl.reauthenticate")
            if self.expired():
                return Step(CLOSE, api_key, version, correlation_id, expired=True, event="sasl.session_expired",
                            reason="SASL session expired (connections.max.reauth.ms)")
        elif action == REFUSE:
            return Step(REFUSE, api_key, version, correlation_id, event="sasl.illegal_state",
                        reason="unexpected request during SASL authentication")
        elif action == CLOSE:
            return Step(CLOSE, api_key, version, correlation_id, event="sasl.illegal_state",
                        reason="request before SASL authentication",
                        note="a request before authentication: closed unanswered")
        return step

    def api_versions_served(self, supported: bool) -> None:
        """ApiVersions was answered before the handshake: only SaslHandshake may follow, unless the
        version was not supported (the client may retry a lower one)."""
        if supported:
            self._move(VERSIONS_SERVED)

    def refused(self) -> Failure:
        """A request the state does not take was answered ILLEGAL_SASL_STATE: close at once."""
        self._move(FAILURE)
        return Failure("unexpected request during SASL authentication", delayed=False)

    # --- the exchange ------------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> Reply:
        """SaslHandshake's answer; a mechanism not enabled is answered UNSUPPORTED_SASL_MECHANISM and fails."""
        enabled = list(self.listener.mechanisms)
        if mechanism not in self.listener.mechanisms:
            self._move(FAILURE)
            return Reply({"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled},
                         Failure(f"unsupported SASL mechanism {mechanism!r}"))
        if self.reauthenticating and mechanism != self.mechanism:
            # Kafka answers the handshake, then fails the next token
            self.server = None
        else:
            self.server = MECHANISMS[mechanism](self.listener.settings[mechanism])
        self.mechanism = mechanism
        self._move(HANDSHAKE_V0 if version == 0 else HANDSHAKE_V1)
        return Reply({"error_code": ErrorCode.NONE, "mechanisms": enabled})

    def authenticate(self, auth_bytes: bytes) -> Reply:
        """SaslAuthenticate's answer: the challenge, or SASL_AUTHENTICATION_FAILED and a failure."""
        reply = self.token(auth_bytes)
        if reply.failure is not None:
            return Reply({"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": reply.failure.message,
                          "auth_bytes": b"", "session_lifetime_ms": 0}, reply.failure)
        return Reply({"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": reply.answer,
                      "session_lifetime_ms": reply.lifetime_ms or 0}, None, reply.lifetime_ms)

    def token(self, token: bytes) -> Reply:
        """The mechanism's challenge for ``token`` (bare, as after a v0 handshake); a refusal or a
        mechanism's bug fails the exchange, never lets the client in."""
        try:
            challenge, lifetime = self.evaluate(token)
        except SaslStateError:
            raise
        except SaslAuthenticationError as exc:
            self._move(FAILURE)
            return Reply(failure=Failure("SASL authentication failed", str(exc), exc))
        except Exception as exc:  # a mechanism's bug: the client is refused with Kafka's generic text
            self._move(FAILURE)
            return Reply(failure=Failure("SASL mechanism failed", GENERIC_FAILURE.format(self.mechanism), exc,
                                         bug=True))
        return Reply(challenge, None, lifetime)

    def evaluate(self, token: bytes) -> tuple[bytes, int | None]:
        """The challenge for ``token`` and, once complete, the session lifetime to announce (ms, 0 = none).

        Raises ``SaslAuthenticationError`` (answer 58 and close)."""
        if self.state not in (RAW, AUTHENTICATE):
            raise SaslStateError(f"a token in SASL state {self.state!r}")
        if self.server is None:
            raise SaslAuthenticationError("Re-authentication must use the mechanism of the first authentication")
        challenge = self.server.evaluate(token)
        if not self.server.is_complete():
            return challenge, None
        principal = self.server.principal()
        if self.reauthenticating and principal != self.principal:
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {self.principal}: {principal}")
        return challenge, self._finish(principal)

    def _finish(self, principal: str) -> int:
        """Authenticated: the session lifetime (``SaslServerAuthenticator.calcCompletionTimesAndReturnSessionLifetimeMs``)."""
        now = self.now_ms()
        cap = self.listener.reauth_ms.get(self.mechanism or "", 0)
        expiry = self.server.session_lifetime_ms() if self.server is not None else None
        lifetime = 0
        if expiry is not None:
            lifetime = max(0, expiry - now)
            if cap > 0:
                lifetime = min(lifetime, cap)
        elif cap > 0:
            lifetime = cap
        self.principal = principal
        self._move(AUTHENTICATED)
        self.reauthenticating = False
        self.expires_at = now + lifetime if lifetime > 0 or expiry is not None else None
        return lifetime

    # --- the session (KIP-368) ---------------------------------------------------------------------

    def may_reauthenticate(self) -> bool:
        """Whether a SaslHandshake on this authenticated connection starts a re-authentication:
        only a session with an end can be renewed, and not twice within a second; otherwise the
        handshake is an ordinary request (answered ILLEGAL_SASL_STATE)."""
        if self.state != COMPLETE or self.expires_at is None:
            return False
        started = self.reauth_started_at
        return started is None or self.now_ms() - started >= REAUTH_MIN_INTERVAL_MS

    def start_reauthentication(self) -> None:
        self._move(REAUTHENTICATE)
        self.reauthenticating = True
        self.reauth_started_at = self.now_ms()

    def expired(self) -> bool:
        return self.expires_at is not None and self.now_ms() >= self.expires_at
