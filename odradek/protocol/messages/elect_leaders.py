"""ElectLeaders (key 43): preferred or unclean leader election; on one node nothing to elect.

v1 adds ``election_type`` and a top-level error code; v2 is flexible.
"""

from ..schema import F, Message

REQUEST = Message("ElectLeadersRequest", [
    F("election_type", "int8", "1+"),
    F("topic_partitions", "[]", nullable="0+", fields=[
        F("topic", "string"),
        F("partitions", "[]int32"),
    ]),
    F("timeout_ms", "int32", default=60000),
], valid="0-2", flexible="2+")

RESPONSE = Message("ElectLeadersResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "1+"),
    F("replica_election_results", "[]", fields=[
        F("topic", "string"),
        F("partition_result", "[]", fields=[
            F("partition_id", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ]),
], valid="0-2", flexible="2+")
