"""UpdateFeatures (key 57, KIP-584): change the cluster's finalized feature levels.

Flexible from v0.  v0's ``allow_downgrade`` became v1's ``upgrade_type`` (1
upgrade, 2 safe downgrade, 3 unsafe downgrade) and ``validate_only``; v2
drops the per-feature results from the answer.
"""

from ..schema import F, Message

REQUEST = Message("UpdateFeaturesRequest", [
    F("timeout_ms", "int32", default=60000),
    F("feature_updates", "[]", fields=[
        F("feature", "string"),
        F("max_version_level", "int16"),
        F("allow_downgrade", "bool", "0"),
        F("upgrade_type", "int8", "1+", default=1),
    ]),
    F("validate_only", "bool", "1+", default=False),
], valid="0-2", flexible="0+")

RESPONSE = Message("UpdateFeaturesResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("results", "[]", "0-1", fields=[
        F("feature", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
    ]),
], valid="0-2", flexible="0+")
