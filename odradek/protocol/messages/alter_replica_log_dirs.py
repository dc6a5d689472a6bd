"""AlterReplicaLogDirs (key 34, KIP-113): move partitions to other log dirs of a broker.
v1 is v0 (Kafka 4 removed v0, KIP-896); v2 is flexible."""

from ..schema import F, Message

REQUEST = Message("AlterReplicaLogDirsRequest", [
    F("dirs", "[]", fields=[
        F("path", "string"),
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]int32"),
        ]),
    ]),
], valid="0-2", flexible="2+")

RESPONSE = Message("AlterReplicaLogDirsResponse", [
    F("throttle_time_ms", "int32"),
    F("results", "[]", fields=[
        F("topic_name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
], valid="0-2", flexible="2+")
