"""DescribeAcls (key 29): the ACLs one filter matches, grouped by resource pattern.

v1 adds pattern types (v0 reads as LITERAL), v2 is flexible, v3 adds the USER resource type.
"""

from ..schema import F, Message

REQUEST = Message("DescribeAclsRequest", [
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", nullable="0+"),
    F("host_filter", "string", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
], valid="0-3", flexible="2+")

RESPONSE = Message("DescribeAclsResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("resources", "[]", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("pattern_type", "int8", "1+", default=3),
        F("acls", "[]", fields=[
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ]),
], valid="0-3", flexible="2+")
