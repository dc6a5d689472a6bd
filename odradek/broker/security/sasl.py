"""The SASL side of one connection: Kafka's ``SaslServerAuthenticator`` state machine.

On a SASL listener a connection starts unauthenticated; the connection
(``server.py``) hands every frame to ``SaslExchange`` until authentication
completes.  States, as Kafka's (``SaslState``):

- ``INITIAL``: ApiVersions or SaslHandshake; any other request is closed without an answer;
- ``HANDSHAKE``: after ApiVersions, only SaslHandshake;
- ``RAW``: after a v0 SaslHandshake the tokens come as raw size-prefixed frames;
- ``AUTHENTICATE``: after a v1 SaslHandshake, only SaslAuthenticate;
- ``COMPLETE``: ordinary requests; when the session has an end (KIP-368), a
  SaslHandshake starts a re-authentication -- at most one start a second --
  on the same mechanism, ending with the same principal (``KafkaChannel.maybeBeginServerReauthentication``).

Mechanisms are made only through the ``MECHANISMS`` registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .mechanism import MECHANISMS, SaslAuthenticationError, SaslServer, SaslSettings

INITIAL, HANDSHAKE, RAW, AUTHENTICATE, COMPLETE = "initial", "handshake", "raw", "authenticate", "complete"
REAUTH_MIN_INTERVAL_MS = 1000  # KafkaChannel: at most one re-authentication start per second


@dataclass
class SaslListener:
    """A SASL listener's settings: enabled mechanisms, each one's ``SaslSettings`` and session cap."""

    name: str
    mechanisms: list[str]
    settings: dict[str, SaslSettings]
    reauth_ms: dict[str, int] = field(default_factory=dict)  # connections.max.reauth.ms per mechanism
    max_receive_size: int = 524288
    failed_delay_ms: int = 100


class SaslExchange:
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

    def handshake(self, mechanism: str, version: int) -> bool:
        """SaslHandshake: False if the mechanism is not enabled (answer 33 and close)."""
        if mechanism not in self.listener.mechanisms:
            return False
        if self.reauthenticating and mechanism != self.mechanism:
            # Kafka answers the handshake, then closes on the next frame
            self.server = None
        else:
            self.server = MECHANISMS[mechanism](self.listener.settings[mechanism])
        self.mechanism = mechanism
        self.state = RAW if version == 0 else AUTHENTICATE
        return True

    def may_reauthenticate(self) -> bool:
        """Whether a SaslHandshake on this authenticated connection starts a re-authentication:
        only a session with an end can be renewed, and not twice within a second; otherwise the
        handshake is an ordinary request (answered ILLEGAL_SASL_STATE)."""
        if self.state != COMPLETE or self.expires_at is None:
            return False
        started = self.reauth_started_at
        return started is None or self.now_ms() - started >= REAUTH_MIN_INTERVAL_MS

    def start_reauthentication(self) -> None:
        self.reauthenticating = True
        self.reauth_started_at = self.now_ms()
        self.state = HANDSHAKE

    def evaluate(self, token: bytes) -> tuple[bytes, int | None]:
        """The challenge for ``token`` and, once complete, the session lifetime to announce (ms, 0 = none).

        Raises ``SaslAuthenticationError`` (answer 58 and close)."""
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
        self.state = COMPLETE
        self.reauthenticating = False
        self.expires_at = now + lifetime if lifetime > 0 or expiry is not None else None
        return lifetime

    def expired(self) -> bool:
        return self.expires_at is not None and self.now_ms() >= self.expires_at
