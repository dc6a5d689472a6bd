"""SyncGroup (key 14): the leader hands out assignments; every member receives its own.

v3 adds static membership, v4 is flexible, v5 carries protocol type/name
so the coordinator can check them.
"""

from ..schema import F, Message

REQUEST = Message("SyncGroupRequest", [
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignments", "[]", fields=[
        F("member_id", "string"),
        F("assignment", "bytes"),
    ]),
], valid="0-5", flexible="4+")

RESPONSE = Message("SyncGroupResponse", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("protocol_type", "string", "5+", nullable="5+", default=None),
    F("protocol_name", "string", "5+", nullable="5+", default=None),
    F("assignment", "bytes"),
], valid="0-5", flexible="4+")
