"""The seam between the SASL exchange on a connection and one mechanism's server side.

Kafka's ``SaslServerAuthenticator`` drives a JDK ``SaslServer`` made by a
per-mechanism factory; the connection here does the same with ``SaslServer``
objects made by the factories in ``MECHANISMS`` (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER register themselves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class SaslAuthenticationError(Exception):
    """The client failed to authenticate: SASL_AUTHENTICATION_FAILED (58), then the connection closes.

    The message is sent to the client as Kafka sends it (e.g. "Authentication
    failed: Invalid username or password"); it never holds a password.
    """


@dataclass(frozen=True)
class SaslSettings:
    """What a mechanism may consult: the listener, its JAAS options, the SCRAM credentials."""

    listener: str
    jaas_options: dict[str, str] = field(default_factory=dict)
    credentials: Any = None  # the durable SCRAM credential store, when there is one
    now_ms: Callable[[], int] | None = None


class SaslServer(Protocol):
    """One authentication exchange (Kafka's ``javax.security.sasl.SaslServer``)."""

    mechanism: str

    def evaluate(self, token: bytes) -> bytes:
        """The next challenge for the client's ``token``; raises ``SaslAuthenticationError``."""

    def is_complete(self) -> bool: ...

    def principal(self) -> str:
        """``User:<name>`` once complete."""

    def session_lifetime_ms(self) -> int | None:
        """The credential's own expiry (an OAUTHBEARER token's ``exp``), else None."""


MechanismFactory = Callable[[SaslSettings], SaslServer]
MECHANISMS: dict[str, MechanismFactory] = {}


def register_mechanism(name: str, factory: MechanismFactory) -> None:
    MECHANISMS[name] = factory
