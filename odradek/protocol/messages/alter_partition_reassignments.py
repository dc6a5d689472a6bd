"""AlterPartitionReassignments (key 45, KIP-455): move partitions to other replica sets.
Flexible from v0; v1 adds ``allow_replication_factor_change`` (KIP-860), echoed in the answer."""

from ..schema import F, Message

REQUEST = Message("AlterPartitionReassignmentsRequest", [
    F("timeout_ms", "int32", default=60000),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("replicas", "[]int32", nullable="0+", default=None),
        ]),
    ]),
], valid="0-1", flexible="0+")

RESPONSE = Message("AlterPartitionReassignmentsResponse", [
    F("throttle_time_ms", "int32"),
    F("allow_replication_factor_change", "bool", "1+", default=True),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("responses", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ]),
], valid="0-1", flexible="0+")
