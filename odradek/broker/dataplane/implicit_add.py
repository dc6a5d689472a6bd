"""Transactions v2's implicit add (KIP-890 part 2): a transactional Produce v12+ adds its
partitions to the producer's transaction itself.

Kafka's partition leader sends the coordinator an AddPartitionsToTxn v4+ with
``verify_only`` false for each partition where the producer has no
transaction open yet (``ReplicaManager.handleProduceAppend``,
``AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation``:
ADD_PARTITION from v12), whatever ``transaction.partition.verification.enable``
says, and appends once the add is durable.  On one node the coordinator is a
local call; what stays is the order (the add, durable, before the append), the
retries of CONCURRENT_TRANSACTIONS (the previous end's markers still being
written: every ``add.partitions.to.txn.retry.backoff.ms`` until
``add.partitions.to.txn.retry.backoff.max.ms``, then 51 reaches the client,
unconverted for TV2) and the leader's rewriting of the coordinator's codes
(``AddPartitionsToTxnManager`` / ``postVerificationCallback``).
"""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.records import ATTRIBUTES_OFFSET, HEADER_SIZE, MAGIC_OFFSET, TRANSACTIONAL_MASK
from .producers import ProducerStates
from .topics import TopicRegistry


class Partitions(Protocol):
    """What the add reads of the data plane (``DataPlane``): the topics and producer states."""

    topics: TopicRegistry
    producers: ProducerStates

IMPLICIT_ADD_FROM_VERSION = 12
TV2 = 2  # the client transaction version the add records
RETRY_BACKOFF_S = 0.020  # add.partitions.to.txn.retry.backoff.ms (AddPartitionsToTxnConfig)
RETRY_MAX_S = 0.100  # add.partitions.to.txn.retry.backoff.max.ms
_PID_EPOCH = struct.Struct(">qh")
PRODUCER_ID_OFFSET = 43
_RETRIABLE = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


def transactional_producer(data: Any) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional magic-2 batch (header bytes only), else None."""
    if (isinstance(data, (bytes, bytearray, memoryview)) and len(data) >= HEADER_SIZE
            and data[MAGIC_OFFSET] == 2 and data[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK):
        return _PID_EPOCH.unpack_from(data, PRODUCER_ID_OFFSET)
    return None


def partitions_to_add(dataplane: Partitions, coordinator: Any, transactional_id: str,
                      topics: list[tuple[str, Any]]) -> list[tuple[str, Any, int, int]]:
    """The (topic, partition data, producer id, epoch) of a Produce v12+ whose transactional batch
    goes where its producer's transaction is not yet: neither open in the partition nor listed by
    the coordinator.  Missing topics and partitions are left to the append's own answer."""
    out = []
    for name, pd in topics:
        producer = transactional_producer(pd.records)
        if producer is None or dataplane.topics.log(name, pd.index) is None:
            continue
        pid, epoch = producer
        state = dataplane.producers.peek(name, pd.index)
        if state is not None and state.loaded and state.in_txn(pid, epoch):
            continue
        if coordinator.verify_partition(transactional_id, pid, epoch, name, pd.index) == ErrorCode.NONE:
            continue
        out.append((name, pd, pid, epoch))
    return out


async def add_implicitly(coordinator: Any, transactional_id: str, producer_id: int, producer_epoch: int,
                         partitions: list[tuple[str, int]]) -> ErrorCode:
    """Add ``partitions`` to the transaction as a v2 client's (durable on return); the code the
    Produce answers for them."""
    deadline = time.monotonic() + RETRY_MAX_S
    while True:
        promise = coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                             client_tv=TV2)
        error = promise.result() if promise.done else await _wait(promise)
        if error != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() >= deadline:
            return produce_error(error)
        await asyncio.sleep(RETRY_BACKOFF_S)


def produce_error(error: ErrorCode) -> ErrorCode:
    """The coordinator's answer as the leader reports it on a Produce v12+ (ADD_PARTITION)."""
    if error in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return ErrorCode(error)


def _wait(promise: Any) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    promise.add_done_callback(lambda result: fut.done() or fut.set_result(result))
    return fut
