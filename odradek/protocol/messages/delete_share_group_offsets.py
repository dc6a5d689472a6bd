"""DeleteShareGroupOffsets (key 92, KIP-932): forget an empty share group's state for whole
topics (the next subscription initializes them afresh)."""

from ..schema import F, Message

REQUEST = Message("DeleteShareGroupOffsetsRequest", [
    F("group_id", "string"),
    F("topics", "[]", fields=[F("topic_name", "string")]),
], valid="0", flexible="0+")

RESPONSE = Message("DeleteShareGroupOffsetsResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("responses", "[]", fields=[
        F("topic_name", "string"),
        F("topic_id", "uuid"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
    ]),
], valid="0", flexible="0+")
