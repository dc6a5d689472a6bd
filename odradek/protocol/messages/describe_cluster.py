"""DescribeCluster (key 60): admin clients find brokers and the controller.

Flexible from v0; v1 adds ``endpoint_type`` (1 = brokers, 2 = controllers), v2 (KIP-1073)
asks for fenced brokers too and marks each broker fenced or not.
"""

from ..schema import F, Message

REQUEST = Message("DescribeClusterRequest", [
    F("include_cluster_authorized_operations", "bool"),
    F("endpoint_type", "int8", "1+", default=1),
    F("include_fenced_brokers", "bool", "2+"),
], valid="0-2", flexible="0+")

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
        F("is_fenced", "bool", "2+"),
    ]),
    F("cluster_authorized_operations", "int32", default=-2147483648),
], valid="0-2", flexible="0+")
