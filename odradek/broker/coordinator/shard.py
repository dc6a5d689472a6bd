"""One offsets-topic partition: its log, the groups and offsets that hash to it.

Records are the only way persisted state changes.  An operation validates
against the in-memory state and returns a ``CoordinatorResult`` (records
and the answer); ``run`` hands the records to the coordinator runtime,
which appends them as **one batch** and, once durable, applies them with
``replay`` -- the same function that loads the shard from its log -- before
the answer leaves.  ``persisted_view()`` is what a reload must reproduce.

``replay`` also keeps the live groups in step with the records (Kafka's
``GroupMetadataManager.replay`` does the same): a group with a group record
or committed offsets exists; an Empty group with neither does not, so a
simple group is created by replaying its first offset and removed with its
last.  A classic group's membership (members, generation, timers, parked
answers) is live state the group machine keeps itself, as in Kafka's classic
protocol, where those records are written without being replayed; its
record is what a reload rebuilds it from (``rebuild``).

The shard is *Loading* until its log has been replayed, then *Active*.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog

from ...offsets.consumer_records import encode_cg_key, encode_cg_value, is_cg_key
from ...offsets.records import (
    CommitRecords,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    RecordDecodeError,
    RecordEncodeError,
    encode_key,
    encode_offset_records,
    encode_value,
)
from ...offsets.share_group_records import encode_sg_key, encode_sg_value, is_sg_key
from ...offsets.transactions import MarkerKey, TxnOffsetKey, TxnOffsets, decode_record, encode_txn_records
from ...protocol.errors import ErrorCode
from ...protocol.records import ControlRecordType, CorruptRecordError, parse_control_key
from ...storage import txn_index
from ...storage.txn_index import AbortedTxn
from ..clock import Clock
from ..runtime.loading import iter_log_batches
from ..runtime.promise import Promise
from ..runtime.runtime import CoordinatorResult, CoordinatorRuntime, EncodedRecord, ShardStatus, TxnBatch
from .config import CoordinatorConfig
from .consumer_group import ConsumerGroup, TopicsView, persisted, replay_consumer
from .group import ClassicGroup
from .group_configs import GroupConfig, GroupConfigs
from .share_group import ShareGroup, replay_share
from .share_group import persisted as share_persisted
from .state import GroupState

log = structlog.get_logger("odradek.coordinator")

_LOADING = ShardStatus.LOADING
TopicPartition = tuple[str, int]
Record = tuple[OffsetKey | GroupKey, OffsetValue | GroupValue | None]


def encode_records(records: list[Record]) -> list[EncodedRecord]:
    """The offsets topic's records as (key, value) bytes; raises RecordEncodeError.

    A transactional write (offset commits of a TxnOffsetCommit, or a marker)
    is never mixed with plain records: its first key tells.  An OffsetCommit's
    records come with their bytes (``CommitRecords``).
    """
    if type(records) is CommitRecords:
        return records.pairs
    first = type(records[0][0])
    if first is TxnOffsetKey or first is MarkerKey:
        return encode_txn_records(records)
    if first is OffsetKey and type(records[-1][0]) is OffsetKey:  # commits (a deletion ends with its group)
        return encode_offset_records(records)
    return [_encode_any(k, v) for k, v in records]


def _encode_any(key: Any, value: Any, version: int | None = None) -> EncodedRecord:
    """A record of a write that may mix kinds (a consumer group's records, a group's deletion)."""
    if is_cg_key(key):
        return encode_cg_key(key), encode_cg_value(key, value)
    if is_sg_key(key):
        return encode_sg_key(key), encode_sg_value(key, value)
    return encode_key(key), encode_value(value, version)


def emulated_encoder(config: CoordinatorConfig) -> Callable[[list[Record]], list[EncodedRecord]]:
    """``encode_records`` writing the value versions of an emulated older Kafka."""
    version = config.value_version

    def encode(records: list[Record]) -> list[EncodedRecord]:
        first = type(records[0][0])
        if first is TxnOffsetKey or first is MarkerKey:
            return encode_txn_records(records, version)
        return [_encode_any(k, v, version(v)) for k, v in records]
    return encode


class Shard:
    """The group coordinator's shard; its writes go through the coordinator runtime.

    ``await_fsync``: ``log.fsync.mode=always`` -- a write is applied and
    answered only once the fsync round covering it has completed.
    """

    def __init__(self, partition: int, log_, clock: Clock, *, runtime: CoordinatorRuntime | None = None,
                 await_fsync: bool = False, config: CoordinatorConfig | None = None):
        self.partition = partition
        self.log = log_
        self.clock = clock
        self.config = config if config is not None else CoordinatorConfig()
        self.status = ShardStatus.LOADING
        # live state
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 consumer groups: rebuilt by replay alone (``consumer_group.replay_consumer``)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # KIP-932 share groups: rebuilt by replay alone (``share_group.replay_share``)
        self.share_groups: dict[str, ShareGroup] = {}
        self.topics = TopicsView()  # what consumer groups know of topics (the coordinator shares its own)
        # per-group configs over the coordinator's defaults (the broker wires app.group_configs in)
        self.group_configs = GroupConfigs(GroupConfig(
            consumer_session_timeout_ms=self.config.consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms))
        self.stats: Counter[str] = Counter()  # events for metrics: rebalances, offset_commits
        # persisted view (what replay builds; what a reload must reproduce)
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.group_records: dict[str, GroupValue] = {}
        # transactional offsets pending until their marker, and producer epochs (``offsets/transactions.py``)
        self.txn = TxnOffsets()
        self._txn_groups = self.txn.groups  # the hot path's test: does any group have pending offsets?
        runtime = runtime if runtime is not None else CoordinatorRuntime()
        encode = emulated_encoder(self.config) if self.config.emulates_value_versions else encode_records
        self.writer = runtime.writer(self, log_, encode, clock.now_ms, await_fsync=await_fsync,
                                     on_accept=self._count_commits, on_txn_append=self._txn_appended)
        # the log's open transactions: producer id -> offset of its first transactional batch not
        # yet ended by a marker (Kafka's ProducerStateManager of this partition): what bounds the
        # log's last stable offset, below which the cleaner may compact
        self.open_txns: dict[int, int] = {}
        # append ``records`` as one batch; the promise yields None (written, durable and
        # replayed) or an ErrorCode.  The runtime stages, appends, waits for fsync if asked
        # and replays (``runtime/runtime.py``); tests replace it to hold or fail writes.
        self.write: Callable[..., Promise] = self.writer.write
        self.load_time_ms: float = 0.0
        self.loaded_records = 0

    # --- replay: the one function that turns records into state ----------------

    def replay(self, key: OffsetKey | GroupKey | TxnOffsetKey | MarkerKey | None, value: Any) -> None:
        """Apply one record: at load time, and on the live path once its batch is durable.

        Transactional records (``offsets/transactions.py``): an offset commit
        of a transactional batch is parked as pending, a marker commits or
        drops its producer's pending offsets.
        """
        kind = type(key)
        if kind is OffsetKey:
            if self._txn_groups:
                self.txn.plain(key, value)
            group_id = key.group
            offsets = self.offsets.get(group_id)
            if value is not None:
                if offsets is None:
                    offsets = self.offsets[group_id] = {}
                offsets[(key.topic, key.partition)] = value
            elif offsets is not None:
                offsets.pop((key.topic, key.partition), None)
                if not offsets:
                    del self.offsets[group_id]
        elif kind is GroupKey:
            group_id = key.group
            if value is None:
                self.group_records.pop(group_id, None)
                self.consumer_groups.pop(group_id, None)  # it removes a group of either kind (Kafka's replay)
            else:
                self.group_records[group_id] = value
        elif kind is TxnOffsetKey:
            if value is None:  # a transactional tombstone removes like any other (Kafka never writes one)
                self.replay(key.key, None)
                return
            self.txn.park(key.producer_id, key.producer_epoch, key.key, value)
            group_id = key.key.group
        elif kind is MarkerKey:
            self._replay_marker(key, value)
            return
        elif is_cg_key(key):
            group_id = replay_consumer(self.consumer_groups, key, value)
            if group_id is not None and self.status is not _LOADING:
                if group_id in self.consumer_groups:
                    self._drop_simple(group_id)
                else:  # the consumer group went: its offsets stay with a simple group
                    self.reconcile(group_id)
            return
        elif is_sg_key(key):
            replay_share(self.share_groups, key, value, self.clock.now_ms())
            return
        else:
            return
        # while loading, groups are built once at the end (``rebuild``)
        if self.status is not _LOADING and (value is None or group_id not in self.groups):
            self.reconcile(group_id)

    def replay_records(self, records: list[Record]) -> None:
        """A write's records, as ``replay`` of each in turn (the runtime's call per write).

        An OffsetCommit's (``CommitRecords``: one group, every value set) are stored in one loop
        when no transaction has offsets pending: the group's offsets found once, its live group
        made (``reconcile``) once, after them rather than after the first -- nothing in between
        reads it.
        """
        if type(records) is not CommitRecords or self._txn_groups or not records:
            replay = self.replay
            for key, value in records:
                replay(key, value)
            return
        group_id = records[0][0].group
        offsets = self.offsets.get(group_id)
        if offsets is None:
            offsets = self.offsets[group_id] = {}
        for key, value in records:
            offsets[(key.topic, key.partition)] = value
        if self.status is not _LOADING and group_id not in self.groups:
            self.reconcile(group_id)

    def _replay_marker(self, key: MarkerKey, coordinator_epoch: int) -> None:
        """A COMMIT/ABORT marker: the producer's pending offsets become committed (unless overtaken) or go."""
        txn = self.txn
        touched = {k.group for k in txn.pending.get(key.producer_id, ())}
        for offset_key, value, _extra in txn.end(key.producer_id, key.producer_epoch, key.commit,
                                                 coordinator_epoch):
            offsets = self.offsets.get(offset_key.group)
            if offsets is None:
                offsets = self.offsets[offset_key.group] = {}
            offsets[(offset_key.topic, offset_key.partition)] = value
        if self.status is not _LOADING:
            for group_id in touched:
                self.reconcile(group_id)

    def reconcile(self, group_id: str) -> None:
        """Make the live group agree with the records: exists with a record or offsets, not if Empty without.

        Pending transactional offsets count as offsets here (Kafka's
        ``GroupMetadata.hasOffsets``): their group exists until their marker.

        A group already live is kept as it is (its members are live state);
        one missing is built from its record, or as a simple group (no
        protocol type) when it only has offsets.
        """
        group = self.groups.get(group_id)
        if group_id in self.consumer_groups:  # its offsets belong to the consumer group
            if group is not None and group_id not in self.group_records:
                self.remove_group(group_id)
            return
        if group is None:
            value = self.group_records.get(group_id)
            if value is not None:
                self.groups[group_id] = self.adopt(ClassicGroup.from_record(group_id, value))
            elif group_id in self.offsets or group_id in self.txn.groups:
                self.groups[group_id] = self.adopt(
                    ClassicGroup(group_id, current_state_timestamp=self.clock.now_ms()))
        elif (group.state is GroupState.EMPTY and group_id not in self.offsets
              and group_id not in self.group_records and group_id not in self.txn.groups):
            self.remove_group(group_id)

    def _drop_simple(self, group_id: str) -> None:
        """A consumer group took the id: a simple (offsets-only) classic group there goes."""
        group = self.groups.get(group_id)
        if group is not None and group_id not in self.group_records:
            self.remove_group(group_id)

    def replay_record(self, key: OffsetKey | GroupKey, value: Any, _record: Any) -> None:
        """``replay`` as an ``OffsetsReplay`` callback (it passes the record along too)."""
        self.replay(key, value)

    def adopt(self, group: ClassicGroup) -> ClassicGroup:
        """Every live group of this shard reports its events into the shard's counters."""
        group.stats = self.stats
        return group

    def persisted_view(self) -> tuple[dict, dict]:
        """(groups -> GroupValue, group -> {tp: OffsetValue}) as the log says."""
        return ({g: v for g, v in self.group_records.items()},
                {g: dict(o) for g, o in self.offsets.items() if o})

    def consumer_view(self) -> dict:
        """The consumer groups as the log says (``consumer_group.persisted``)."""
        return {g: persisted(group) for g, group in self.consumer_groups.items()}

    def share_view(self) -> dict:
        """The share groups as the log says (``share_group.persisted``)."""
        return {g: share_persisted(group) for g, group in self.share_groups.items()}

    def txn_view(self) -> tuple[dict, dict]:
        """(pending transactional offsets per producer, producer epochs) as the log says."""
        return self.txn.state()

    # --- writing: through the coordinator runtime ----------------------------------------

    def _count_commits(self, records: list[Record]) -> None:
        """A write the log accepted: count its offset commits for the metrics."""
        if type(records) is CommitRecords:  # an OffsetCommit's: every record is one
            self.stats["offset_commits"] += len(records)
            return
        commits = 0
        for key, value in records:
            if value is not None and (type(key) is OffsetKey or type(key) is TxnOffsetKey):
                commits += 1
        self.stats["offset_commits"] += commits

    def run(self, result: CoordinatorResult, now: int | None = None, *, replay_now: bool = False) -> Promise:
        """Write an operation's records as one batch; a promise of its answer once they are replayed.

        ``now`` is the operation's reading of the clock, if it took one.  A
        record that cannot be encoded fails the write with INVALID_RECORD
        (nothing is written), which the operation's ``failed`` maps.
        """
        records = result.records
        if not records:
            return Promise.resolved(result.response)
        return result.answer_when(self._written(result, now, replay_now))

    def run_applied(self, result: CoordinatorResult, now: int | None = None) -> tuple[Promise, bool]:
        """``run(result, replay_now=True)``, and whether the records were applied (the log took
        them, or the turn staged them).

        For an operation that changes live state beyond its records -- a group's conversion
        retires the old group, answers its parked joins, arms the members' timers -- and must do
        so only when its records were applied: all of the operation or none of it, as Kafka's
        runtime discards a failed operation's records and reverts its state.  (A staged write
        whose append fails later fails the whole shard, which is then reloaded from its log.)
        """
        if not result.records:
            return Promise.resolved(result.response), True
        written = self._written(result, now, True)
        return result.answer_when(written), not (written.done and written.result() is not None)

    def _written(self, result: CoordinatorResult, now: int | None, replay_now: bool) -> Promise:
        """The write of ``result``'s records: a promise of None (written) or its ErrorCode."""
        records = result.records
        try:
            if replay_now:
                return self.write(records, now, replay_now=True)
            return self.write(records, now) if result.txn is None else self.write(records, now, txn=result.txn)
        except RecordEncodeError as exc:  # e.g. a string too long for its int16 length prefix
            log.warning("coordinator.write_unencodable", partition=self.partition, error=str(exc))
            return Promise.resolved(ErrorCode.INVALID_RECORD)

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with a commit written but not yet durable, or pending in a transaction.

        What OffsetFetch ``require_stable`` answers UNSTABLE_OFFSET_COMMIT
        for, and what expiry and group removal must leave alone.
        """
        pending = self.in_flight_offsets(group_id)
        if group_id in self.txn.groups:
            pending |= self.txn.pending_partitions(group_id)
        return pending

    def in_flight_offsets(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with a commit (plain or transactional) written but not yet durable."""
        pending = set()
        for key, _value in self.writer.pending_records():
            if type(key) is TxnOffsetKey:
                key = key.key
            if type(key) is OffsetKey and key.group == group_id:
                pending.add((key.topic, key.partition))
        return pending

    def has_pending_writes(self) -> bool:
        return self.writer.has_pending_writes()

    def _txn_appended(self, txn: TxnBatch, first_offset: int, pairs: list[EncodedRecord]) -> None:
        """A transactional batch landed at ``first_offset``: it opens the producer's transaction here,
        or (a marker) ends it; an ABORT that ends one is indexed (``.txnindex``, Kafka's format) so
        that the cleaner drops the aborted offsets rather than let them hide older committed ones."""
        commit = txn.control and parse_control_key(pairs[0][0]).type == ControlRecordType.COMMIT
        aborted = self._txn_batch(txn.producer_id, txn.control, commit, first_offset)
        if aborted is not None:
            try:
                self.log.append_aborted_txn(aborted)
            except OSError as exc:  # derived data: the next load rewrites it from the log
                log.warning("coordinator.txn_index_failed", partition=self.partition, error=str(exc))

    def _txn_batch(self, producer_id: int, control: bool, commit: bool, offset: int) -> AbortedTxn | None:
        """The log's open transactions, batch by batch (Kafka's ``ProducerStateManager``); the
        aborted-index entry of an ABORT marker that ended a transaction."""
        if not control:
            self.open_txns.setdefault(producer_id, offset)
            return None
        first = self.open_txns.pop(producer_id, None)
        if first is None or commit:
            return None  # an empty transaction here, or a resent marker
        lso = min(self.open_txns.values()) if self.open_txns else offset + 1
        return AbortedTxn(producer_id, first, offset, lso)

    def stable_offset(self) -> int | None:
        """First offset of the oldest open transaction (the log end bounds the LSO when None)."""
        return min(self.open_txns.values()) if self.open_txns else None

    # --- loading -------------------------------------------------------------------

    async def load(self, on_loaded: Callable[[Shard], None] | None = None,
                   yield_every: int = 200) -> None:
        """Replay the whole log, yielding to the loop regularly, then go Active."""
        started = time.perf_counter()
        count = 0
        batches = 0
        replay = self.replay
        aborted: list[AbortedTxn] = []
        for header, records in iter_log_batches(self.log):
            marker = None
            if header.is_transactional and records:
                commit = header.is_control and _is_commit(records[0])
                marker = self._txn_batch(header.producer_id, header.is_control, commit, records[0].offset)
            if marker is not None:
                aborted.append(marker)
            for record in records:
                try:
                    decoded = decode_record(header, record)
                    if decoded is not None:
                        replay(*decoded)
                        if not header.is_control:
                            count += 1
                except RecordDecodeError as exc:
                    log.error("coordinator.load_failed", partition=self.partition,
                              offset=record.offset, error=str(exc))
                    self.status = ShardStatus.FAILED
                    raise
            batches += 1
            if batches % yield_every == 0:
                await asyncio.sleep(0)
        await asyncio.to_thread(self._write_txn_index, aborted)
        if self.txn.pending:  # open transactions: their coordinator commits or aborts them
            log.info("coordinator.transactional_offsets_pending", partition=self.partition,
                     producers=len(self.txn.pending))
        self.rebuild()
        self.loaded_records = count
        self.load_time_ms = (time.perf_counter() - started) * 1000
        self.status = ShardStatus.ACTIVE
        log.info("coordinator.loaded", partition=self.partition, records=count,
                 groups=len(self.groups), ms=round(self.load_time_ms, 1))
        if on_loaded is not None:
            on_loaded(self)

    def _write_txn_index(self, aborted: list[AbortedTxn]) -> None:
        """Each segment's ``.txnindex`` made to hold exactly the aborted transactions the log says
        (an entry lost to a crash after its marker is written again)."""
        bases = [seg.base_offset for seg in self.log.segments]
        by_segment: dict[int, list[AbortedTxn]] = {b: [] for b in bases}
        for entry in aborted:
            i = bisect.bisect_right(bases, entry.last_offset) - 1
            if i >= 0:
                by_segment[bases[i]].append(entry)
        try:
            for base, entries in by_segment.items():
                txn_index.write_entries(self.log.directory, base, entries)
        except OSError as exc:
            log.warning("coordinator.txn_index_failed", partition=self.partition, error=str(exc))

    def rebuild(self) -> None:
        """Build the live groups from the persisted view: the end of every load (``reconcile``)."""
        self.groups = {}
        for group_id in self.consumer_groups:
            self._drop_simple(group_id)
        for group_id in self.group_records:
            self.reconcile(group_id)
        for group_id in self.offsets:
            self.reconcile(group_id)
        for group_id in self.txn.groups:
            self.reconcile(group_id)

    # --- group lookup ----------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is not None and group.state is GroupState.DEAD:
            return None
        return group

    def get_or_create_group(self, group_id: str) -> ClassicGroup:
        group = self.group(group_id)
        if group is None:
            group = self.adopt(ClassicGroup(group_id, current_state_timestamp=self.clock.now_ms()))
            self.groups[group_id] = group
        return group

    def remove_group(self, group_id: str, *, unloading: bool = False) -> None:
        """The group leaves the cache and is Dead; its pending member ids die with it."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        for member_id in list(group.pending_members):
            group.drop_pending(member_id)
        if group.state is not GroupState.DEAD:
            group.transition(GroupState.DEAD, self.clock.now_ms(), unloading=unloading)


def _is_commit(record: Any) -> bool:
    try:
        return parse_control_key(record.key).type == ControlRecordType.COMMIT
    except CorruptRecordError:
        return False  # replay refuses it with the load's error
