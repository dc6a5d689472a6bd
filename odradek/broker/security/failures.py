"""How a mechanism fails without telling an unauthenticated client why.

Kafka's ``SaslServerAuthenticator`` answers a mechanism's plain
``SaslException`` with one fixed text ("Authentication failed during
authentication due to invalid credentials with SASL mechanism <M>"), so an
unknown user looks exactly like a wrong password; only a
``SaslAuthenticationException`` carries its own message to the client.  Here
both are ``SaslAuthenticationError``; this subclass holds the fixed text as
its message and the real reason in ``detail``, for the broker's log only.
"""

from __future__ import annotations

from .mechanism import SaslAuthenticationError


def generic_failure_message(mechanism: str) -> str:
    """Kafka's text for every mechanism-level failure (SaslServerAuthenticator.handleSaslToken)."""
    return ("Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {mechanism}")


class InvalidCredentialsError(SaslAuthenticationError):
    """A failure whose reason stays on the broker: the client gets Kafka's generic text."""

    def __init__(self, mechanism: str, detail: str) -> None:
        super().__init__(generic_failure_message(mechanism))
        self.mechanism = mechanism
        self.detail = detail  # never holds a password or key material
