"""TxnOffsetCommit (key 28): a transactional producer's consumed offsets, pending until its transaction ends.

Sent to the group coordinator after AddOffsetsToTxn.  v2 adds the committed
leader epoch, v3 (KIP-447) the consumer's member id, generation and group
instance id and is flexible; v4 only adds the TRANSACTION_ABORTABLE error
(KIP-890); v5 (transactions v2) adds the group's offsets partition to the
transaction itself, with no AddOffsetsToTxn before it.
"""

from ..schema import F, Message

REQUEST = Message("TxnOffsetCommitRequest", [
    F("transactional_id", "string"),
    F("group_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("generation_id", "int32", "3+", default=-1),
    F("member_id", "string", "3+", default=""),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "2+", default=-1),
            F("committed_metadata", "string", nullable="0+"),
        ]),
    ]),
], valid="0-5", flexible="3+")

RESPONSE = Message("TxnOffsetCommitResponse", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]", fields=[
        F("name", "string"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
], valid="0-5", flexible="3+")
