"""DeleteTopics (key 20): admin clients and test fixtures drop topics.

v0-5 name topics in ``topic_names``; v6 moves to ``topics`` (name or ID).
Handlers should read both: parse fills the absent one with its default.
"""

from ..schema import F, Message

REQUEST = Message("DeleteTopicsRequest", [
    F("topics", "[]", "6+", fields=[
        F("name", "string", "6+", nullable="6+", default=None),
        F("topic_id", "uuid", "6+"),
    ]),
    F("topic_names", "[]string", "0-5"),
    F("timeout_ms", "int32"),
], valid="0-6", flexible="4+")

RESPONSE = Message("DeleteTopicsResponse", [
    F("throttle_time_ms", "int32", "1+"),
    F("responses", "[]", fields=[
        F("name", "string", nullable="6+"),
        F("topic_id", "uuid", "6+"),
        F("error_code", "int16"),
        F("error_message", "string", "5+", nullable="5+", default=None),
    ]),
], valid="0-6", flexible="4+")
