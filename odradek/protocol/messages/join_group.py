"""JoinGroup (key 11): a member (re)joins a classic group and waits for the rebalance.

v1 adds the rebalance timeout, v5 static membership (group instance id),
v6 is flexible, v7 echoes the protocol type, v8 a join reason, v9 lets the
leader skip assignment.
"""

from ..schema import F, Message

REQUEST = Message("JoinGroupRequest", [
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string"),
    F("group_instance_id", "string", "5+", nullable="5+", default=None),
    F("protocol_type", "string"),
    F("protocols", "[]", fields=[
        F("name", "string"),
        F("metadata", "bytes"),
    ]),
    F("reason", "string", "8+", nullable="8+", default=None),
], valid="0-9", flexible="6+")

RESPONSE = Message("JoinGroupResponse", [
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16"),
    F("generation_id", "int32", default=-1),
    F("protocol_type", "string", "7+", nullable="7+", default=None),
    F("protocol_name", "string", nullable="7+"),
    F("leader", "string"),
    F("skip_assignment", "bool", "9+", default=False),
    F("member_id", "string"),
    F("members", "[]", fields=[
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("metadata", "bytes"),
    ]),
], valid="0-9", flexible="6+")
