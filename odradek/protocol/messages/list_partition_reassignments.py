"""ListPartitionReassignments (key 46, KIP-455): the reassignments in progress.  v0, flexible."""

from ..schema import F, Message

REQUEST = Message("ListPartitionReassignmentsRequest", [
    F("timeout_ms", "int32", default=60000),
    F("topics", "[]", nullable="0+", default=None, fields=[
        F("name", "string"),
        F("partition_indexes", "[]int32"),
    ]),
], valid="0", flexible="0+")

RESPONSE = Message("ListPartitionReassignmentsResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("replicas", "[]int32"),
            F("adding_replicas", "[]int32"),
            F("removing_replicas", "[]int32"),
        ]),
    ]),
], valid="0", flexible="0+")
