"""OffsetCommit (key 8): a member stores its consumed positions; the hottest group request.

v1 alone carries a per-partition commit timestamp, v2-v4 a request-wide
retention time; v5 dropped both (the broker's offsets.retention.minutes
rules instead, KIP-211).  v7 adds static membership, v8 is flexible, v10 (KIP-848) names
topics by id instead of name.
"""

from ..schema import F, Message

REQUEST = Message("OffsetCommitRequest", [
    F("group_id", "string"),
    F("generation_id_or_member_epoch", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", nullable="7+", default=None),
    F("retention_time_ms", "int64", "2-4", default=-1),
    F("topics", "[]", fields=[
        F("name", "string", "0-9"),
        F("topic_id", "uuid", "10+"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "6+", default=-1),
            F("commit_timestamp", "int64", "1", default=-1),
            F("committed_metadata", "string", nullable="0+"),
        ]),
    ]),
], valid="0-10", flexible="8+")

RESPONSE = Message("OffsetCommitResponse", [
    F("throttle_time_ms", "int32", "3+"),
    F("topics", "[]", fields=[
        F("name", "string", "0-9"),
        F("topic_id", "uuid", "10+"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
], valid="0-10", flexible="8+")
