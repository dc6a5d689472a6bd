"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iterations) each user has.

Only v0, flexible.  ``users`` null or empty asks for every user.
"""

from ..schema import F, Message

REQUEST = Message("DescribeUserScramCredentialsRequest", [
    F("users", "[]", nullable="0+", fields=[
        F("name", "string"),
    ]),
], valid="0", flexible="0+")

RESPONSE = Message("DescribeUserScramCredentialsResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("results", "[]", fields=[
        F("user", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("credential_infos", "[]", fields=[
            F("mechanism", "int8"),
            F("iterations", "int32"),
        ]),
    ]),
], valid="0", flexible="0+")
