"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` and ``PlainServerCallbackHandler`` run it.

One client message, ``[authzid] NUL authcid NUL password`` in UTF-8; the
users are the ``user_<name>="<password>"`` options of the listener's
``PlainLoginModule`` JAAS entry, compared in constant time.  The server's
answer on success is an empty token.
"""

from __future__ import annotations

import hmac

from .mechanism import SaslAuthenticationError, SaslSettings, register_mechanism

MECHANISM = "PLAIN"
_INVALID = "Authentication failed: Invalid username or password"


def _generic() -> SaslAuthenticationError:
    """A malformed message: Kafka answers with its fixed text for mechanism-level failures."""
    return SaslAuthenticationError("Authentication failed during authentication due to invalid credentials "
                                   f"with SASL mechanism {MECHANISM}")


class PlainSaslServer:
    mechanism = MECHANISM

    def __init__(self, settings: SaslSettings) -> None:
        self._users = {k[len("user_"):]: v for k, v in settings.jaas_options.items() if k.startswith("user_")}
        self._user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._user is not None:
            raise _generic()  # PLAIN is one message
        text = token.decode("utf-8", errors="replace")  # as Java's new String(bytes, UTF_8)
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise _generic()
        authzid, user, password = tokens
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that "
                                          "is different from username")
        expected = self._users.get(user)
        # compare whether the user exists or not, so the time taken does not tell
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
        if expected is None or not ok:
            raise SaslAuthenticationError(_INVALID)
        self._user = user
        return b""

    def is_complete(self) -> bool:
        return self._user is not None

    def principal(self) -> str:
        return f"User:{self._user}"

    def session_lifetime_ms(self) -> int | None:
        return None


def has_users(options: dict[str, str]) -> bool:
    return any(k.startswith("user_") for k in options)


register_mechanism(MECHANISM, PlainSaslServer)
