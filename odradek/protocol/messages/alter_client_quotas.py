"""AlterClientQuotas (key 49, KIP-546): set or remove quota values per entity.

v1 only makes the message flexible.  An entity name null is the default
entity; the answer carries one error per entity.
"""

from ..schema import F, Message

_ENTITY = [
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+"),
]

REQUEST = Message("AlterClientQuotasRequest", [
    F("entries", "[]", fields=[
        F("entity", "[]", fields=_ENTITY),
        F("ops", "[]", fields=[
            F("key", "string"),
            F("value", "float64"),
            F("remove", "bool"),
        ]),
    ]),
    F("validate_only", "bool"),
], valid="0-1", flexible="1+")

RESPONSE = Message("AlterClientQuotasResponse", [
    F("throttle_time_ms", "int32"),
    F("entries", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("entity", "[]", fields=_ENTITY),
    ]),
], valid="0-1", flexible="1+")
