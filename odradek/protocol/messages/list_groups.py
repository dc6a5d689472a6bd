"""ListGroups (key 16): every group the broker coordinates.

v3 is flexible, v4 filters by and reports state, v5 by and reports type.
"""

from ..schema import F, Message

REQUEST = Message("ListGroupsRequest", [
    F("states_filter", "[]string", "4+"),
    F("types_filter", "[]string", "5+"),
], valid="0-5", flexible="3+")

RESPONSE = Message("ListGroupsResponse", [
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("groups", "[]", fields=[
        F("group_id", "string"),
        F("protocol_type", "string"),
        F("group_state", "string", "4+"),
        F("group_type", "string", "5+"),
    ]),
], valid="0-5", flexible="3+")
