"""Reports over the ``odradek-log`` rows: plain DataFrame SQL, written as Parquet and CSV.

Every report takes the records DataFrame (the data source, or the Parquet
the CLI writes once from it) and returns a DataFrame; nothing is collected
to the driver except by the HTML summary, which only takes small
aggregates.  ``source_dir`` is part of every key: two brokers' data dirs are
two independent worlds (each has its own ``__consumer_offsets``).

Semantics follow how the coordinator rebuilds state from the log
(Kafka's ``GroupMetadataManager.loadGroupsAndOffsets``), so that :func:`latest_offsets` equals what
OffsetFetch returns from a broker opened on the same data dir:

- the record with the highest offset wins per key; a tombstone deletes;
- a transactional offset commit counts only once a COMMIT marker of its
  producer follows it (an ABORT, or no marker yet, discards it);
- group records: Stable with members, Empty without, a tombstone removes the
  group (its offsets stay until their own tombstones).

The KIP-211 expiry rules are not implemented here: :func:`expiry_audit`
calls ``odradek.offsets.expiry``, the functions the broker's sweep
uses, so the audit cannot drift from what the broker does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ArrayType, MapType, StructType

from odradek.offsets import expiry as offset_expiry
from odradek.offsets.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from odradek.offsets.records import OffsetValue
from odradek.pipeline.decode import (
    ARROW_SCHEMA,
    CONSUMER_GROUP,
    CONTROL,
    DATA,
    GROUP_METADATA,
    OFFSET_COMMIT,
    OFFSETS_TOPIC,
    SHARE_GROUP,
    SHARE_STATE,
    TRANSACTION,
)
from odradek.pipeline.html import Summary, bar_chart, line_chart, table
from odradek.pipeline.partial import OVERVIEW_PARTIAL, PARTIAL, RATE_PARTIAL, window_ms
from odradek.shares import records as share_records
from odradek.shares import state as share_state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COMMIT_MARKER = 1  # ControlRecordType.COMMIT

# --- helpers ------------------------------------------------------------------------------------


def is_aggregated(df: DataFrame) -> bool:
    """Rows of the data source's ``aggregate=reports`` (records and partial aggregates), not every record."""
    return PARTIAL in df.columns


def records_of(df: DataFrame) -> DataFrame:
    """The record rows of either input, in the record schema (partial-aggregate rows dropped)."""
    if not is_aggregated(df):
        return df
    return df.where(F.col(PARTIAL).isNull()).select(*ARROW_SCHEMA.names)


def _partials(df: DataFrame, kind: str) -> DataFrame:
    return df.where(F.col(PARTIAL) == kind)


_MARKER = "_m"
_MARKER_TYPE = "struct<marker_type:int,marker_offset:bigint,marker_timestamp:bigint>"


def with_next_marker(txn: DataFrame, df: DataFrame) -> DataFrame:
    """``txn`` rows with ``_m``: the first COMMIT/ABORT marker of their producer after them, NULL if none yet.

    Kafka's load parks a transactional commit under its producer id until
    the producer's next marker in the same offsets partition
    (``GroupMetadataManager``): ``_m`` is that marker (``marker_type``,
    ``marker_offset``, ``marker_timestamp``).  The commits and the markers
    of each (data dir, offsets partition, producer) are one window, newest
    first; each commit takes the last marker seen before it -- one sort,
    not a join of every commit with every marker of its producer (a
    long-lived transactional producer has thousands of both).
    """
    keys = ["source_dir", "partition", "producer_id"]
    marker = F.struct(F.col("control_type").alias("marker_type"), F.col("offset").alias("marker_offset"),
                      F.col("timestamp").alias("marker_timestamp")).cast(_MARKER_TYPE)
    markers = (df.where((F.col("record_type") == CONTROL) & (F.col("topic") == OFFSETS_TOPIC))
               .select(*keys, "offset", marker.alias("_marker")))
    newest_first = (Window.partitionBy(*keys).orderBy(F.desc("offset"))
                    .rowsBetween(Window.unboundedPreceding, -1))
    both = (txn.withColumn("_marker", F.lit(None).cast(_MARKER_TYPE))
            .unionByName(markers, allowMissingColumns=True))
    return (both.withColumn(_MARKER, F.last("_marker", ignorenulls=True).over(newest_first))
            .where(F.col("_marker").isNull()).drop("_marker"))


def offset_commits(df: DataFrame) -> DataFrame:
    """Offset-commit records that take effect (non-transactional, or transactional and committed).

    A transactional commit applies once its producer's next marker
    (:func:`with_next_marker`) is a COMMIT; an ABORT drops it.
    """
    commits = df.where((F.col("record_type") == OFFSET_COMMIT) & F.col("decode_error").isNull())
    plain = commits.where(~F.col("is_transactional"))
    txn = commits.where(F.col("is_transactional"))
    committed = (with_next_marker(txn, df).where(F.col(f"{_MARKER}.marker_type") == COMMIT_MARKER)
                 .drop(_MARKER))
    return plain.unionByName(committed)


def _latest(df: DataFrame, keys: list[str], order: str = "offset") -> DataFrame:
    """The row with the highest ``order`` per ``keys`` (max_by over a struct of all columns)."""
    others = [c for c in df.columns if c not in keys]
    return (df.groupBy(*keys).agg(F.max_by(F.struct(*others), order).alias("_last"))
            .select(*keys, "_last.*"))


# --- latest committed offsets ------------------------------------------------------------------

def latest_offsets(df: DataFrame) -> DataFrame:
    """Committed offsets as OffsetFetch would return them: one row per live (group, topic, partition)."""
    commits = offset_commits(records_of(df)).select(
        "source_dir", "group_id", F.col("commit_topic").alias("topic"),
        F.col("commit_partition").alias("partition"), "committed_offset", "leader_epoch", "metadata",
        "commit_timestamp", "expire_timestamp", "is_tombstone",
        F.col("partition").alias("offsets_partition"), "offset")
    last = _latest(commits, ["source_dir", "group_id", "topic", "partition"])
    return (last.where(~F.col("is_tombstone"))
            .drop("is_tombstone")
            .withColumnRenamed("offset", "record_offset"))


# --- transactional offsets --------------------------------------------------------------------

def transactional_offsets(df: DataFrame) -> DataFrame:
    """Every TxnOffsetCommit record with its outcome: ``committed``, ``aborted`` or ``pending``.

    The outcome is the first marker of its producer after it in the same
    offsets partition (Kafka's ``GroupMetadataManager`` parks the offsets
    under the producer id until then); none yet is ``pending`` -- the
    transaction is open when the log ends, and OffsetFetch answers
    UNSTABLE_OFFSET_COMMIT for those partitions until its marker lands.
    """
    df = records_of(df)
    txn = df.where((F.col("record_type") == OFFSET_COMMIT) & F.col("decode_error").isNull()
                   & F.col("is_transactional"))
    outcome = (F.when(F.col("_m").isNull(), F.lit("pending"))
               .when(F.col("_m.marker_type") == COMMIT_MARKER, F.lit("committed")).otherwise(F.lit("aborted")))
    return (with_next_marker(txn, df)
            .select("source_dir", "group_id", F.col("commit_topic").alias("topic"),
                    F.col("commit_partition").alias("partition"), "committed_offset", "leader_epoch", "metadata",
                    "commit_timestamp", "producer_id", F.col("partition").alias("offsets_partition"),
                    F.col("offset").alias("record_offset"), outcome.alias("outcome"),
                    F.col("_m.marker_offset").alias("marker_offset"),
                    F.col("_m.marker_timestamp").alias("marker_timestamp")))


# --- group timeline ------------------------------------------------------------------------------

def group_timeline(df: DataFrame) -> DataFrame:
    """One row per group record: generation, inferred state, who joined and left since the last one.

    State is what a reload would give (Kafka's ``GroupMetadata.loadGroup``): ``Stable`` with members,
    ``Empty`` without, ``Dead`` for a tombstone.  ``generation_step`` > 1
    means rebalances whose generations were never persisted (e.g. a join
    phase that was superseded before SyncGroup).
    """
    g = records_of(df).where((F.col("record_type") == GROUP_METADATA) & F.col("decode_error").isNull())
    w = Window.partitionBy("source_dir", "group_id").orderBy("offsets_partition", "offset")
    member_ids = F.coalesce(F.transform("members", lambda m: m["member_id"]), F.array().cast("array<string>"))
    count = F.when(F.col("members").isNull(), F.lit(0)).otherwise(F.size("members"))
    state = (F.when(F.col("is_tombstone"), F.lit("Dead"))
             .when(count > 0, F.lit("Stable")).otherwise(F.lit("Empty")))
    t = (g.select("source_dir", "group_id", F.col("partition").alias("offsets_partition"), "offset", "timestamp",
                  "generation", "protocol_type", "protocol", "leader", "current_state_timestamp",
                  state.alias("state"), member_ids.alias("member_ids"),
                  count.alias("member_count"), "members")
         .withColumn("_prev_ids", F.lag("member_ids").over(w))
         .withColumn("_prev_state", F.lag("state").over(w))
         .withColumn("_prev_gen", F.lag("generation").over(w)))
    empty = F.array().cast("array<string>")
    return (t.select(
        "source_dir", "group_id", "offsets_partition", F.col("offset").alias("record_offset"),
        F.col("timestamp").alias("record_timestamp"),
        F.when(F.col("current_state_timestamp") >= 0, F.col("current_state_timestamp"))
         .otherwise(F.col("timestamp")).alias("state_timestamp"),
        "state", F.coalesce(F.col("_prev_state") != F.col("state"), F.lit(True)).alias("state_changed"),
        "generation", (F.col("generation") - F.col("_prev_gen")).alias("generation_step"),
        "protocol_type", "protocol", "leader", "member_count", "member_ids",
        F.array_except("member_ids", F.coalesce("_prev_ids", empty)).alias("joined"),
        F.array_except(F.coalesce("_prev_ids", empty), "member_ids").alias("left"),
        "members"))


def group_snapshot(df: DataFrame) -> DataFrame:
    """The last group record per group (NULL fields when the group was deleted)."""
    g = records_of(df).where((F.col("record_type") == GROUP_METADATA) & F.col("decode_error").isNull())
    cols = ["is_tombstone", "protocol_type", "generation", "protocol", "leader", "current_state_timestamp",
            "members"]
    last = _latest(g.select("source_dir", "group_id", "partition", "offset", *cols),
                   ["source_dir", "group_id"])
    return last.select("source_dir", "group_id", *cols)


# --- KIP-848 consumer groups and KIP-932 share groups (__consumer_offsets key types 3-16) ------------

# (record name suffix after "ConsumerGroup"/"ShareGroup", is a tombstone) -> event
_GROUP_EVENTS = (
    ("Metadata", False, "group-epoch"), ("Metadata", True, "group-deleted"),
    ("PartitionMetadata", False, "subscription-metadata"), ("StatePartitionMetadata", False, "share-partitions"),
    ("TargetAssignmentMetadata", False, "target-assignment-epoch"),
    ("TargetAssignmentMember", False, "target-assignment"), ("TargetAssignmentMember", True, "target-removed"),
    ("CurrentMemberAssignment", False, "member-epoch"), ("CurrentMemberAssignment", True, "assignment-removed"),
    ("RegularExpression", False, "regex-resolved"), ("RegularExpression", True, "regex-removed"),
)


def modern_groups(df: DataFrame) -> DataFrame:
    """One row per KIP-848 consumer-group or KIP-932 share-group record, per group in log order.

    What the group coordinator replays on load (``GroupMetadataManager.replay``):
    ``event`` names what the record does — ``group-epoch`` (``group_epoch``,
    and ``epoch_step`` since the group's previous epoch record), ``member-joined``
    (a member's metadata with no live metadata before it), ``member-updated``,
    ``member-left`` (its tombstone), ``target-assignment-epoch``,
    ``target-assignment``, ``member-epoch`` (the member's current assignment,
    ``member_epoch`` and ``previous_member_epoch``), ``group-deleted`` (the
    epoch record's tombstone), ...; ``member_count`` is the group's live
    members after the record; ``is_last`` marks the record a reload keeps for
    its key (group, record, member or regex).
    """
    g = records_of(df).where(F.col("record_type").isin(CONSUMER_GROUP, SHARE_GROUP)
                             & F.col("decode_error").isNull())
    kind = F.regexp_replace("group_record", "^(Consumer|Share)Group", "")
    event = F.when((kind == "MemberMetadata") & F.col("is_tombstone"), F.lit("member-left"))
    event = event.when((kind == "MemberMetadata") & F.coalesce(F.col("_prev_member_live"), F.lit(False)),
                       F.lit("member-updated")).when(kind == "MemberMetadata", F.lit("member-joined"))
    for suffix, tombstone, name in _GROUP_EVENTS:
        event = event.when((kind == suffix) & (F.col("is_tombstone") == F.lit(tombstone)), F.lit(name))
    order = ["offsets_partition", "offset"]
    group = Window.partitionBy("source_dir", "group_id").orderBy(*order)
    per_key = Window.partitionBy("source_dir", "group_id", "group_record", "_member_key").orderBy(*order)
    epochs = Window.partitionBy("source_dir", "group_id", "_is_epoch").orderBy(*order)
    t = (g.withColumn("offsets_partition", F.col("partition"))
         .withColumn("_member_key", F.coalesce("member_id", "group_regex", F.lit("")))
         .withColumn("_prev_member_live", F.lag(~F.col("is_tombstone")).over(per_key))
         .withColumn("_is_last", F.lead("offset").over(per_key).isNull())
         .withColumn("_is_epoch", kind == "Metadata")
         .withColumn("event", event))
    delta = F.when(F.col("event") == "member-joined", 1).when(F.col("event") == "member-left", -1).otherwise(0)
    step = F.when(F.col("_is_epoch"), F.col("group_epoch") - F.lag("group_epoch").over(epochs))
    return t.select(
        "source_dir", F.when(F.col("record_type") == SHARE_GROUP, F.lit("share")).otherwise(F.lit("consumer"))
        .alias("group_type"), "group_id", "offsets_partition", F.col("offset").alias("record_offset"),
        F.col("timestamp").alias("record_timestamp"), "group_record", "event", "member_id", "is_tombstone",
        "group_epoch", step.alias("epoch_step"), "assignment_epoch", "member_epoch", "previous_member_epoch",
        "member_state", F.sum(delta).over(group.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .cast("int").alias("member_count"),
        "member_client_id", "member_client_host", "member_instance_id", "group_topics", "group_regex",
        "member_assignment", "member_pending_revocation", F.col("_is_last").alias("is_last"))


def modern_group_states(modern: DataFrame) -> DataFrame:
    """Per group of a :func:`modern_groups` report: where its records leave it (the summary's table).

    ``group_epoch``: the last epoch record's; ``member_count``: live members
    after the group's last record; ``last_event`` that record's event;
    ``records`` and ``last_timestamp`` over all of the group's records.
    """
    position = F.struct("offsets_partition", "record_offset")
    epoch_position = F.when(F.col("group_epoch").isNotNull(), position)
    return (modern.groupBy("source_dir", "group_type", "group_id")
            .agg(F.max_by("group_epoch", epoch_position).alias("group_epoch"),
                 F.max_by("member_count", position).alias("member_count"),
                 F.count(F.lit(1)).alias("records"), F.max_by("event", position).alias("last_event"),
                 F.max("record_timestamp").alias("last_timestamp")))


# --- transactions (__transaction_state) ---------------------------------------------------------

def transactions(df: DataFrame) -> DataFrame:
    """One row per transaction-log record, per transactional id in log order: the coordinator's view.

    Producer id and epoch, ``state`` (Kafka's ``TransactionState`` names:
    ``Ongoing``, ``PrepareCommit``, ``CompleteCommit``, ...; ``Dead`` for a
    tombstone, the id expired), whether it changed since the id's previous
    record, the transaction's partitions and timeout, and when it started
    and was last updated.  A reload keeps each id's last record
    (``is_last``); a new producer id or a higher epoch with the same id is a
    fencing or a new producer session (``epoch_step``).
    """
    t = records_of(df).where((F.col("record_type") == TRANSACTION) & F.col("decode_error").isNull())
    w = Window.partitionBy("source_dir", "transactional_id").orderBy("txn_log_partition", "offset")
    state = F.when(F.col("is_tombstone"), F.lit("Dead")).otherwise(F.col("txn_state"))
    count = F.aggregate(F.coalesce("txn_partitions", F.array().cast("array<struct<topic:string,partitions:"
                                                                   "array<int>>>")),
                        F.lit(0), lambda acc, tp: acc + F.size(tp["partitions"]))
    rows = (t.select("source_dir", "transactional_id", F.col("partition").alias("txn_log_partition"), "offset",
                     "timestamp", F.col("txn_producer_id").alias("producer_id"),
                     F.col("txn_producer_epoch").alias("producer_epoch"), state.alias("state"),
                     F.col("txn_timeout_ms").alias("timeout_ms"), F.col("txn_partitions").alias("partitions"),
                     count.alias("partition_count"), F.col("txn_start_timestamp").alias("start_timestamp"),
                     F.col("txn_last_update_timestamp").alias("last_update_timestamp"))
            .withColumn("_prev_state", F.lag("state").over(w))
            .withColumn("_prev_pid", F.lag("producer_id").over(w))
            .withColumn("_prev_epoch", F.lag("producer_epoch").over(w))
            .withColumn("_next", F.lead("offset").over(w)))
    return rows.select(
        "source_dir", "transactional_id", "txn_log_partition", F.col("offset").alias("record_offset"),
        F.col("timestamp").alias("record_timestamp"), "producer_id", "producer_epoch", "state",
        F.coalesce(F.col("_prev_state") != F.col("state"), F.lit(True)).alias("state_changed"),
        F.when(F.col("_prev_pid") == F.col("producer_id"), F.col("producer_epoch") - F.col("_prev_epoch"))
         .alias("epoch_step"),
        "timeout_ms", "partition_count", "partitions", "start_timestamp", "last_update_timestamp",
        F.col("_next").isNull().alias("is_last"))


# --- share groups (__share_group_state) -----------------------------------------------------------

_SHARE_ARROW = pa.schema([
    ("source_dir", pa.string()), ("group_id", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()),
    ("snapshots", pa.int64()), ("updates", pa.int64()), ("deleted", pa.bool_()),
    ("state_epoch", pa.int32()), ("leader_epoch", pa.int32()), ("start_offset", pa.int64()),
    ("in_flight_offsets", pa.int64()), ("available_offsets", pa.int64()), ("acknowledged_offsets", pa.int64()),
    ("archived_offsets", pa.int64()), ("redelivered_offsets", pa.int64()), ("max_delivery_count", pa.int32()),
    ("last_write_timestamp", pa.int64()),
])
SHARE_SCHEMA: StructType = from_arrow_schema(_SHARE_ARROW)
_SHARE_KEYS = ("source_dir", "share_group_id", "share_topic_id", "share_partition")


def _share_value(row: dict[str, Any]) -> share_records.ShareSnapshotValue | share_records.ShareUpdateValue | None:
    if row["is_tombstone"]:
        return None
    batches = [share_records.StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
               for b in row["share_state_batches"] or []]
    if row["share_record"] == "ShareSnapshot":
        return share_records.ShareSnapshotValue(
            snapshot_epoch=row["share_snapshot_epoch"], state_epoch=row["share_state_epoch"],
            leader_epoch=row["share_leader_epoch"], start_offset=row["share_start_offset"],
            delivery_complete_count=row["share_delivery_complete_count"], create_timestamp=-1,
            write_timestamp=-1, state_batches=batches)
    return share_records.ShareUpdateValue(
        snapshot_epoch=row["share_snapshot_epoch"], leader_epoch=row["share_leader_epoch"],
        start_offset=row["share_start_offset"], delivery_complete_count=row["share_delivery_complete_count"],
        state_batches=batches)


def _share_row(ident: tuple, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One share-partition replayed by the share coordinator's own ``shares.state.apply_record``."""
    state = None
    for row in rows:
        key_type = (share_records.ShareSnapshotKey if row["share_record"] == "ShareSnapshot"
                    else share_records.ShareUpdateKey)
        state = share_state.apply_record(state, key_type(row["share_group_id"], None, row["share_partition"]),
                                         _share_value(row))
    batches = [] if state is None else state.state_batches

    def offsets(which) -> int:
        return sum(b.last_offset - b.first_offset + 1 for b in batches if which(b))

    return {"source_dir": ident[0], "group_id": ident[1], "topic_id": ident[2], "partition": ident[3],
            "snapshots": sum(r["share_record"] == "ShareSnapshot" for r in rows),
            "updates": sum(r["share_record"] == "ShareUpdate" for r in rows), "deleted": state is None,
            "state_epoch": None if state is None else state.state_epoch,
            "leader_epoch": None if state is None else state.leader_epoch,
            "start_offset": None if state is None else state.start_offset,
            "in_flight_offsets": offsets(lambda b: True), "available_offsets": offsets(lambda b: b.delivery_state == 0),
            "acknowledged_offsets": offsets(lambda b: b.delivery_state == 2),
            "archived_offsets": offsets(lambda b: b.delivery_state == 4),
            "redelivered_offsets": offsets(lambda b: b.delivery_count > 1),
            "max_delivery_count": max((b.delivery_count for b in batches), default=None),
            "last_write_timestamp": rows[-1]["timestamp"]}


def _share_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: rows sorted by share-partition and log position -> one row per share-partition."""
    ident, rows = None, []
    out: list[dict[str, Any]] = []
    for batch in batches:
        for row in batch.to_pylist():
            key = tuple(row[k] for k in _SHARE_KEYS)
            if key != ident and rows:
                out.append(_share_row(ident, rows))
                rows = []
            ident = key
            rows.append(row)
        if len(out) >= 4096:
            yield pa.RecordBatch.from_pylist(out, schema=_SHARE_ARROW)
            out = []
    if rows:
        out.append(_share_row(ident, rows))
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=_SHARE_ARROW)


def share_groups(df: DataFrame) -> DataFrame:
    """Per share-partition (group, topic id, partition): its state as the share coordinator replays the log.

    Snapshots and updates are applied by ``odradek.shares.state.apply_record``
    (Kafka's ``PersisterStateBatchCombiner`` rules), so the offsets in flight,
    their delivery states, and ``redelivered_offsets`` (delivery count > 1)
    and ``max_delivery_count`` are what ReadShareGroupState would answer;
    ``deleted``: the state's tombstone came last.
    """
    s = (records_of(df).where((F.col("record_type") == SHARE_STATE) & F.col("decode_error").isNull())
         .select(*_SHARE_KEYS, "partition", "offset", "timestamp", "is_tombstone", "share_record",
                 "share_snapshot_epoch", "share_state_epoch", "share_leader_epoch", "share_start_offset",
                 "share_delivery_complete_count", "share_state_batches"))
    return (s.repartition(*_SHARE_KEYS).sortWithinPartitions(*_SHARE_KEYS, "partition", "offset")
            .mapInArrow(_share_batches, SHARE_SCHEMA))


# --- KIP-211 expiry audit ------------------------------------------------------------------------

EXPLICIT_EXPIRY = "explicit-expiry"
KEPT_SUBSCRIBED = "kept-subscribed-topic"
KEPT_STATE = "kept-group-state"

_AUDIT_ARROW = pa.schema([
    ("source_dir", pa.string()), ("group_id", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("committed_offset", pa.int64()), ("commit_timestamp", pa.int64()), ("expire_timestamp", pa.int64()),
    ("group_state", pa.string()), ("protocol_type", pa.string()), ("rule", pa.string()), ("reason", pa.string()),
    ("expires_at", pa.int64()),
])
AUDIT_SCHEMA: StructType = from_arrow_schema(_AUDIT_ARROW)


def group_facts(row: dict[str, Any]) -> tuple[str | None, str, int, list[str] | None]:
    """(protocol type, state, state timestamp, subscribed topics) of a group as a reload rebuilds it.

    From its last group record, as a reload builds it: Stable with members, Empty without;
    no record, or a deleted one, leaves a simple group (no protocol type,
    Empty).  Subscribed topics (Kafka's ``GroupMetadata.computeSubscribedTopics``): for a ``consumer`` group with a
    selected protocol, the union of its members' (each read by storage's
    ``decode_subscription_topics``; one unreadable makes it unknown, None);
    none for an Empty one; unknown otherwise.
    """
    if row["is_tombstone"] is None or row["is_tombstone"]:
        return None, "Empty", -1, None
    members = row["members"] or []
    protocol_type = row["protocol_type"] or None
    topics: list[str] | None = None
    if protocol_type == CONSUMER_PROTOCOL_TYPE:
        if not members:
            topics = []
        elif row["protocol"] is not None and all(m["subscribed_topics"] is not None for m in members):
            topics = sorted({t for m in members for t in m["subscribed_topics"]})
    return protocol_type, "Stable" if members else "Empty", row["current_state_timestamp"], topics


_GROUP_FACT_COLUMNS = ["is_tombstone", "members", "protocol_type", "protocol", "current_state_timestamp"]
_OFFSET_AUDIT_COLUMNS = ["source_dir", "group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
                         "commit_timestamp", "expire_timestamp"]


def _audit_batches(retention_ms: int):
    """mapInArrow body: storage's KIP-211 rules, once per group, then for each of its offsets."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cache: dict[tuple[str, str], tuple[offset_expiry.Rule | None, str, str | None]] = {}
        for batch in batches:
            out: dict[str, list[Any]] = {name: [] for name in AUDIT_SCHEMA.names}
            # every row carries its group's columns (members and their subscriptions): those are read
            # once per group, the offset's own columns once per row
            group = batch.select(_GROUP_FACT_COLUMNS)
            for i, row in enumerate(batch.select(_OFFSET_AUDIT_COLUMNS).to_pylist()):
                gkey = (row["source_dir"], row["group_id"])
                hit = cache.get(gkey)
                if hit is None:
                    protocol_type, state, since, topics = group_facts(group.slice(i, 1).to_pylist()[0])
                    hit = cache[gkey] = (offset_expiry.rule_for(protocol_type, state, since, topics), state,
                                         protocol_type)
                rule, state, protocol_type = hit
                value = OffsetValue(offset=row["committed_offset"], leader_epoch=row["leader_epoch"],
                                    metadata=row["metadata"], commit_timestamp=row["commit_timestamp"],
                                    expire_timestamp=row["expire_timestamp"])
                at = None if rule is None else offset_expiry.expires_at(rule, row["topic"], value, retention_ms)
                if rule is None:
                    reason = KEPT_STATE
                elif at is None:
                    reason = KEPT_SUBSCRIBED
                elif value.expire_timestamp != -1 and at == value.expire_timestamp:
                    reason = EXPLICIT_EXPIRY
                else:
                    reason = rule.reason
                for name, v in (("source_dir", row["source_dir"]), ("group_id", row["group_id"]),
                                ("topic", row["topic"]), ("partition", row["partition"]),
                                ("committed_offset", value.offset), ("commit_timestamp", value.commit_timestamp),
                                ("expire_timestamp", value.expire_timestamp), ("group_state", state),
                                ("protocol_type", protocol_type),
                                ("rule", None if rule is None else rule.reason), ("reason", reason),
                                ("expires_at", at)):
                    out[name].append(v)
            yield pa.RecordBatch.from_pydict(out, schema=_AUDIT_ARROW)

    return run


def expiry_audit(df: DataFrame, *, now_ms: int, retention_ms: int = 7 * 24 * 3600 * 1000,
                 offsets: DataFrame | None = None) -> DataFrame:
    """Which committed offsets would expire, when, and why (KIP-211), as of the end of the log.

    The rules are the broker's own (``odradek.offsets.expiry``, which
    its expiry sweep uses), applied to each group as a reload would rebuild
    it (:func:`group_facts`).  ``reason``: ``explicit-expiry`` (the commit
    carried its own expire timestamp), the rule's (``empty-group``,
    ``unsubscribed-topic``, ``simple-group``), or why it is kept:
    ``kept-subscribed-topic`` (a Stable consumer group subscribed to it),
    ``kept-group-state`` (no rule applies, e.g. an unknown subscription or a
    non-consumer protocol).  ``expired``: ``expires_at <= now_ms`` -- the
    broker's next sweep removes it.  ``retention_ms`` is
    ``offsets.retention.minutes`` × 60000.  ``offsets``: :func:`latest_offsets` of ``df`` when
    already computed (the CLI passes the report it wrote).
    """
    offsets = latest_offsets(df) if offsets is None else offsets
    # of the members, group_facts reads their subscriptions only: the rest would travel with every offset
    groups = group_snapshot(df).withColumn(
        "members", F.transform("members", lambda m: F.struct(m["subscribed_topics"].alias("subscribed_topics"))))
    joined = (offsets.join(groups, ["source_dir", "group_id"], "left")
              .repartition("source_dir", "group_id").sortWithinPartitions("source_dir", "group_id"))
    audited = joined.mapInArrow(_audit_batches(retention_ms), AUDIT_SCHEMA)
    return (audited
            .withColumn("expired", F.coalesce(F.col("expires_at") <= F.lit(now_ms), F.lit(False)))
            .withColumn("expires_in_ms", F.col("expires_at") - F.lit(now_ms)))


# --- commit rates ------------------------------------------------------------------------------------

def _distinct(column: str | Column) -> Column:
    """``countDistinct`` of a never-NULL column as one more aggregate of its group.

    Spark plans ``countDistinct`` beside other aggregates as an Expand of
    every row and a second aggregation; a set per group costs one pass.
    """
    return F.size(F.collect_set(column)).cast("long")


def _rate_partials(commits: DataFrame, width: int) -> DataFrame:
    """What the data source's ``commit-rate`` partial rows hold, computed by Spark from records."""
    ts = F.col("timestamp")
    return (commits.withColumn("window_start", ts - F.pmod(ts, F.lit(width)))
            .groupBy("source_dir", "group_id", "commit_topic", "window_start")
            .agg(F.count(F.lit(1)).alias("records"),
                 _distinct(F.struct("partition", "batch_base_offset")).alias("requests"),
                 F.collect_set("commit_partition").alias("commit_partitions")))


def commit_rates(df: DataFrame, window: str = "1 minute") -> DataFrame:
    """Commits per group and topic per time window (record timestamps: the broker's commit clock).

    ``commits`` counts partition offsets written, ``requests`` the OffsetCommit
    batches they came in (one batch per accepted request).  Windows are
    tumbling, aligned to the epoch, as Spark's ``window()``.  Over every
    record Spark counts; over ``aggregate=reports`` rows it merges the data
    source's per-split counts of plain commits with the committed
    transactional ones (their markers may lie in another split), which gives
    the same rows.
    """
    width = window_ms(window)
    records = records_of(df)
    if is_aggregated(df):
        txn = offset_commits(records).where(F.col("is_transactional") & ~F.col("is_tombstone"))
        mismatch = F.raise_error(F.lit(f"the commit-rate partials were aggregated over another window than "
                                       f"{window!r}: decode again with it"))
        plain = (_partials(df, RATE_PARTIAL)
                 .where(F.coalesce(F.when(F.col("window_ms") != width, mismatch), F.lit(True)))
                 .select("source_dir", "group_id", "commit_topic", "window_start", "records", "requests",
                         "commit_partitions"))
        parts = plain.unionByName(_rate_partials(txn, width))
    else:
        parts = _rate_partials(offset_commits(records).where(~F.col("is_tombstone")), width)
    start = F.timestamp_millis("window_start")
    return (parts.groupBy("source_dir", "group_id", F.col("commit_topic").alias("topic"), "window_start")
            .agg(F.sum("records").alias("commits"), F.sum("requests").alias("requests"),
                 F.size(F.array_distinct(F.flatten(F.collect_list("commit_partitions")))).cast("long")
                 .alias("partitions"))
            .select("source_dir", "group_id", "topic", start.alias("window_start"),
                    F.timestamp_millis(F.col("window_start") + F.lit(width)).alias("window_end"), "commits",
                    "requests", "partitions", (F.col("commits") / F.lit(width // 1000)).alias("commits_per_s")))


# --- consumer lag ------------------------------------------------------------------------------------

def log_end_offsets(df: DataFrame) -> DataFrame:
    """Per data-topic partition present in the input: log start/end offsets and last timestamp.

    The end is the last batch's last offset + 1 (compaction keeps a batch's
    lastOffsetDelta, and control batches take offsets too).
    """
    d = records_of(df).where(F.col("record_type").isin(DATA, CONTROL) & (F.col("topic") != OFFSETS_TOPIC))
    return (d.groupBy("source_dir", "topic", "partition")
            .agg(F.min("offset").alias("log_start_offset"),
                 (F.max("batch_last_offset") + 1).alias("log_end_offset"),
                 F.max("timestamp").alias("last_timestamp")))


def consumer_lag(df: DataFrame, offsets: DataFrame | None = None) -> DataFrame:
    """Log end offset − committed offset per group and partition, where the data topic's log is in the input."""
    committed = latest_offsets(df) if offsets is None else offsets
    ends = log_end_offsets(df)
    return (committed.join(ends, ["source_dir", "topic", "partition"])
            .select("source_dir", "group_id", "topic", "partition", "committed_offset", "log_start_offset",
                    "log_end_offset", (F.col("log_end_offset") - F.col("committed_offset")).alias("lag"),
                    "commit_timestamp", "last_timestamp"))


# --- overview -----------------------------------------------------------------------------------------

def _overview_partials(records: DataFrame) -> DataFrame:
    """What the data source's ``overview`` partial rows hold, computed by Spark from records."""
    return (records.groupBy("source_dir", "topic", "record_type", "partition", "segment")
            .agg(F.count(F.lit(1)).alias("records"), F.sum(F.col("is_tombstone").cast("long")).alias("tombstones"),
                 F.sum(F.col("decode_error").isNotNull().cast("long")).alias("decode_errors"),
                 F.min("timestamp").alias("first_timestamp"), F.max("timestamp").alias("last_timestamp")))


def overview(df: DataFrame) -> DataFrame:
    """Records per data dir, topic and record type (the first table of the summary).

    Merged from per-(partition, segment) counts: Spark's own over every
    record, or the data source's partial rows (``aggregate=reports``).
    """
    parts = _partials(df, OVERVIEW_PARTIAL) if is_aggregated(df) else _overview_partials(df)
    return (parts.groupBy("source_dir", "topic", "record_type")
            .agg(F.sum("records").alias("records"), F.sum("tombstones").alias("tombstones"),
                 _distinct("partition").alias("partitions"), _distinct("segment").alias("segments"),
                 F.sum("decode_errors").alias("decode_errors"),
                 F.min("first_timestamp").alias("first_timestamp"), F.max("last_timestamp").alias("last_timestamp")))


# --- output -------------------------------------------------------------------------------------------

def _csv_safe(df: DataFrame) -> DataFrame:
    """CSV has no nested types: string arrays become ``a;b``, anything nested becomes JSON."""
    cols: list[Column] = []
    for field in df.schema.fields:
        t = field.dataType
        if isinstance(t, ArrayType) and not isinstance(t.elementType, StructType | ArrayType | MapType):
            cols.append(F.concat_ws(";", F.col(field.name).cast("array<string>")).alias(field.name))
        elif isinstance(t, StructType | ArrayType | MapType):
            cols.append(F.to_json(field.name).alias(field.name))
        else:
            cols.append(F.col(field.name))
    return df.select(*cols)


def is_local(path: str | os.PathLike[str]) -> bool:
    """A driver-local path (no scheme, or ``file:``), as opposed to ``hdfs://``, ``s3a://`` ..."""
    text = str(path)
    return "://" not in text or text.startswith("file:")


def local_path(path: str | os.PathLike[str]) -> Path:
    """A local path (:func:`is_local`) as the driver's filesystem names it (``file:`` dropped)."""
    text = str(path)
    return Path(text[len("file://"):] if text.startswith("file://") else text.removeprefix("file:"))


def parquet_rows(spark: SparkSession, path: str) -> int:
    """Rows of a Parquet directory: from the footers when local (no Spark job), else a count."""
    if is_local(path):
        import pyarrow.dataset as ds

        return ds.dataset(str(local_path(path)), format="parquet").count_rows()
    return spark.read.parquet(path).count()


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """A small text file (the HTML summary) locally, or through Hadoop's FileSystem API."""
    if is_local(path):
        local_path(path).write_text(text, encoding="utf-8")
        return
    jvm = spark.sparkContext._jvm
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    stream = jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).create(jpath, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def write_report(df: DataFrame, out_dir: str, name: str, *, csv: bool = True) -> list[str]:
    """``<out>/<name>.parquet/`` and ``<out>/<name>.csv``; returns what was written.

    The report is computed once, into Parquet; the CSV is converted from that
    Parquet (a report with a Python stage, like the expiry audit, would
    otherwise run twice), its rows in a total order.  Locally the CSV is one file with a header, written
    by one task into a temp dir beside it and moved into place, so a reader
    never sees half of it; on a Hadoop filesystem it is Spark's directory of
    part files.
    """
    spark = df.sparkSession
    base = str(out_dir).rstrip("/")
    target = f"{base}/{name}.parquet"
    df.write.mode("overwrite").parquet(target)
    written = [target]
    if not csv:
        return written
    if is_local(base) and parquet_rows(spark, target) == 0:  # its header is all of it: no Spark job for that
        header = local_path(base) / f"{name}.csv"
        header.write_text(",".join(df.columns) + "\n")
        return [*written, str(header)]
    safe = _csv_safe(spark.read.parquet(target))
    # Rows sorted by every column, left to right: the CSV is the same bytes whatever the
    # splits, the executors or the order their tasks finished in.
    flat = safe.coalesce(1).sortWithinPartitions(*safe.columns).write.mode("overwrite").option("header", "true")
    if not is_local(base):
        flat.csv(f"{base}/{name}.csv")
        return [*written, f"{base}/{name}.csv"]
    out = local_path(base)
    csv_target = out / f"{name}.csv"
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out))
    try:
        flat.csv(str(tmp / "csv"))
        parts = sorted((tmp / "csv").glob("part-*.csv"))
        if parts:
            os.replace(parts[0], csv_target)
        else:  # an empty result: Spark may write no part file
            csv_target.write_text(",".join(df.columns) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [*written, str(csv_target)]


def read_records(spark: SparkSession, path: str) -> DataFrame:
    """Records Parquet written earlier (``odradek-report --records-parquet``) as the report input."""
    return spark.read.parquet(path)


# --- the HTML summary --------------------------------------------------------------------------------

def _labeller(produced: dict[str, DataFrame]) -> Callable[[dict[str, Any]], str]:
    """Group labels; prefixed with the data dir's name only when there are several data dirs."""
    source = produced["overview"] if "overview" in produced else next(iter(produced.values()), None)
    dirs = {r["source_dir"] for r in source.select("source_dir").distinct().limit(2).collect()} if source else set()
    many = len(dirs) > 1

    def label(row: dict[str, Any]) -> str:
        return f"{Path(row['source_dir']).name}/{row['group_id']}" if many else row["group_id"]

    return label


def _zero_fill(points: list[tuple[float, float]], step: int, limit: int = 2000) -> list[tuple[float, float]]:
    """A window with no commits had a rate of 0; draw it so, unless the series would get too long."""
    if not points or step <= 0:
        return points
    points = sorted(points)
    first, last = points[0][0], points[-1][0]
    if (last - first) / step > limit:
        return points
    have = dict(points)
    return [(t, have.get(t, 0.0)) for t in range(int(first), int(last) + 1, step)]


def _of_groups(df: DataFrame, groups: set[tuple[str, str]]) -> DataFrame:
    """Rows of ``df`` whose (data dir, group) is one of ``groups`` (a chart's few leaders), filtered by
    Spark: a chart's series come to the driver, not every group's windows."""
    keep = F.lit(False)
    for source_dir, group_id in sorted(groups):
        keep = keep | ((F.col("source_dir") == source_dir) & (F.col("group_id") == group_id))
    return df.where(keep)


Section = tuple[str, str, str]  # (title, body, note) of the summary page


def _overview_sections(ov: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    rows = [r.asDict() for r in ov.orderBy("source_dir", "topic", "record_type").collect()]
    return [("Input", table(rows, ["source_dir", "topic", "record_type", "records", "tombstones", "partitions",
                                   "segments", "decode_errors", "first_timestamp", "last_timestamp"],
                            time_columns=("first_timestamp", "last_timestamp")), "")]


def _rate_sections(rates: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    per_group = (rates.groupBy("source_dir", "group_id", "window_start", "window_end")
                 .agg(F.sum("commits").alias("commits")))
    leaders = [r.asDict() for r in per_group.groupBy("source_dir", "group_id")
               .agg(F.sum("commits").alias("total")).orderBy(F.desc("total"), "group_id").limit(top).collect()]
    keep = {(r["source_dir"], r["group_id"]) for r in leaders}
    series: dict[str, list[tuple[float, float]]] = {label(r): [] for r in leaders}
    step = 0
    for r in _of_groups(per_group, keep).select("source_dir", "group_id", F.unix_millis("window_start").alias("t"),
                              (F.unix_millis("window_end") - F.unix_millis("window_start")).alias("ms"),
                              (F.col("commits") / (F.unix_seconds("window_end") - F.unix_seconds("window_start")))
                              .alias("rate")).collect():
        d = r.asDict()
        step = d["ms"]
        if (d["source_dir"], d["group_id"]) in keep:
            series[label(d)].append((d["t"], d["rate"]))
    series = {name: _zero_fill(points, step) for name, points in series.items()}
    return [("Commit rate per group", line_chart(series, title="commit rate", y_label="offsets committed/s"),
             f"Top {top} groups by commits; one point per window.")]


def _lag_sections(lag: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    rows = [r.asDict() for r in lag.orderBy(F.desc("lag"), "group_id", "topic", "partition").limit(30).collect()]
    items = [(f"{label(r)} {r['topic']}-{r['partition']}", float(r["lag"])) for r in rows]
    return [("Consumer lag", bar_chart(items, title="lag", value_label="records behind the log end"),
             "Largest 30 (log end offset − committed offset) where the data topic's log was in the input.")]


def _timeline_sections(tl: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    live = tl.where(F.col("state") != "Dead")
    leaders = [r.asDict() for r in live.groupBy("source_dir", "group_id").count()
               .orderBy(F.desc("count"), "group_id").limit(top).collect()]
    keep = {(r["source_dir"], r["group_id"]) for r in leaders}
    gens: dict[str, list[tuple[float, float]]] = {label(r): [] for r in leaders}
    for r in _of_groups(live, keep).select("source_dir", "group_id", "state_timestamp", "generation").collect():
        d = r.asDict()
        if (d["source_dir"], d["group_id"]) in keep:
            gens[label(d)].append((d["state_timestamp"], d["generation"]))
    changes = [r.asDict() for r in tl.where("state_changed").orderBy(F.desc("state_timestamp"), "source_dir", "group_id",
                                                                "record_offset").limit(50).collect()]
    return [("Group generations", line_chart(gens, title="generations", y_label="generation", step=True),
             f"Top {top} groups by persisted generations."),
            ("State changes", table(changes, ["state_timestamp", "group_id", "state", "generation", "member_count",
                                              "joined", "left"], time_columns=("state_timestamp",)),
             "Inferred from group records: Stable with members, Empty without, Dead when deleted.")]


def _audit_sections(audit: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    counts = [r.asDict() for r in audit.groupBy("reason", "expired").count().orderBy("reason", "expired").collect()]
    soon = [r.asDict() for r in audit.where(F.col("expires_at").isNotNull())
            .orderBy("expires_at", "group_id", "topic", "partition").limit(50).collect()]
    return [("Offset expiry (KIP-211)",
             table(counts, ["reason", "expired", "count"])
             + table(soon, ["expires_at", "expired", "group_id", "topic", "partition", "committed_offset",
                            "group_state", "reason"], time_columns=("expires_at",)),
             "Offsets the broker's sweep would remove, soonest first, as of the report time.")]


def _modern_sections(modern: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    rows = [{**r.asDict(), "group": label(r.asDict())} for r in modern_group_states(modern)
            .orderBy(F.desc("last_timestamp"), "source_dir", "group_id").limit(50).collect()]
    if not rows:
        return []
    return [("Consumer and share groups (KIP-848, KIP-932)",
             table(rows, ["last_timestamp", "group_type", "group", "group_epoch", "member_count", "records",
                          "last_event"], time_columns=("last_timestamp",)),
             "Each group as its records leave it: the last group epoch, the live members, "
             "the last record's event; newest first.")]


def _transaction_sections(txns: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    rows = [r.asDict() for r in txns.where("state_changed")
            .orderBy(F.desc("record_timestamp"), "source_dir", "transactional_id", "record_offset")
            .limit(50).collect()]
    if not rows:
        return []
    return [("Transactions", table(rows, ["record_timestamp", "transactional_id", "producer_id",
                                          "producer_epoch", "state", "partition_count", "timeout_ms"],
                                   time_columns=("record_timestamp",)),
             "State changes of transactional ids (__transaction_state), newest first.")]


def _offset_sections(latest: DataFrame, label: Callable[[dict[str, Any]], str], top: int) -> list[Section]:
    rows = [r.asDict() for r in latest.orderBy("source_dir", "group_id", "topic", "partition").limit(100).collect()]
    return [("Committed offsets", table(rows, ["group_id", "topic", "partition", "committed_offset",
                                               "leader_epoch", "metadata", "commit_timestamp"],
                                        time_columns=("commit_timestamp",)), "")]


# report (as the CLI names it) -> its sections of the summary, in the page's order
SUMMARY_SECTIONS: dict[str, Callable[[DataFrame, Callable[[dict[str, Any]], str], int], list[Section]]] = {
    "overview": _overview_sections, "commit-rates": _rate_sections, "lag": _lag_sections,
    "group-timeline": _timeline_sections, "expiry-audit": _audit_sections, "modern-groups": _modern_sections,
    "transactions": _transaction_sections, "latest-offsets": _offset_sections,
}


def summary_sections(name: str, report: DataFrame, label: Callable[[dict[str, Any]], str], *,
                     top: int = 8) -> list[Section]:
    """One report's sections of the summary page (none for a report the page does not show).

    Only small aggregates reach the driver.  The CLI computes them as soon
    as the report is written, beside the reports still running.
    """
    build = SUMMARY_SECTIONS.get(name)
    return [] if build is None else build(report, label, top)


def summary_label(produced: dict[str, DataFrame]) -> Callable[[dict[str, Any]], str]:
    """The page's group labels: prefixed with the data dir's name only when there are several data dirs."""
    return _labeller(produced)


def build_summary(page: Summary, produced: dict[str, DataFrame], *, top: int = 8,
                  sections: dict[str, list[Section]] | None = None) -> Summary:
    """Fill ``page`` from the reports the CLI produced, in the page's order; ``sections``: already computed."""
    label = None
    for name in SUMMARY_SECTIONS:
        if name not in produced:
            continue
        if sections is not None and name in sections:
            parts = sections[name]
        else:
            label = label or _labeller(produced)
            parts = summary_sections(name, produced[name], label, top=top)
        for title, body, note in parts:
            page.add(title, body, note)
    return page
