"""CreateAcls (key 30): add ACL bindings; one result per creation, in request order.

v1 adds pattern types (v0 creates LITERAL ones), v2 is flexible, v3 adds the USER resource type.
"""

from ..schema import F, Message

REQUEST = Message("CreateAclsRequest", [
    F("creations", "[]", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("resource_pattern_type", "int8", "1+", default=3),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ]),
], valid="0-3", flexible="2+")

RESPONSE = Message("CreateAclsResponse", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
    ]),
], valid="0-3", flexible="2+")
