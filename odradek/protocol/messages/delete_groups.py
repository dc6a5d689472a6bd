"""DeleteGroups (key 42): remove empty groups and their committed offsets.

Nothing changes between versions but the encoding: v2 is flexible.
"""

from ..schema import F, Message

REQUEST = Message("DeleteGroupsRequest", [
    F("groups_names", "[]string"),
], valid="0-2", flexible="2+")

RESPONSE = Message("DeleteGroupsResponse", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", fields=[
        F("group_id", "string"),
        F("error_code", "int16"),
    ]),
], valid="0-2", flexible="2+")
