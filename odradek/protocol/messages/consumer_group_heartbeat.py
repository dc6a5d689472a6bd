"""ConsumerGroupHeartbeat (key 68, KIP-848): the one RPC of the consumer group protocol --
join, heartbeat, leave; the coordinator computes the assignment.  Flexible from v0; v1 adds
the regular-expression subscription (and client-made member ids, KIP-1082)."""

from ..schema import F, Message

_TOPIC_PARTITIONS = [F("topic_id", "uuid"), F("partitions", "[]int32")]

REQUEST = Message("ConsumerGroupHeartbeatRequest", [
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),
    F("subscribed_topic_names", "[]string", nullable="0+", default=None),
    F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
    F("server_assignor", "string", nullable="0+", default=None),
    F("topic_partitions", "[]", nullable="0+", default=None, fields=_TOPIC_PARTITIONS),
], valid="0-1", flexible="0+")

RESPONSE = Message("ConsumerGroupHeartbeatResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+", default=None),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", "struct", nullable="0+", default=None, fields=[
        F("topic_partitions", "[]", fields=_TOPIC_PARTITIONS),
    ]),
], valid="0-1", flexible="0+")
