"""ShareFetch (key 78, KIP-932): a share-group member acquires records of its share-partitions
under a time-limited lock, acknowledging what it got before (acks ride on the fetch).

v1 (Kafka 4.1, the first stable version; v0 was 4.0's early access and is not served) adds
MaxRecords/BatchSize and the answer's AcquisitionLockTimeoutMs; v2 (Kafka 4.2) adds
ShareAcquireMode (KIP-1206) and IsRenewAck with the RENEW acknowledge type (KIP-1222).
"""

from ..schema import F, Message

ACK_BATCHES = F("acknowledgement_batches", "[]", fields=[
    F("first_offset", "int64"),
    F("last_offset", "int64"),
    F("acknowledge_types", "[]int8"),
])

REQUEST = Message("ShareFetchRequest", [
    F("group_id", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+"),
    F("share_session_epoch", "int32"),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", default=0x7FFFFFFF),
    F("max_records", "int32", "1+"),
    F("batch_size", "int32", "1+"),
    F("share_acquire_mode", "int8", "2+", default=0),
    F("is_renew_ack", "bool", "2+", default=False),
    F("topics", "[]", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("partition_max_bytes", "int32", "0"),
            ACK_BATCHES,
        ]),
    ]),
    F("forgotten_topics_data", "[]", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]int32"),
    ]),
], valid="1-2", flexible="0+")

LEADER = F("current_leader", "struct", fields=[F("leader_id", "int32", default=-1),
                                               F("leader_epoch", "int32", default=-1)])
NODE_ENDPOINTS = F("node_endpoints", "[]", fields=[
    F("node_id", "int32"),
    F("host", "string"),
    F("port", "int32"),
    F("rack", "string", nullable="0+", default=None),
])

RESPONSE = Message("ShareFetchResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("acquisition_lock_timeout_ms", "int32", "1+"),
    F("responses", "[]", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("acknowledge_error_code", "int16"),
            F("acknowledge_error_message", "string", nullable="0+", default=None),
            LEADER,
            F("records", "records", nullable="0"),
            F("acquired_records", "[]", fields=[
                F("first_offset", "int64"),
                F("last_offset", "int64"),
                F("delivery_count", "int16"),
            ]),
        ]),
    ]),
    NODE_ENDPOINTS,
], valid="1-2", flexible="0+")
