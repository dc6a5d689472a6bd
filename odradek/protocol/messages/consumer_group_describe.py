"""ConsumerGroupDescribe (key 69, KIP-848): a consumer group's epochs, assignor, members with
their current and target assignments.  Flexible from v0; v1 adds each member's type (KIP-1099)."""

from ..schema import F, Message

_ASSIGNMENT = [F("topic_partitions", "[]", fields=[
    F("topic_id", "uuid"), F("topic_name", "string"), F("partitions", "[]int32")])]

REQUEST = Message("ConsumerGroupDescribeRequest", [
    F("group_ids", "[]string"),
    F("include_authorized_operations", "bool"),
], valid="0-1", flexible="0+")

RESPONSE = Message("ConsumerGroupDescribeResponse", [
    F("throttle_time_ms", "int32"),
    F("groups", "[]", fields=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("assignor_name", "string"),
        F("members", "[]", fields=[
            F("member_id", "string"),
            F("instance_id", "string", nullable="0+", default=None),
            F("rack_id", "string", nullable="0+", default=None),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", "[]string"),
            F("subscribed_topic_regex", "string", nullable="0+", default=None),
            F("assignment", "struct", fields=_ASSIGNMENT),
            F("target_assignment", "struct", fields=_ASSIGNMENT),
            F("member_type", "int8", "1+", default=-1),
        ]),
        F("authorized_operations", "int32", default=-2147483648),
    ]),
], valid="0-1", flexible="0+")
