"""One ``__transaction_state`` partition: its log and the transactional ids that hash to it.

As the group coordinator's shard: operations validate against the state and
return a ``CoordinatorResult``; ``run`` writes its records through the
coordinator runtime, which replays them (``odradek.transactions.replay``)
once durable and only then releases the answer.  Loading replays the log
with the same function; the shard answers COORDINATOR_LOAD_IN_PROGRESS until
it is Active.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from ...protocol.errors import ErrorCode
from ...transactions.records import TxnKey, TxnRecordError, TxnValue, decode_key, decode_value
from ...transactions.records import encode_key as _encode_key
from ...transactions.records import encode_value as _encode_value
from ...transactions.replay import TxnMetadata, replay
from ..clock import Clock
from ..runtime.loading import replay_log
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, CoordinatorRuntime, EncodedRecord, ShardStatus

log = structlog.get_logger("odradek.txn")

Record = tuple[TxnKey, TxnValue | None]


def encode_records(records: list[Record], value_version: int = 0) -> list[EncodedRecord]:
    return [(_encode_key(k), _encode_value(v, value_version)) for k, v in records]


class TxnShard:
    """The transaction coordinator's shard (Kafka's ``TransactionStateManager`` per partition)."""

    def __init__(self, partition: int, log_, clock: Clock, *, runtime: CoordinatorRuntime,
                 await_fsync: bool = False, value_version: Callable[[], int] = lambda: 0) -> None:
        """``value_version()``: the value version to write now (1 once the cluster's
        transaction.version is 1 or more, ``TransactionVersion.transactionLogValueVersion``)."""
        self.partition = partition
        self.log = log_
        self.clock = clock
        self.status = ShardStatus.LOADING
        self.txns: dict[str, TxnMetadata] = {}
        self.writer = runtime.writer(self, log_, lambda records: encode_records(records, value_version()),
                                     clock.now_ms, await_fsync=await_fsync)
        # tests replace it to hold or fail writes (as the group shard's)
        self.write: Callable[..., Promise] = self.writer.write
        self.loaded_records = 0

    def replay(self, key: TxnKey | None, value: TxnValue | None) -> None:
        replay(self.txns, key, value)

    def run(self, result: CoordinatorResult) -> Promise:
        """Write the operation's records as one batch; a promise of its answer once replayed."""
        if not result.records:
            return Promise.resolved(result.response)
        try:
            written = self.write(result.records)
        except (ValueError, OverflowError) as exc:  # unencodable (a name too long for int16)
            log.warning("txn.write_unencodable", partition=self.partition, error=str(exc))
            written = Promise.resolved(ErrorCode.INVALID_RECORD)
        return result.answer_when(written)

    def persisted_view(self) -> dict[str, TxnValue]:
        """What a reload must rebuild: every id's state as its last record says."""
        return {tid: meta.persisted() for tid, meta in self.txns.items() if meta.last_update_ms != -1}

    def _load_failed(self, offset: int, exc: Exception) -> None:
        log.error("txn.load_failed", partition=self.partition, offset=offset, error=str(exc))
        self.status = ShardStatus.FAILED

    async def load(self, yield_every: int = 200) -> None:
        """Replay the whole log, yielding to the loop regularly, then go Active."""
        started = time.perf_counter()
        self.txns = {}
        # nothing transactional is written here: replay_log skips stray markers
        count = await replay_log(self.log, _decode, self.replay, self._load_failed, TxnRecordError, yield_every)
        self.loaded_records = count
        self.status = ShardStatus.ACTIVE
        log.info("txn.loaded", partition=self.partition, records=count, transactional_ids=len(self.txns),
                 ms=round((time.perf_counter() - started) * 1000, 1))


def _decode(record: Any) -> tuple[Any, Any]:
    return (decode_key(record.key) if record.key is not None else None), decode_value(record.value)
