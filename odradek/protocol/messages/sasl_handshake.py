"""SaslHandshake (key 17): the client names a SASL mechanism; the answer lists the enabled ones.

v0 means the tokens that follow are raw size-prefixed frames, v1 that they
come wrapped in SaslAuthenticate.  Never flexible (KAFKA-9577).
"""

from ..schema import F, Message

REQUEST = Message("SaslHandshakeRequest", [
    F("mechanism", "string"),
], valid="0-1", flexible="none")

RESPONSE = Message("SaslHandshakeResponse", [
    F("error_code", "int16"),
    F("mechanisms", "[]string"),
], valid="0-1", flexible="none")
