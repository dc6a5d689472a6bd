"""DescribeProducers (v0): the producer state each partition keeps (Kafka's
``ReplicaManager.activeProducerState``), for ``kafka-transactions.sh describe-producers``
and admin clients looking for a hanging transaction."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

from ...protocol.errors import ErrorCode
from ...storage.errors import LogClosedError
from ..dispatch import HandlerTable, RequestContext

if TYPE_CHECKING:
    from ..dataplane import DataPlane, TopicRegistry


class ProducerStateServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the topics and their producer
    state."""

    topics: TopicRegistry
    dataplane: DataPlane


def register(table: HandlerTable, app: ProducerStateServices) -> None:
    table.register(61, partial(describe_producers, app))


async def describe_producers(app: ProducerStateServices, ctx: RequestContext, req) -> dict:
    await app.dataplane.barrier(ctx.connection_id)
    topics = []
    for t in req.topics:
        parts = [await _partition(app, t.name, index) for index in t.partition_indexes]
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def _partition(app: ProducerStateServices, topic: str, index: int) -> dict:
    answer = {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
              "active_producers": []}
    log = app.topics.log(topic, index)
    if log is None:
        answer.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      error_message=f"{topic}-{index} does not exist")
        return answer
    try:
        state = await app.dataplane.ensure_loaded(log)
    except LogClosedError:
        answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return answer
    answer["active_producers"] = [
        {"producer_id": pid, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
         "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
         "current_txn_start_offset": e.txn_first_offset}
        for pid, e in state.entries.items()]
    return answer
