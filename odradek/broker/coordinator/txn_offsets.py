"""Transactional offsets: TxnOffsetCommit, and the markers that end them in ``__consumer_offsets``.

Kafka's ``GroupCoordinatorService.commitTransactionalOffsets`` /
``OffsetMetadataManager.commitTransactionalOffset`` (and the older
``GroupCoordinator.handleTxnCommitOffsets``), ``completeTransaction``.

A TxnOffsetCommit is validated like an OffsetCommit with the KIP-447 rules
for transactions (no REBALANCE_IN_PROGRESS, a v0-v2 request without member
fields is accepted in any group state), then its offsets are written as one
**transactional batch** of the producer; replaying it parks them as pending
(``offsets/transactions.py``).  They become committed, or are dropped, when
the transaction coordinator writes its marker to the partition
(``write_txn_marker``): a control batch, replayed by the same ``Shard.replay``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from ...offsets.records import offset_key, offset_value
from ...offsets.transactions import MarkerKey, TxnOffsetKey
from ...protocol.errors import ErrorCode
from ...storage.log_manager import OFFSETS_TOPIC
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, ShardStatus, TxnBatch
from ..txn_contracts import TxnMarker
from .consumer_group import validate_consumer_commit
from .group import validate_member
from .offsets import _COMMIT_WRITE_ERRORS, PartitionCount, metadata_too_large, partition_exists
from .shard import Shard
from .state import GroupState

if TYPE_CHECKING:
    from .shards import GroupShards

log = structlog.get_logger("odradek.coordinator")

_E = ErrorCode
_TRANSACTION_ABORTABLE = 120  # KIP-890 (TxnOffsetCommit v4+); older versions get INVALID_TXN_STATE


class TxnCommitRequest(NamedTuple):
    """The request-level fields of a TxnOffsetCommit (v3+ member fields; defaults before)."""

    transactional_id: str
    group_id: str | None
    producer_id: int
    producer_epoch: int
    generation: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    version: int = 3


# (topic, partition, offset, leader epoch, metadata), in request order
TxnPartition = tuple[str, int, int, int, "str | None"]


def commit_txn_offsets(coordinator: GroupShards, request: TxnCommitRequest, partitions: list[TxnPartition],
                       partition_count: PartitionCount, verifier: Any = None) -> Promise:
    """Validate, write one transactional batch, answer once durable; yields one ErrorCode per partition.

    ``verifier``: the transaction coordinator (``txn_contracts.TxnVerifier``),
    asked whether the offsets partition is in the producer's transaction
    (KIP-890, Kafka 3.6+), when there is one.
    """
    errors = [_E.NONE] * len(partitions)
    cache: dict[str, int | None] = {}
    accepted = []
    for i, p in enumerate(partitions):
        if partition_exists(partition_count, cache, p[0], p[1]):
            accepted.append(i)
        else:
            errors[i] = _E.UNKNOWN_TOPIC_OR_PARTITION
    if not accepted:
        return Promise.resolved(errors)
    shard, error = coordinator.check(request.group_id, allow_empty=False)
    if error is _E.NONE:
        error = _verify(shard, request, verifier)
    if error is _E.NONE:
        error = validate_txn_commit(shard, request)
    if error is _E.NONE:
        error = shard.txn.check_epoch(request.producer_id, request.producer_epoch)
    if error is not _E.NONE:
        for i in accepted:
            errors[i] = error
        return Promise.resolved(errors)
    return _store(shard, coordinator.config.offset_metadata_max_bytes, request, partitions, accepted, errors)


def _verify(shard: Shard, request: TxnCommitRequest, verifier: Any) -> ErrorCode:
    """KIP-890: the offsets partition must be in the producer's ongoing transaction (``AddOffsetsToTxn`` done).

    Skipped when the producer already has offsets pending here (its
    transaction is open in this partition), as Kafka's verification is.
    Codes as ``AddPartitionsToTxnManager`` and ``maybeConvertOffsetCommitError``
    rewrite them for the client.
    """
    if verifier is None or shard.txn.has_producer_pending(request.producer_id):
        return _E.NONE
    error = verifier.verify_partition(request.transactional_id, request.producer_id, request.producer_epoch,
                                      OFFSETS_TOPIC, shard.partition)
    return verification_error(error, request.version)


def verification_error(error: ErrorCode, version: int) -> ErrorCode:
    """A coordinator's answer to the verification (or, from v5, the implicit add) of the offsets
    partition, as the TxnOffsetCommit client of ``version`` gets it."""
    if error == _E.NONE:
        return _E.NONE
    if error == _E.PRODUCER_FENCED:
        return _E.INVALID_PRODUCER_EPOCH
    if error in (_TRANSACTION_ABORTABLE, _E.INVALID_TXN_STATE):  # not in the transaction
        return _TRANSACTION_ABORTABLE if version >= 4 else _E.INVALID_TXN_STATE
    if error == _E.NETWORK_EXCEPTION:
        return _E.COORDINATOR_LOAD_IN_PROGRESS
    return error


def validate_txn_commit(shard: Shard, request: TxnCommitRequest) -> ErrorCode:
    """The group checks of a transactional commit (``ClassicGroup.validateOffsetCommit`` with isTransactional).

    An absent group is accepted with generation < 0 (the replay of the first
    offset creates a simple group), else ILLEGAL_GENERATION, as Kafka's
    group coordinator answers.  No session is reset and no group state
    other than Dead refuses: the producer is not a member's heartbeat.
    """
    if shard.consumer_groups and request.group_id in shard.consumer_groups:
        return validate_consumer_commit(shard.consumer_groups[request.group_id], request.member_id,
                                        request.generation, 0, transactional=True)
    if shard.share_groups and request.group_id in shard.share_groups:
        return _E.GROUP_ID_NOT_FOUND  # ShareGroup.validateOffsetCommit
    group = shard.groups.get(request.group_id)
    generation = request.generation
    if group is None:
        return _E.NONE if generation < 0 else _E.ILLEGAL_GENERATION
    if group.state is GroupState.DEAD:
        return _E.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.state is GroupState.EMPTY:
        return _E.NONE
    if generation >= 0 or request.member_id or request.group_instance_id is not None:
        error = validate_member(group, request.member_id, request.group_instance_id)
        if error is not _E.NONE:
            return error
        if generation != group.generation:
            return _E.ILLEGAL_GENERATION
    return _E.NONE


def _store(shard: Shard, max_metadata: int, request: TxnCommitRequest, partitions: list[TxnPartition],
           accepted: list[int], errors: list[ErrorCode]) -> Promise:
    now = shard.clock.now_ms()
    pid, epoch = request.producer_id, request.producer_epoch
    records = []
    for i in accepted:
        topic, partition, offset, leader_epoch, metadata = partitions[i]
        if metadata_too_large(metadata, max_metadata):
            errors[i] = _E.OFFSET_METADATA_TOO_LARGE
            continue
        value = offset_value(offset, leader_epoch, metadata or "", now, -1)
        records.append((TxnOffsetKey(pid, epoch, offset_key(request.group_id, topic, partition)), value))
    return shard.run(CoordinatorResult(records, errors, _failed, txn=TxnBatch(pid, epoch)), now)


def _failed(errors: list[ErrorCode], error: ErrorCode) -> list[ErrorCode]:
    mapped = _COMMIT_WRITE_ERRORS.get(error, error)
    return [mapped if e is _E.NONE else e for e in errors]


# --- markers --------------------------------------------------------------------------------------

# what a marker's write failure answers the transaction coordinator (``KafkaApis.handleWriteTxnMarkersRequest``
# turns the group coordinator's 14/15/16 into NOT_LEADER_OR_FOLLOWER, which it retries)
_MARKER_WRITE_ERRORS = {
    _E.NOT_COORDINATOR: _E.NOT_LEADER_OR_FOLLOWER,
    _E.COORDINATOR_LOAD_IN_PROGRESS: _E.NOT_LEADER_OR_FOLLOWER,
    _E.COORDINATOR_NOT_AVAILABLE: _E.NOT_LEADER_OR_FOLLOWER,
}


def write_marker(coordinator: GroupShards, topic: str, partition: int, marker: TxnMarker) -> Promise:
    """Write the marker's control batch to ``__consumer_offsets-partition``; a promise of the ErrorCode.

    Resolves once it is durable and replayed (the producer's pending offsets
    committed or dropped).  Refused with INVALID_PRODUCER_EPOCH for an older
    producer epoch than the partition saw, TRANSACTION_COORDINATOR_FENCED for
    an older coordinator epoch (``ProducerAppendInfo.appendEndTxnMarker``).
    """
    if topic != OFFSETS_TOPIC or not 0 <= partition < len(coordinator.shards):
        return Promise.resolved(_E.UNKNOWN_TOPIC_OR_PARTITION)
    shard = coordinator.shards[partition]
    if shard.status is not ShardStatus.ACTIVE:
        return Promise.resolved(_E.NOT_LEADER_OR_FOLLOWER)
    error = shard.txn.check_marker(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                   marker.transaction_version)
    if error is not _E.NONE:
        log.warning("coordinator.txn_marker_refused", partition=partition, producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch, coordinator_epoch=marker.coordinator_epoch,
                    error=error.name)
        return Promise.resolved(error)
    key = MarkerKey(marker.producer_id, marker.producer_epoch, marker.commit)
    txn = TxnBatch(marker.producer_id, marker.producer_epoch, control=True)
    return shard.run(CoordinatorResult([(key, marker.coordinator_epoch)], _E.NONE, _marker_failed, txn=txn))


def _marker_failed(_response: ErrorCode, error: ErrorCode) -> ErrorCode:
    return _MARKER_WRITE_ERRORS.get(error, error)
