"""DeleteAcls (key 31): remove every ACL each filter matches; the removed ones are returned.

v1 adds pattern types (v0 filters read as LITERAL), v2 is flexible, v3 adds the USER resource type.
"""

from ..schema import F, Message

REQUEST = Message("DeleteAclsRequest", [
    F("filters", "[]", fields=[
        F("resource_type_filter", "int8"),
        F("resource_name_filter", "string", nullable="0+"),
        F("pattern_type_filter", "int8", "1+", default=3),
        F("principal_filter", "string", nullable="0+"),
        F("host_filter", "string", nullable="0+"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ]),
], valid="0-3", flexible="2+")

RESPONSE = Message("DeleteAclsResponse", [
    F("throttle_time_ms", "int32"),
    F("filter_results", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("matching_acls", "[]", fields=[
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=3),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ]),
], valid="0-3", flexible="2+")
