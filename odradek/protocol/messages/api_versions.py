"""ApiVersions (key 18): version negotiation; responses always use header v0."""

from ..schema import F, Message

REQUEST = Message("ApiVersionsRequest", [
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
], valid="0-4", flexible="3+")

RESPONSE = Message("ApiVersionsResponse", [
    F("error_code", "int16"),
    F("api_keys", "[]", fields=[
        F("api_key", "int16"),
        F("min_version", "int16"),
        F("max_version", "int16"),
    ]),
    F("throttle_time_ms", "int32", "1+"),
    F("supported_features", "[]", "3+", tag=0, fields=[
        F("name", "string", "3+"),
        F("min_version", "int16", "3+"),
        F("max_version", "int16", "3+"),
    ]),
    F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    F("finalized_features", "[]", "3+", tag=2, fields=[
        F("name", "string", "3+"),
        F("max_version_level", "int16", "3+"),
        F("min_version_level", "int16", "3+"),
    ]),
    F("zk_migration_ready", "bool", "3+", tag=3, default=False),
], valid="0-4", flexible="3+")
