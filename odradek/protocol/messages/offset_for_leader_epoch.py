"""OffsetForLeaderEpoch (key 23): consumers validate a position against the leader's log (KIP-320).

v1 adds the answer's ``leader_epoch``; v2 the request's ``current_leader_epoch``
and throttle time; v3 ``replica_id`` (-1 consumers, -2 by default); v4 is
flexible.  Kafka 4 serves 2-4; we declare 0-4 as its JSON did until 4.0.
"""

from ..schema import F, Message

REQUEST = Message("OffsetForLeaderEpochRequest", [
    F("replica_id", "int32", "3+", default=-2),
    F("topics", "[]", fields=[
        F("topic", "string"),
        F("partitions", "[]", fields=[
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "2+", default=-1),
            F("leader_epoch", "int32"),
        ]),
    ]),
], valid="0-4", flexible="4+")

RESPONSE = Message("OffsetForLeaderEpochResponse", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]", fields=[
        F("topic", "string"),
        F("partitions", "[]", fields=[
            F("error_code", "int16"),
            F("partition", "int32"),
            F("leader_epoch", "int32", "1+", default=-1),
            F("end_offset", "int64", default=-1),
        ]),
    ]),
], valid="0-4", flexible="4+")
