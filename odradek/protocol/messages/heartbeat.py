"""Heartbeat (key 12): keeps a member's session alive; answered on every poll, so hot.

v3 adds static membership, v4 is flexible.
"""

from ..schema import F, Message

REQUEST = Message("HeartbeatRequest", [
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
], valid="0-4", flexible="4+")

RESPONSE = Message("HeartbeatResponse", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
], valid="0-4", flexible="4+")
