"""DescribeGroups (key 15): state, protocol and members of groups (admin tools, lag checks).

v3 asks for authorized operations, v4 adds static members, v5 is flexible, v6 (KIP-1043) adds
an error message and answers an unknown group GROUP_ID_NOT_FOUND instead of an empty "Dead" one.
"""

from ..schema import F, Message

REQUEST = Message("DescribeGroupsRequest", [
    F("groups", "[]string"),
    F("include_authorized_operations", "bool", "3+"),
], valid="0-6", flexible="5+")

RESPONSE = Message("DescribeGroupsResponse", [
    F("throttle_time_ms", "int32", "1+"),
    F("groups", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", "6+", nullable="6+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),
        F("members", "[]", fields=[
            F("member_id", "string"),
            F("group_instance_id", "string", "4+", nullable="4+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes"),
        ]),
        # INT32_MIN means "not requested" (Kafka's default for the bit field)
        F("authorized_operations", "int32", "3+", default=-2147483648),
    ]),
], valid="0-6", flexible="5+")
