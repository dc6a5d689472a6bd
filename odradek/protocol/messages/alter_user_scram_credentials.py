"""AlterUserScramCredentials (key 51): add, replace or remove users' SCRAM credentials.

Only v0, flexible.  The client sends the salted password (never the
password); the broker keeps the salt, StoredKey, ServerKey and iterations.
"""

from ..schema import F, Message

REQUEST = Message("AlterUserScramCredentialsRequest", [
    F("deletions", "[]", fields=[
        F("name", "string"),
        F("mechanism", "int8"),
    ]),
    F("upsertions", "[]", fields=[
        F("name", "string"),
        F("mechanism", "int8"),
        F("iterations", "int32"),
        F("salt", "bytes"),
        F("salted_password", "bytes"),
    ]),
], valid="0", flexible="0+")

RESPONSE = Message("AlterUserScramCredentialsResponse", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", fields=[
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
    ]),
], valid="0", flexible="0+")
