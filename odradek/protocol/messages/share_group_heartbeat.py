"""ShareGroupHeartbeat (key 76, KIP-932): a share-group member's join, heartbeat and leave; the
coordinator answers with the member's whole assignment when it changed.  Only v1 exists from
4.1 on (v0 was 4.0's early access); flexible."""

from ..schema import F, Message

REQUEST = Message("ShareGroupHeartbeatRequest", [
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("rack_id", "string", nullable="0+", default=None),
    F("subscribed_topic_names", "[]string", nullable="0+", default=None),
], valid="1", flexible="0+")

RESPONSE = Message("ShareGroupHeartbeatResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+", default=None),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", "struct", nullable="0+", default=None, fields=[
        F("topic_partitions", "[]", fields=[F("topic_id", "uuid"), F("partitions", "[]int32")]),
    ]),
], valid="1", flexible="0+")
