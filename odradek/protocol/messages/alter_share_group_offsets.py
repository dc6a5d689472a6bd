"""AlterShareGroupOffsets (key 91, KIP-932): set the start offset of an empty share group's
share-partitions (their in-flight state is discarded)."""

from ..schema import F, Message

REQUEST = Message("AlterShareGroupOffsetsRequest", [
    F("group_id", "string"),
    F("topics", "[]", fields=[
        F("topic_name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("start_offset", "int64"),
        ]),
    ]),
], valid="0", flexible="0+")

RESPONSE = Message("AlterShareGroupOffsetsResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("responses", "[]", fields=[
        F("topic_name", "string"),
        F("topic_id", "uuid"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
        ]),
    ]),
], valid="0", flexible="0+")
