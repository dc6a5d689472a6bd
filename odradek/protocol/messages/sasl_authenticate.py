"""SaslAuthenticate (key 36): one SASL token each way.

v1 adds ``session_lifetime_ms`` (KIP-368 re-authentication), v2 is flexible.
"""

from ..schema import F, Message

REQUEST = Message("SaslAuthenticateRequest", [
    F("auth_bytes", "bytes"),
], valid="0-2", flexible="2+")

RESPONSE = Message("SaslAuthenticateResponse", [
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=""),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+", default=0),
], valid="0-2", flexible="2+")
