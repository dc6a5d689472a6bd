"""SaslHandshake and SaslAuthenticate where no exchange is under way.

On a SASL listener the connection's SASL gate (``server.py``,
``security/authenticator.py``) handles them while authenticating or re-authenticating;
what reaches these handlers -- on a PLAINTEXT or SSL listener, or an
authenticated connection that is not re-authenticating -- is answered with
ILLEGAL_SASL_STATE and the connection stays open (``KafkaApis.handleSaslHandshakeRequest``,
``handleSaslAuthenticateRequest``).
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from ..dispatch import HandlerTable, RequestContext


def register(table: HandlerTable) -> None:
    table.register(17, sasl_handshake)
    table.register(36, sasl_authenticate)


def sasl_handshake(ctx: RequestContext, req) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


def sasl_authenticate(ctx: RequestContext, req) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
