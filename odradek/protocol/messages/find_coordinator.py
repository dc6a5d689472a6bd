"""FindCoordinator (key 10): which broker coordinates a group (or transactional id).

v1 adds the key type, v3 is flexible, v4 batches keys (and answers with a
list of coordinators instead of one top-level node).
"""

from ..schema import F, Message

REQUEST = Message("FindCoordinatorRequest", [
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+", default=0),
    F("coordinator_keys", "[]string", "4+"),
], valid="0-6", flexible="3+")

RESPONSE = Message("FindCoordinatorResponse", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", nullable="1-3"),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
    F("coordinators", "[]", "4+", fields=[
        F("key", "string", "4+"),
        F("node_id", "int32", "4+"),
        F("host", "string", "4+"),
        F("port", "int32", "4+"),
        F("error_code", "int16", "4+"),
        F("error_message", "string", "4+", nullable="4+"),
    ]),
], valid="0-6", flexible="3+")
