"""LeaveGroup (key 13): members leave a group without waiting for session expiry.

v0-v2 name one member; v3 batches member identities (static members, KIP-345)
and answers per member; v4 is flexible; v5 adds a leave reason.
"""

from ..schema import F, Message

REQUEST = Message("LeaveGroupRequest", [
    F("group_id", "string"),
    F("member_id", "string", "0-2"),
    F("members", "[]", "3+", fields=[
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("reason", "string", "5+", nullable="5+", default=None),
    ]),
], valid="0-5", flexible="4+")

RESPONSE = Message("LeaveGroupResponse", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("members", "[]", "3+", fields=[
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+"),
        F("error_code", "int16", "3+"),
    ]),
], valid="0-5", flexible="4+")
