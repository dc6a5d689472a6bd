"""The one table of APIs: key -> name, declarations and the versions declared.

What the broker *serves* is decided by the broker's handler table (which
reads this registry); ApiVersions, the docs compatibility table and the
tests all derive from those two tables.  Message modules are imported on
first use so start-up only pays for the APIs a client actually calls.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from .schema import Message, Versions


@dataclass
class ApiSpec:
    key: int
    name: str
    module: str
    declared: Versions
    _mod: object = field(default=None, repr=False)

    def _load(self):
        if self._mod is None:
            self._mod = importlib.import_module(f"odradek.protocol.messages.{self.module}")
        return self._mod

    @property
    def request(self) -> Message:
        return self._load().REQUEST

    @property
    def response(self) -> Message:
        return self._load().RESPONSE

    def is_flexible(self, version: int) -> bool:
        return self.request.is_flexible(version)


def _spec(key: int, name: str, module: str, declared: str) -> ApiSpec:
    return ApiSpec(key, name, module, Versions.parse(declared))


APIS: dict[int, ApiSpec] = {s.key: s for s in [
    _spec(0, "Produce", "produce", "0-13"),
    _spec(1, "Fetch", "fetch", "0-18"),
    _spec(2, "ListOffsets", "list_offsets", "0-11"),
    _spec(3, "Metadata", "metadata", "0-13"),
    _spec(8, "OffsetCommit", "offset_commit", "0-10"),
    _spec(9, "OffsetFetch", "offset_fetch", "0-10"),
    _spec(10, "FindCoordinator", "find_coordinator", "0-6"),
    _spec(11, "JoinGroup", "join_group", "0-9"),
    _spec(12, "Heartbeat", "heartbeat", "0-4"),
    _spec(13, "LeaveGroup", "leave_group", "0-5"),
    _spec(14, "SyncGroup", "sync_group", "0-5"),
    _spec(15, "DescribeGroups", "describe_groups", "0-6"),
    _spec(16, "ListGroups", "list_groups", "0-5"),
    _spec(17, "SaslHandshake", "sasl_handshake", "0-1"),
    _spec(18, "ApiVersions", "api_versions", "0-4"),
    _spec(19, "CreateTopics", "create_topics", "0-7"),
    _spec(20, "DeleteTopics", "delete_topics", "0-6"),
    _spec(21, "DeleteRecords", "delete_records", "0-2"),
    _spec(22, "InitProducerId", "init_producer_id", "0-5"),
    _spec(23, "OffsetForLeaderEpoch", "offset_for_leader_epoch", "0-4"),
    _spec(24, "AddPartitionsToTxn", "add_partitions_to_txn", "0-5"),
    _spec(25, "AddOffsetsToTxn", "add_offsets_to_txn", "0-4"),
    _spec(26, "EndTxn", "end_txn", "0-5"),
    _spec(28, "TxnOffsetCommit", "txn_offset_commit", "0-5"),
    _spec(29, "DescribeAcls", "describe_acls", "0-3"),
    _spec(30, "CreateAcls", "create_acls", "0-3"),
    _spec(31, "DeleteAcls", "delete_acls", "0-3"),
    _spec(32, "DescribeConfigs", "describe_configs", "0-4"),
    _spec(33, "AlterConfigs", "alter_configs", "0-2"),
    _spec(34, "AlterReplicaLogDirs", "alter_replica_log_dirs", "0-2"),
    _spec(35, "DescribeLogDirs", "describe_log_dirs", "0-4"),
    _spec(36, "SaslAuthenticate", "sasl_authenticate", "0-2"),
    _spec(37, "CreatePartitions", "create_partitions", "0-3"),
    _spec(42, "DeleteGroups", "delete_groups", "0-2"),
    _spec(43, "ElectLeaders", "elect_leaders", "0-2"),
    _spec(44, "IncrementalAlterConfigs", "incremental_alter_configs", "0-1"),
    _spec(45, "AlterPartitionReassignments", "alter_partition_reassignments", "0-1"),
    _spec(46, "ListPartitionReassignments", "list_partition_reassignments", "0"),
    _spec(47, "OffsetDelete", "offset_delete", "0"),
    _spec(48, "DescribeClientQuotas", "describe_client_quotas", "0-1"),
    _spec(49, "AlterClientQuotas", "alter_client_quotas", "0-1"),
    _spec(50, "DescribeUserScramCredentials", "describe_user_scram_credentials", "0"),
    _spec(51, "AlterUserScramCredentials", "alter_user_scram_credentials", "0"),
    _spec(57, "UpdateFeatures", "update_features", "0-2"),
    _spec(60, "DescribeCluster", "describe_cluster", "0-2"),
    _spec(61, "DescribeProducers", "describe_producers", "0"),
    _spec(65, "DescribeTransactions", "describe_transactions", "0"),
    _spec(66, "ListTransactions", "list_transactions", "0-2"),
    _spec(68, "ConsumerGroupHeartbeat", "consumer_group_heartbeat", "0-1"),
    _spec(69, "ConsumerGroupDescribe", "consumer_group_describe", "0-1"),
    _spec(71, "GetTelemetrySubscriptions", "get_telemetry_subscriptions", "0"),
    _spec(72, "PushTelemetry", "push_telemetry", "0"),
    _spec(74, "ListConfigResources", "list_config_resources", "0-1"),
    _spec(75, "DescribeTopicPartitions", "describe_topic_partitions", "0"),
    _spec(76, "ShareGroupHeartbeat", "share_group_heartbeat", "1"),
    _spec(77, "ShareGroupDescribe", "share_group_describe", "1"),
    _spec(78, "ShareFetch", "share_fetch", "1-2"),
    _spec(79, "ShareAcknowledge", "share_acknowledge", "1-2"),
    _spec(90, "DescribeShareGroupOffsets", "describe_share_group_offsets", "0-1"),
    _spec(91, "AlterShareGroupOffsets", "alter_share_group_offsets", "0"),
    _spec(92, "DeleteShareGroupOffsets", "delete_share_group_offsets", "0"),
]}
