"""DescribeCluster (key 60): admin clients find brokers and the controller.

Flexible from v0; v1 adds ``endpoint_type`` (1 = brokers, 2 = controllers).
"""

from ..schema import F, Message

REQUEST = Message("DescribeClusterRequest", [
    F("include_cluster_authorized_operations", "bool"),
    F("endpoint_type", "int8", "1+", default=1),
], valid="0-1", flexible="0+")

RESPONSE = Message("DescribeClusterResponse", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("endpoint_type", "int8", "1+", default=1),
    F("cluster_id", "string"),
    F("controller_id", "int32", default=-1),
    F("brokers", "[]", fields=[
        F("broker_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", nullable="0+", default=None),
    ]),
    F("cluster_authorized_operations", "int32", default=-2147483648),
], valid="0-1", flexible="0+")
