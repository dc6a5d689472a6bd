"""ShareAcknowledge (key 79, KIP-932): a share-group member acknowledges acquired records
(ACCEPT, RELEASE, REJECT; GAP for offsets without a record) without fetching.

v1 is Kafka 4.1's first stable version; v2 (Kafka 4.2) adds IsRenewAck with the RENEW
type (KIP-1222) and the answer's AcquisitionLockTimeoutMs.
"""

from ..schema import F, Message
from .share_fetch import ACK_BATCHES, LEADER, NODE_ENDPOINTS

REQUEST = Message("ShareAcknowledgeRequest", [
    F("group_id", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+"),
    F("share_session_epoch", "int32"),
    F("is_renew_ack", "bool", "2+", default=False),
    F("topics", "[]", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            ACK_BATCHES,
        ]),
    ]),
], valid="1-2", flexible="0+")

RESPONSE = Message("ShareAcknowledgeResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("acquisition_lock_timeout_ms", "int32", "2+"),
    F("responses", "[]", fields=[
        F("topic_id", "uuid"),
        F("partitions", "[]", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            LEADER,
        ]),
    ]),
    NODE_ENDPOINTS,
], valid="1-2", flexible="0+")
