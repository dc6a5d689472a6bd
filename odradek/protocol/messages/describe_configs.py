"""DescribeConfigs (key 32): admin clients read topic and broker settings.

v0 carries ``is_default``; v1+ replaces it with ``config_source`` and
synonyms, v3+ adds type and documentation.
"""

from ..schema import F, Message

REQUEST = Message("DescribeConfigsRequest", [
    F("resources", "[]", fields=[
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configuration_keys", "[]string", nullable="0+"),
    ]),
    F("include_synonyms", "bool", "1+"),
    F("include_documentation", "bool", "3+"),
], valid="0-4", flexible="4+")

RESPONSE = Message("DescribeConfigsResponse", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", "[]", fields=[
            F("name", "string"),
            F("value", "string", nullable="0+"),
            F("read_only", "bool"),
            F("is_default", "bool", "0"),
            F("config_source", "int8", "1+", default=-1),
            F("is_sensitive", "bool"),
            F("synonyms", "[]", "1+", fields=[
                F("name", "string", "1+"),
                F("value", "string", "1+", nullable="0+"),
                F("source", "int8", "1+"),
            ]),
            F("config_type", "int8", "3+"),
            F("documentation", "string", "3+", nullable="0+"),
        ]),
    ]),
], valid="0-4", flexible="4+")
