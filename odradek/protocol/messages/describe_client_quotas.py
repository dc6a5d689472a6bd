"""DescribeClientQuotas (key 48, KIP-546): the quotas of the entities a filter matches.

v1 only makes the message flexible.  ``match_type``: 0 exact name, 1 the
default entity, 2 any specified name; ``entries`` is null on an error.
"""

from ..schema import F, Message

REQUEST = Message("DescribeClientQuotasRequest", [
    F("components", "[]", fields=[
        F("entity_type", "string"),
        F("match_type", "int8"),
        F("match", "string", nullable="0+"),
    ]),
    F("strict", "bool"),
], valid="0-1", flexible="1+")

RESPONSE = Message("DescribeClientQuotasResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("entries", "[]", nullable="0+", fields=[
        F("entity", "[]", fields=[
            F("entity_type", "string"),
            F("entity_name", "string", nullable="0+"),
        ]),
        F("values", "[]", fields=[
            F("key", "string"),
            F("value", "float64"),
        ]),
    ]),
], valid="0-1", flexible="1+")
