"""Segment bytes -> Arrow record batches: the one decoder behind every pipeline input path.

Both the ``odradek-log`` data source and the ``binaryFile`` + ``mapInArrow``
path call :func:`decode_segment_file` / :func:`decode_segment_bytes`, so the
two produce identical rows.  Nothing here re-implements a format: records
come from ``protocol`` and offsets-topic keys and values from storage
(``decode_key``/``decode_value``, and the layout of its ``OffsetCommitValue``
declaration).  What this module adds is the Arrow layout
(:data:`ARROW_SCHEMA`) and getting there fast, because decoding is where a
report over a big ``__consumer_offsets`` spends its time
(``scripts/bench_pipeline.py`` measures it).  There are two paths to the
same rows:

- **columnar** (the default): a segment is read 4 MiB at a time
  (``storage.segment.iter_file_runs``) and all the batches of a read are
  decoded at once into numpy columns by ``protocol.columnar`` (no Python
  object per record).  Keys are dictionary-encoded by Arrow over views into
  the buffer, so each distinct key is decoded once (memoised per segment);
  OffsetCommit values of the usual shape (empty metadata, nothing after
  the struct) are gathered field by field at the positions
  ``protocol.columnar.fixed_layout`` derives from storage's declaration;
  values of any other shape, and group-metadata values (one per
  generation: rare), are decoded one by one by storage, whose errors land
  in ``decode_error`` of their rows; so are KIP-848/932 group records, each
  distinct key and value once (memoised).  Control records (transaction
  markers) are read in the columns too, their keys by ``parse_control_key``.
  Output batches have exactly ``max_rows`` rows (the last one fewer).
- **rows** (:class:`_Chunk`, ``columnar=False``): ``protocol.records``
  decodes ``Record`` objects, keys and values are decoded per row (with a
  per-chunk key dictionary and two list comprehensions on the hot path).
  It is the reference the columnar path is tested against, and it decodes,
  in their place in the log, the batches the columnar path leaves alone:
  records with headers, and any batch that fails a check
  (so that a corrupt batch is named and ends the segment exactly as before).

Conventions of the columns (``docs/PIPELINE.md`` lists them all): values are
Kafka's raw ones (timestamps in epoch ms, -1 where Kafka means "absent", e.g.
``leader_epoch``/``expire_timestamp``), ``NULL`` where a field does not
exist for the row (a data record has no group; a tombstone has no value
fields, ``is_tombstone`` says so).  A corrupt batch ends its segment, as
recovery would cut the log there; a record whose key or value fails to parse
keeps its row with ``decode_error`` set instead of failing the whole job.
"""

from __future__ import annotations

import gc
import os
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.offsets import consumer_records as cg_records
from odradek.offsets import share_group_records as sg_records
from odradek.offsets.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription_topics,
)
from odradek.offsets.records import (
    GROUP_KEY_TYPE,
    OFFSET_COMMIT_VALUE,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    RecordDecodeError,
    decode_key,
    decode_value,
)
from odradek.protocol.columnar import RecordColumns, decode_batches, fixed_layout, read_fixed
from odradek.protocol.fastcodec import compile_reader
from odradek.protocol.records import (
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    CorruptRecordError,
    Record,
    decode_batch,
    iter_batch_headers,
    parse_control_key,
)
from odradek.shares import records as share_records
from odradek.storage.files import LOG_SUFFIX, parse_base_offset, parse_partition_dir
from odradek.storage.log_manager import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from odradek.storage.segment import CHUNK, ScanError, iter_file_batches, iter_file_runs, whole_batches
from odradek.transactions import records as txn_records

# record_type values
OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
DATA = "data"
CONTROL = "control"
UNKNOWN = "unknown"  # offsets-topic key of a type no coordinator here knows (streams groups, 4.0's type 9), or no key
CONSUMER_GROUP = "consumer_group"  # a KIP-848 consumer-group record (key types 3-8, 16)
SHARE_GROUP = "share_group"  # a KIP-932 share-group record of __consumer_offsets (key types 10-15)
TRANSACTION = "transaction"  # a __transaction_state record (TransactionLogKey/Value)
SHARE_STATE = "share_state"  # a __share_group_state record (ShareSnapshot/ShareUpdate, KIP-932)
# coordinator topics whose (few) records take the row path, with their record type
_COORDINATOR_TOPICS = {TRANSACTION_STATE_TOPIC: TRANSACTION, share_records.STATE_TOPIC: SHARE_STATE}

DEFAULT_MAX_ROWS = 65536


def _list(t: pa.DataType) -> pa.DataType:
    # Spark names list items "element"; the data source checks schemas for equality
    return pa.list_(pa.field("element", t))


ASSIGNED_TYPE = _list(pa.struct([pa.field("topic", pa.string()), pa.field("partitions", _list(pa.int32()))]))
MEMBER_TYPE = pa.struct([
    pa.field("member_id", pa.string()),
    pa.field("group_instance_id", pa.string()),
    pa.field("client_id", pa.string()),
    pa.field("client_host", pa.string()),
    pa.field("rebalance_timeout", pa.int32()),
    pa.field("session_timeout", pa.int32()),
    pa.field("subscribed_topics", _list(pa.string())),  # NULL: unknown (unparsable / not "consumer")
    pa.field("assigned_partitions", ASSIGNED_TYPE),
])

# One row per record.  Order and types are the contract of the data source, the
# binaryFile path and the Parquet the reports may read instead.
ARROW_SCHEMA = pa.schema([
    pa.field("source_dir", pa.string()),  # the data dir (log.dirs entry) holding the partition dir
    pa.field("topic", pa.string()),  # of the log (partition directory)
    pa.field("partition", pa.int32()),
    pa.field("segment", pa.int64()),  # segment base offset (file name)
    pa.field("batch_base_offset", pa.int64()),
    pa.field("batch_last_offset", pa.int64()),  # base + lastOffsetDelta: log end = max + 1
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.int64()),  # epoch ms (LogAppendTime already applied)
    pa.field("record_type", pa.string()),
    pa.field("is_tombstone", pa.bool_()),
    pa.field("is_transactional", pa.bool_()),
    pa.field("producer_id", pa.int64()),
    pa.field("control_type", pa.int32()),  # control records: 0 ABORT, 1 COMMIT
    pa.field("key_type", pa.int32()),  # offsets topic: 0/1 offset commit, 2 group, 3+ unknown
    pa.field("group_id", pa.string()),
    pa.field("commit_topic", pa.string()),
    pa.field("commit_partition", pa.int32()),
    pa.field("committed_offset", pa.int64()),
    pa.field("leader_epoch", pa.int32()),
    pa.field("metadata", pa.string()),
    pa.field("commit_timestamp", pa.int64()),
    pa.field("expire_timestamp", pa.int64()),
    pa.field("protocol_type", pa.string()),
    pa.field("generation", pa.int32()),
    pa.field("protocol", pa.string()),
    pa.field("leader", pa.string()),
    pa.field("current_state_timestamp", pa.int64()),
    pa.field("members", _list(MEMBER_TYPE)),
    pa.field("decode_error", pa.string()),
    # TransactionLogKey/Value (record_type "transaction"): the transaction coordinator's records
    pa.field("transactional_id", pa.string()),
    pa.field("txn_producer_id", pa.int64()),
    pa.field("txn_producer_epoch", pa.int32()),
    pa.field("txn_timeout_ms", pa.int32()),
    pa.field("txn_state", pa.string()),  # Kafka's TransactionState names: Ongoing, CompleteCommit, ...
    pa.field("txn_partitions", ASSIGNED_TYPE),  # NULL for Empty's null list
    pa.field("txn_last_update_timestamp", pa.int64()),
    pa.field("txn_start_timestamp", pa.int64()),
    # ShareSnapshot/ShareUpdate key and value (record_type "share_state"): the share coordinator's records
    pa.field("share_group_id", pa.string()),
    pa.field("share_topic_id", pa.string()),  # Kafka's Uuid text
    pa.field("share_partition", pa.int32()),
    pa.field("share_record", pa.string()),  # ShareSnapshot or ShareUpdate
    pa.field("share_snapshot_epoch", pa.int32()),
    pa.field("share_state_epoch", pa.int32()),  # snapshots only
    pa.field("share_leader_epoch", pa.int32()),
    pa.field("share_start_offset", pa.int64()),  # updates: -1 = unchanged
    pa.field("share_delivery_complete_count", pa.int32()),
    pa.field("share_state_batches", _list(pa.struct([
        pa.field("first_offset", pa.int64()), pa.field("last_offset", pa.int64()),
        pa.field("delivery_state", pa.int32()),  # 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED
        pa.field("delivery_count", pa.int32())]))),
    # KIP-848 consumer-group and KIP-932 share-group records of __consumer_offsets (record_type
    # "consumer_group"/"share_group"), decoded by the group coordinator's own offsets.consumer_records /
    # offsets.share_group_records; group_id is the key's group
    pa.field("group_record", pa.string()),  # Kafka's CoordinatorRecordType name, e.g. ConsumerGroupMetadata
    pa.field("member_id", pa.string()),  # member records (types 5, 7, 8, 10, 13, 14)
    pa.field("group_epoch", pa.int32()),  # *GroupMetadata
    pa.field("assignment_epoch", pa.int32()),  # *GroupTargetAssignmentMetadata
    pa.field("member_epoch", pa.int32()),  # *GroupCurrentMemberAssignment
    pa.field("previous_member_epoch", pa.int32()),
    pa.field("member_state", pa.int32()),  # 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 3 UNKNOWN
    pa.field("member_client_id", pa.string()),  # *GroupMemberMetadata
    pa.field("member_client_host", pa.string()),
    pa.field("member_instance_id", pa.string()),
    pa.field("member_rack_id", pa.string()),
    # member metadata: subscribed topic names; partition metadata: the topics' names; regular
    # expression: the topics it resolved to; share state-partition metadata: initialized topics' names
    pa.field("group_topics", _list(pa.string())),
    pa.field("group_regex", pa.string()),  # member's subscribed regex, or the RegularExpression record's
    pa.field("member_assignment", ASSIGNED_TYPE),  # target member / current assignment; topic = Kafka Uuid text
    pa.field("member_pending_revocation", ASSIGNED_TYPE),  # consumer groups' current assignment
])

# the group-metadata value's columns: filled only on group rows (rare), so built sparse
GROUP_COLUMNS = ("protocol_type", "generation", "protocol", "leader", "current_state_timestamp", "members")
# the transaction-log columns: filled only on __transaction_state rows (decoded by the row path)
TXN_COLUMNS = ("transactional_id", "txn_producer_id", "txn_producer_epoch", "txn_timeout_ms", "txn_state",
               "txn_partitions", "txn_last_update_timestamp", "txn_start_timestamp")
SHARE_COLUMNS = ("share_group_id", "share_topic_id", "share_partition", "share_record", "share_snapshot_epoch",
                 "share_state_epoch", "share_leader_epoch", "share_start_offset", "share_delivery_complete_count",
                 "share_state_batches")
MODERN_GROUP_COLUMNS = ("group_record", "member_id", "group_epoch", "assignment_epoch", "member_epoch",
                        "previous_member_epoch", "member_state", "member_client_id", "member_client_host",
                        "member_instance_id", "member_rack_id", "group_topics", "group_regex", "member_assignment",
                        "member_pending_revocation")
COORDINATOR_COLUMNS = (*TXN_COLUMNS, *SHARE_COLUMNS)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

# Storage's generated OffsetCommitValue readers by value version, compiled from storage's own
# declaration: the hot path calls them directly, skipping decode_value's per-call checks (~25% of a
# value's decode, measured).  Anything unusual falls back to decode_value; a test holds the two equal.
_OFFSET_VALUE_READERS = {v: compile_reader(OFFSET_COMMIT_VALUE, v, OffsetValue) for v in OFFSET_COMMIT_VALUE.valid}


class _Absent:
    """Stands in for the OffsetValue of rows that have none (tombstones, other record types)."""

    __slots__ = ()
    offset = leader_epoch = metadata = commit_timestamp = expire_timestamp = None


_ABSENT = _Absent()


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """Where a segment file sits: the columns every row of it shares."""

    path: str
    source_dir: str
    topic: str
    partition: int
    base_offset: int


# --- finding segments ------------------------------------------------------------------

Entry = tuple[str, str, bool]  # (name, full path, is a directory)
Lister = Callable[[str], list[Entry]]


def list_local(path: str) -> list[Entry]:
    """Directory entries of a local path ([] if it is not a directory)."""
    try:
        with os.scandir(path) as it:
            return [(e.name, e.path, e.is_dir()) for e in it]
    except (NotADirectoryError, FileNotFoundError):
        return []


def _is_segment_name(name: str) -> bool:
    base = parse_base_offset(name)
    return base is not None and name == f"{base:020d}{LOG_SUFFIX}"


def find_partition_dirs(roots: list[str], listdir: Lister = list_local, depth: int = 2) -> list[str]:
    """Partition directories under ``roots``: a root itself, its children, or grandchildren.

    A partition directory is recognised by its content (segment files) *and*
    its name: a data dir called ``broker-1`` parses as a partition name too.
    Names that ``parse_partition_dir`` rejects (``*-delete``, the compaction
    job's temp dirs) and hidden ones are skipped, as the broker skips them.
    ``listdir`` lets the binaryFile path walk a Hadoop filesystem the same way.
    """
    out: list[str] = []

    def walk(path: str, name: str, level: int) -> None:
        entries = sorted(listdir(path))
        if parse_partition_dir(name) is not None and any(
                not is_dir and _is_segment_name(n) for n, _p, is_dir in entries):
            out.append(path)
            return
        if level < depth:
            for n, full, is_dir in entries:
                if is_dir and not n.startswith("."):
                    walk(full, n, level + 1)

    for root in roots:
        walk(root.rstrip("/") or "/", root.rstrip("/").rsplit("/", 1)[-1], 0)
    return out


def find_segments(paths: list[str]) -> list[SegmentRef]:
    """Every segment file under ``paths`` (data dirs, parents of data dirs, partition dirs, files).

    Sorted, so input partitions are stable from run to run.
    """
    refs: dict[str, SegmentRef] = {}
    for raw in paths:
        root = str(Path(raw).expanduser().resolve())
        if os.path.isfile(root):
            ref = segment_ref_for(root)
            if ref is not None:
                refs[ref.path] = ref
            continue
        for pdir in find_partition_dirs([root]):
            for name, full, is_dir in list_local(pdir):
                if not is_dir and _is_segment_name(name):
                    ref = segment_ref_for(full)
                    if ref is not None:
                        refs[ref.path] = ref
    return sorted(refs.values(), key=lambda s: (s.source_dir, s.topic, s.partition, s.base_offset))


def segment_ref_for(path: str) -> SegmentRef | None:
    """The SegmentRef of a segment file path (``file:`` URIs accepted); None if not a segment."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif path.startswith("file:"):
        path = path[len("file:"):]
    p = Path(path)
    parsed = parse_partition_dir(p.parent.name)
    if parsed is None or not _is_segment_name(p.name):
        return None
    return SegmentRef(str(p), str(p.parent.parent), parsed[0], parsed[1], int(p.name[:20]))


# --- the column builder --------------------------------------------------------------------

class _Chunk:
    """Rows of one output RecordBatch, accumulated batch by batch."""

    def __init__(self, ref: SegmentRef) -> None:
        self.ref = ref
        self.offsets_topic = ref.topic == OFFSETS_TOPIC
        self.records: list[Record] = []
        self.key_codes: list[int] = []  # per row -> self.key_entries
        self.values: list[object] = []  # per row: OffsetValue or _ABSENT
        # per batch: base offset, last offset, transactional, producer id, rows, first record offset
        # (-1 when the batch's offsets have gaps, as after compaction: then they are taken per row)
        self.batches: list[tuple[int, int, bool, int, int, int]] = []
        self.sparse: dict[str, dict[int, object]] = {}  # column -> {row: value} for rare fields
        self.key_map: dict[bytes | None, int] = {}  # key bytes -> code (see successor)
        # per code: the key-derived columns (record_type, key_type, group, commit topic, commit
        # partition), and the key to decode values with (None: not decoded)
        self.key_entries: list[tuple[str, int | None, str | None, str | None, int | None]] = []
        self.value_keys: list[OffsetKey | GroupKey | None] = []
        self.value_readers: list[Callable[[int], Callable | None] | None] = []  # offset keys only
        self.group_codes: set[int] = set()
        self.modern_codes: set[int] = set()  # KIP-848/932 group records: cells per row, tombstones too
        self.memo = GroupMemo()
        self.coordinator_type = _COORDINATOR_TOPICS.get(ref.topic)
        if not self.offsets_topic:
            self._entry((self.coordinator_type or DATA, None, None, None, None), None)

    def __len__(self) -> int:
        return len(self.records)

    def successor(self) -> _Chunk:
        """The next chunk of the same segment, keeping the key dictionary while it stays small.

        A new dictionary per chunk would send the first batch of every key
        of every chunk down the row-by-row path (measured: ~1 µs/record more
        on the benchmark's 8,000 keys); an unbounded one would make each
        chunk's key columns as big as every key the segment has.
        """
        nxt = _Chunk(self.ref)
        if len(self.key_entries) <= len(self.records):
            nxt.key_map, nxt.key_entries, nxt.value_keys = self.key_map, self.key_entries, self.value_keys
            nxt.value_readers, nxt.group_codes = self.value_readers, self.group_codes
            nxt.modern_codes = self.modern_codes
        nxt.memo = self.memo
        return nxt

    def _set(self, column: str, row: int, value: object) -> None:
        self.sparse.setdefault(column, {})[row] = value

    def _entry(self, columns: tuple[str, int | None, str | None, str | None, int | None],
               key: OffsetKey | GroupKey | None) -> int:
        code = len(self.key_entries)
        self.key_entries.append(columns)
        self.value_keys.append(key)
        self.value_readers.append(_OFFSET_VALUE_READERS.get if type(key) is OffsetKey else None)
        if type(key) is GroupKey:
            self.group_codes.add(code)
        elif columns[0] in _MODERN_TYPES:
            self.modern_codes.add(code)
        return code

    def _key_code(self, kb: bytes | None, row: int) -> int:
        """Decode a key not seen in this chunk yet; errors go to ``decode_error`` of ``row``."""
        rtype, key_type, group, topic, partition, error, key = _key_entry(kb, self.memo)
        code = self._entry((rtype, key_type, group, topic, partition), key)
        if error is not None:
            self._set("decode_error", row, error)  # not memoised: each row says so
        else:
            self.key_map[kb] = code
        return code

    def add(self, header, records: list[Record]) -> None:
        """Append one decoded batch (``header`` is protocol.records.BatchHeader)."""
        n = len(records)
        if n == 0:
            return
        first = records[0].offset
        self.batches.append((header.base_offset, header.base_offset + header.last_offset_delta,
                             header.is_transactional, header.producer_id, n,
                             first if records[-1].offset - first == n - 1 else -1))
        start = len(self.records)
        self.records.extend(records)
        if header.is_control:
            code = self._entry((CONTROL, None, None, None, None), None)
            self.key_codes.extend([code] * n)
            self.values.extend([_ABSENT] * n)
            for i, r in enumerate(records, start):
                try:
                    self._set("control_type", i, parse_control_key(r.key).type)
                except CorruptRecordError as exc:
                    self._set("decode_error", i, str(exc))
            return
        if not self.offsets_topic:
            self.key_codes.extend([0] * n)
            self.values.extend([_ABSENT] * n)
            if self.coordinator_type is not None:
                cells = _txn_cells if self.coordinator_type == TRANSACTION else _share_cells
                for i, r in enumerate(records, start):
                    cells(self._set, i, r.key, r.value)
            return
        # offsets topic, the hot path: key codes and values by comprehension (no per-row statements)
        get = self.key_map.get
        codes = [get(r.key) for r in records]
        if None in codes:  # a key new to this chunk: resolve row by row (memoised for the next batches)
            self._add_rows(records, start)
            return
        readers = self.value_readers
        absent = _ABSENT
        try:
            # (first two value bytes: the int16 version) -> storage's generated reader for it
            values = [absent if (reader_for := readers[c]) is None or (v := r.value) is None
                      else reader_for(v[0] << 8 | v[1])(v, 2)[0]
                      for c, r in zip(codes, records, strict=True)]
        except Exception:  # anything odd (unknown version, bad bytes): redo the batch row by row,
            self._add_rows(records, start)  # where decode_value names the error on its row
            return
        self.key_codes.extend(codes)
        self.values.extend(values)
        if self.group_codes and not self.group_codes.isdisjoint(codes):
            for i, c in enumerate(codes):
                if c in self.group_codes and records[i].value is not None:
                    self._group_value(start + i, self.value_keys[c], records[i].value)
        if self.modern_codes and not self.modern_codes.isdisjoint(codes):
            for i, c in enumerate(codes):
                if c in self.modern_codes:
                    _modern_group_cells(self._set, start + i, records[i].key, records[i].value, self.memo)

    def _add_rows(self, records: list[Record], start: int) -> None:
        """The same as the hot path, one row at a time through ``decode_value``, errors on their rows."""
        row = start
        for r in records:
            kb = r.key
            code = self.key_map.get(kb)
            if code is None:
                code = self._key_code(kb, row)
            self.key_codes.append(code)
            key = self.value_keys[code]
            value = _ABSENT
            if type(key) is GroupKey and r.value is not None:
                self._group_value(row, key, r.value)
            elif code in self.modern_codes:
                _modern_group_cells(self._set, row, kb, r.value, self.memo)
            elif type(key) is OffsetKey and r.value is not None:
                try:
                    value = decode_value(key, r.value)
                except RecordDecodeError as exc:
                    self._set("decode_error", row, str(exc))
            self.values.append(value)
            row += 1

    def _group_value(self, row: int, key: GroupKey, data: bytes) -> None:
        _group_cells(self._set, row, key, data, self.memo)

    def to_batch(self) -> pa.RecordBatch:
        n = len(self.records)
        ref = self.ref

        def const(value: object, t: pa.DataType) -> pa.Array:
            return pa.repeat(pa.scalar(value, t), n)

        records = self.records
        base, last, txn, pid, counts, firsts = (np.array(c) for c in zip(*self.batches, strict=True))

        def per_row(column: np.ndarray) -> pa.Array:
            return pa.array(np.repeat(column, counts))

        if (firsts >= 0).all():  # no gaps: offset = first offset of the batch + position in it
            starts = np.repeat(np.cumsum(counts) - counts, counts)
            offsets = pa.array(np.repeat(firsts, counts) + (np.arange(n) - starts))
        else:
            offsets = pa.array([r.offset for r in records], pa.int64())
        key_idx = pa.array(self.key_codes, pa.int32())
        rtype, ktype, group, ctopic, cpart = zip(*self.key_entries, strict=True)
        if self.offsets_topic:
            values = self.values
            value_cols = [pa.array([v.offset for v in values], pa.int64()),
                          pa.array([v.leader_epoch for v in values], pa.int32()),
                          pa.array([v.metadata for v in values], pa.string()),
                          pa.array([v.commit_timestamp for v in values], pa.int64()),
                          pa.array([v.expire_timestamp for v in values], pa.int64())]
        else:
            value_cols = [pa.nulls(n, t) for t in (pa.int64(), pa.int32(), pa.string(), pa.int64(), pa.int64())]

        def take(values: tuple, t: pa.DataType, idx: pa.Array) -> pa.Array:
            return pc.take(pa.array(values, t), idx)

        def sparse(name: str) -> pa.Array:
            t = ARROW_SCHEMA.field(name).type
            cells = self.sparse.get(name)
            if not cells:
                return pa.nulls(n, t)
            col: list[object] = [None] * n
            for i, v in cells.items():
                col[i] = v
            return pa.array(col, t)

        columns = [
            const(ref.source_dir, pa.string()),
            const(ref.topic, pa.string()),
            const(ref.partition, pa.int32()),
            const(ref.base_offset, pa.int64()),
            per_row(base),
            per_row(last),
            offsets,
            pa.array([r.timestamp for r in records], pa.int64()),
            take(rtype, pa.string(), key_idx),
            pa.array([r.value is None for r in records], pa.bool_()),
            per_row(txn),
            per_row(pid),
            sparse("control_type"),
            take(ktype, pa.int32(), key_idx),
            take(group, pa.string(), key_idx),
            take(ctopic, pa.string(), key_idx),
            take(cpart, pa.int32(), key_idx),
            *value_cols,
            *(sparse(name) for name in GROUP_COLUMNS),
            sparse("decode_error"),
            *(sparse(name) for name in COORDINATOR_COLUMNS),
            *(sparse(name) for name in MODERN_GROUP_COLUMNS),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _coordinator_record(set_cell: Callable[[str, int, object], None], row: int, kb: bytes | None,
                        vb: bytes | None, module, what: str, key_field: str) -> tuple[object, object] | None:
    """(key, value) of a coordinator-topic record by its domain's own ``decode_key``/``decode_value``
    (``module``: ``transactions.records`` or ``shares.records``), or None with ``decode_error`` set."""
    error = module.TxnRecordError if module is txn_records else module.ShareRecordDecodeError
    try:
        if kb is None:
            raise error(f"{what} record without a key")
        key = module.decode_key(kb)
        if key is None:
            raise error(f"unknown {what} {key_field} {kb[0] << 8 | kb[1]}")
        return key, module.decode_value(vb) if module is txn_records else module.decode_value(key, vb)
    except error as exc:
        set_cell("decode_error", row, str(exc))
        return None


def _txn_cells(set_cell: Callable[[str, int, object], None], row: int, kb: bytes | None, vb: bytes | None) -> None:
    """A __transaction_state record's cells, decoded by the transaction coordinator's own
    ``transactions.records`` (Kafka's ``TransactionLog.readTxnRecordKey``/``readTxnRecordValue``)."""
    decoded = _coordinator_record(set_cell, row, kb, vb, txn_records, "transaction log", "key version")
    if decoded is None:
        return
    key, value = decoded
    set_cell("transactional_id", row, key.transactional_id)
    if value is None:  # a tombstone: the id expired (transactional.id.expiration.ms)
        return
    partitions = None
    if value.partitions is not None:
        topics: dict[str, list[int]] = {}
        for topic, partition in value.partitions:
            topics.setdefault(topic, []).append(partition)
        partitions = [{"topic": t, "partitions": ps} for t, ps in topics.items()]
    for column, cell in (("txn_producer_id", value.producer_id), ("txn_producer_epoch", value.producer_epoch),
                         ("txn_timeout_ms", value.timeout_ms), ("txn_state", value.state.kafka_name),
                         ("txn_partitions", partitions), ("txn_last_update_timestamp", value.last_update_ms),
                         ("txn_start_timestamp", value.start_ms)):
        set_cell(column, row, cell)


def _share_cells(set_cell: Callable[[str, int, object], None], row: int, kb: bytes | None,
                 vb: bytes | None) -> None:
    """A __share_group_state record's cells, decoded by the share coordinator's own ``shares.records``."""
    decoded = _coordinator_record(set_cell, row, kb, vb, share_records, "share-state", "key type")
    if decoded is None:
        return
    key, value = decoded
    snapshot = type(key) is share_records.ShareSnapshotKey
    for column, cell in (("share_group_id", key.group_id),
                         ("share_topic_id", share_records.kafka_uuid_text(key.topic_id)),
                         ("share_partition", key.partition),
                         ("share_record", "ShareSnapshot" if snapshot else "ShareUpdate")):
        set_cell(column, row, cell)
    if value is None:
        return
    batches = [{"first_offset": b.first_offset, "last_offset": b.last_offset, "delivery_state": b.delivery_state,
                "delivery_count": b.delivery_count} for b in value.state_batches]
    for column, cell in (("share_snapshot_epoch", value.snapshot_epoch),
                         ("share_state_epoch", value.state_epoch if snapshot else None),
                         ("share_leader_epoch", value.leader_epoch), ("share_start_offset", value.start_offset),
                         ("share_delivery_complete_count", value.delivery_complete_count),
                         ("share_state_batches", batches)):
        set_cell(column, row, cell)


def _key_entry(kb: bytes | None, memo: GroupMemo) -> tuple[str, int | None, str | None, str | None, int | None,
                                                           str | None, OffsetKey | GroupKey | None]:
    """What a key gives its rows: (record_type, key_type, group, commit topic, commit partition,
    decode error, the key to decode values with: None for none)."""
    try:
        if kb is None:
            raise RecordDecodeError("offsets-topic record without a key")
        key = decode_key(kb)
    except RecordDecodeError as exc:
        key_type = _INT16.unpack_from(kb, 0)[0] if kb is not None and len(kb) >= 2 else None
        rtype = (UNKNOWN if key_type is None else GROUP_METADATA if key_type == GROUP_KEY_TYPE
                 else OFFSET_COMMIT)
        return rtype, key_type, None, None, None, str(exc), None
    key_type = _INT16.unpack_from(kb, 0)[0]
    if key is None:
        return _modern_key_entry(kb, key_type, memo)
    if type(key) is OffsetKey:
        return OFFSET_COMMIT, key_type, key.group, key.topic, key.partition, None, key
    return GROUP_METADATA, key_type, key.group, None, None, None, key


_MODERN_TYPES = (CONSUMER_GROUP, SHARE_GROUP)
# key type -> (record type, the coordinator's decoder of that family, Kafka's record names by key class, its
# decoder of a value for a decoded key)
_MODERN_DECODERS = {
    **{t: (CONSUMER_GROUP, cg_records.decode_cg_record, cg_records.CG_RECORD_NAMES, cg_records.decode_cg_value)
       for t in cg_records.CG_KEY_TYPES},
    **{t: (SHARE_GROUP, sg_records.decode_sg_record, sg_records.SG_RECORD_NAMES, sg_records.decode_sg_value)
       for t in sg_records.SG_KEY_TYPES},
}


def _modern_key_entry(kb: bytes, key_type: int, memo: GroupMemo) -> tuple[str, int | None, str | None, str | None,
                                                                          int | None, str | None, None]:
    """:func:`_key_entry` of a key the classic loader skips: a KIP-848/932 group record's group, or ``unknown``."""
    found = _MODERN_DECODERS.get(key_type)
    if found is None:
        return UNKNOWN, key_type, None, None, None, None, None
    rtype = found[0]
    try:
        group = memo.key(kb)[1]
    except RecordDecodeError as exc:
        return rtype, key_type, None, None, None, str(exc), None
    return rtype, key_type, group, None, None, None, None


_uuid_texts: dict[object, str] = {}  # topic id -> Kafka's Uuid text: a log names few topics, each many times


def _topic_ids(assignment: dict | None) -> list[dict[str, object]] | None:
    if assignment is None:
        return None
    return [{"topic": _memoised(_uuid_texts, share_records.kafka_uuid_text, row["topic_id"]),
             "partitions": row["partitions"]}
            for row in cg_records.assignment_rows(assignment)]


Cells = tuple[tuple[str, object], ...]  # (column, cell) pairs of one row


class GroupMemo:
    """What a segment's group records decoded to so far, so that each distinct blob is decoded once.

    KIP-848/932 group records' cells by key bytes and by (key type, value bytes): a group's members send
    the same keys over and over and many values repeat (target assignments, epochs); the 1 M-record
    benchmark log's 42k such records have ~11k distinct keys and ~26k distinct values.  Whether a value
    parses depends only on its bytes and the key type (which picks the value struct), and a key's on its
    bytes alone, so a record whose key and value were both seen decodes without error, and one whose key
    was seen decodes only its value (``decode_cg_value``/``decode_sg_value``); one that fails is never
    memoised and is decoded again (its error names its key).

    Classic group metadata's members by subscription and assignment bytes: a member's subscription is
    the same bytes generation after generation (the same log's 24.8k members have 1.2k distinct
    subscriptions and 9.5k distinct assignments).

    One per segment (not per process): it dies with the segment's decode, so the cyclic GC does not
    walk its objects for the rest of the worker's life.
    """

    __slots__ = ("keys", "values", "subscribed", "assigned")

    def __init__(self) -> None:
        # key bytes -> (key type, group, the key's cells, the key)
        self.keys: dict[bytes, tuple[int, str, Cells, object]] = {}
        self.values: dict[tuple[int, bytes], Cells] = {}
        self.subscribed: dict[bytes, list[str] | None] = {}
        self.assigned: dict[bytes, list[dict[str, object]] | None] = {}

    def key(self, kb: bytes) -> tuple[int, str, Cells, object]:
        """(key type, group, the key's cells, the key) of a modern group record's key; raises
        RecordDecodeError."""
        known = self.keys.get(kb)
        if known is None:
            key_type = _INT16.unpack_from(kb, 0)[0]
            key, _value = _MODERN_DECODERS[key_type][1](kb, None)
            known = self._remember(kb, key_type, key)
        return known

    def cells(self, kb: bytes, vb: bytes | None) -> Cells:
        """The row's cells; raises RecordDecodeError as the coordinator's record modules do."""
        known = self.keys.get(kb)
        if known is None:
            key_type = _INT16.unpack_from(kb, 0)[0]
            key, value = _MODERN_DECODERS[key_type][1](kb, vb)
            known = self._remember(kb, key_type, key)
            if value is None:
                return known[2]
        elif vb is None:
            return known[2]
        else:
            key_type, _group, key_cells, key = known
            value_cells = self.values.get((key_type, vb))
            if value_cells is not None:
                return key_cells + value_cells
            value = _MODERN_DECODERS[key_type][3](key, vb)  # a key seen before: only the value is decoded
        if len(self.values) > _KEY_MEMO_MAX:
            self.values.clear()
        value_cells = self.values[(key_type, vb)] = _modern_value_cells(value)
        return known[2] + value_cells

    def _remember(self, kb: bytes, key_type: int, key: object) -> tuple[int, str, Cells, object]:
        names = _MODERN_DECODERS[key_type][2]
        key_cells: Cells = (("group_record", names[type(key)]), ("member_id", getattr(key, "member", None)))
        if type(key) is cg_records.CGRegexKey:
            key_cells += (("group_regex", key.regex),)
        if len(self.keys) > _KEY_MEMO_MAX:
            self.keys.clear()
        known = self.keys[kb] = (key_type, key.group, key_cells, key)
        return known



def _modern_value_cells(value: object) -> Cells:
    """The cells a KIP-848/932 group record's value gives its row (NULLs left out)."""
    topics: object = getattr(value, "subscribed_topic_names", None)
    if isinstance(value, cg_records.CGPartitionMetadataValue):
        topics = sorted(value.topics)
    elif isinstance(value, sg_records.SGStatePartitionValue):
        topics = sorted(info.topic_name for info in value.initialized.values())
    elif isinstance(value, cg_records.CGRegexValue):
        topics = value.topics
    assignment = getattr(value, "assigned", getattr(value, "partitions", None))
    cells = tuple((column, cell) for column, cell in (
        ("group_epoch", getattr(value, "epoch", None)),
        ("assignment_epoch", getattr(value, "assignment_epoch", None)),
        ("member_epoch", getattr(value, "member_epoch", None)),
        ("previous_member_epoch", getattr(value, "previous_member_epoch", None)),
        ("member_state", getattr(value, "state", None)),
        ("member_client_id", getattr(value, "client_id", None)),
        ("member_client_host", getattr(value, "client_host", None)),
        ("member_instance_id", getattr(value, "instance_id", None)),
        ("member_rack_id", getattr(value, "rack_id", None)),
        ("group_topics", None if topics is None else sorted(topics)),
        ("member_assignment", _topic_ids(assignment)),
        ("member_pending_revocation", _topic_ids(getattr(value, "pending_revocation", None)))) if cell is not None)
    if isinstance(value, cg_records.CGMemberValue):
        cells += (("group_regex", value.subscribed_topic_regex or None),)
    return cells


def _modern_group_cells(set_cell: Callable[[str, int, object], None], row: int, kb: bytes,
                        vb: bytes | None, memo: GroupMemo) -> None:
    """A KIP-848 consumer-group or KIP-932 share-group record's cells (or its ``decode_error``),
    decoded by the group coordinator's own record modules (``offsets.consumer_records``,
    ``offsets.share_group_records``); a tombstone keeps its record name and member."""
    try:
        cells = memo.cells(kb, vb)
    except RecordDecodeError as exc:
        set_cell("decode_error", row, str(exc))
        return
    for column, cell in cells:
        set_cell(column, row, cell)


def _group_cells(set_cell: Callable[[str, int, object], None], row: int, key: GroupKey, data: bytes,
                 memo: GroupMemo) -> None:
    """The group-metadata columns of one row (or its ``decode_error``)."""
    try:
        value = decode_value(key, data)
    except RecordDecodeError as exc:
        set_cell("decode_error", row, str(exc))
        return
    assert isinstance(value, GroupValue)
    set_cell("protocol_type", row, value.protocol_type)
    set_cell("generation", row, value.generation)
    set_cell("protocol", row, value.protocol)
    set_cell("leader", row, value.leader)
    set_cell("current_state_timestamp", row, value.current_state_timestamp)
    set_cell("members", row, [_member_dict(m, value.protocol_type, memo) for m in value.members])


def _memoised(memo: dict, parse: Callable, blob: object) -> object:
    """``parse(blob)``, remembered in ``memo`` (emptied when it grows past _KEY_MEMO_MAX)."""
    try:
        return memo[blob]
    except KeyError:
        pass
    if len(memo) > _KEY_MEMO_MAX:
        memo.clear()
    out = memo[blob] = parse(blob)
    return out


def _assigned_partitions(assignment: bytes) -> list[dict[str, object]] | None:
    """A consumer-protocol assignment's partitions as struct rows; None if it does not parse."""
    try:
        return [{"topic": tp.topic, "partitions": tp.partitions}
                for tp in decode_assignment(assignment).assigned_partitions]
    except ConsumerProtocolError:
        return None


def _member_dict(m, protocol_type: str, memo: GroupMemo) -> dict[str, object]:
    """A member as a struct row; subscription/assignment parsed for the ``consumer`` protocol.

    Subscribed topics are read the way the coordinator reads them (v0 prefix,
    :func:`decode_subscription_topics`) so "unknown" (NULL) means exactly what
    it means for KIP-211 expiry.
    """
    topics = None
    assigned = None
    if protocol_type == CONSUMER_PROTOCOL_TYPE:
        topics = _memoised(memo.subscribed, decode_subscription_topics, bytes(m.subscription))
        assigned = _memoised(memo.assigned, _assigned_partitions, bytes(m.assignment))
    return {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
            "session_timeout": m.session_timeout, "subscribed_topics": topics,
            "assigned_partitions": assigned}


# --- the columnar path ------------------------------------------------------------------------

# OffsetCommitValue layouts by version, from storage's declaration: where the fixed-width fields sit
# when the metadata string is empty (see protocol.columnar.fixed_layout)
_VALUE_LAYOUTS = {v: fixed_layout(OFFSET_COMMIT_VALUE, v) for v in OFFSET_COMMIT_VALUE.valid}
_VALUE_COLUMNS = (("committed_offset", "offset"), ("leader_epoch", "leader_epoch"),
                  ("commit_timestamp", "commit_timestamp"), ("expire_timestamp", "expire_timestamp"))
_KEY_MEMO_MAX = 1 << 17


def _control_rows(control: np.ndarray, data: bytes, key_pos: np.ndarray, key_len: np.ndarray,
                  key_cols: list[pa.Array], key_errors: pa.Array, set_cell: Callable[[str, int, object], None]
                  ) -> tuple[list[pa.Array], pa.Array]:
    """The key columns and key errors with the ``control`` rows made what the row path makes of a control
    record: record type ``control``, no key fields, ``control_type`` from ``parse_control_key`` (or
    its error in ``decode_error``).  A transactional log has a marker every few batches: decoding them here
    spares interleaving hundreds of row-path pieces with the columns (#37)."""
    for r in np.flatnonzero(control).tolist():
        p, length = int(key_pos[r]), int(key_len[r])
        try:
            set_cell("control_type", r, parse_control_key(None if length < 0 else data[p:p + length]).type)
        except CorruptRecordError as exc:
            set_cell("decode_error", r, str(exc))
    mask = pa.array(control)
    rtype = pc.if_else(mask, pa.scalar(CONTROL, pa.string()), key_cols[0])
    fields = [pc.if_else(mask, pa.scalar(None, c.type), c) if c.null_count < len(c) else c for c in key_cols[1:]]
    if key_errors.null_count < len(key_errors):
        key_errors = pc.if_else(mask, pa.scalar(None, pa.string()), key_errors)
    return [rtype, *fields], key_errors


def _binary_view(data: bytes, pos: np.ndarray, length: np.ndarray) -> pa.Array:
    """``data[pos:pos + length]`` per row as an Arrow binary_view array over ``data`` (no copy of the bytes).

    Length -1 is null.  Views are 16 bytes: the length, then up to 12 bytes
    inline, or a 4-byte prefix, buffer 0 and the offset.
    """
    n = len(pos)
    valid = length >= 0
    ln = np.where(valid, length, 0)
    views = np.zeros((n, 4), np.int32)
    views[:, 0] = ln
    long_ = np.flatnonzero(ln > 12)
    if long_.size:
        words = np.ndarray((len(data) - 3,), np.int32, buffer=data, strides=(1,))  # native order: raw bytes
        views[long_, 1] = words[pos[long_]]
        views[long_, 3] = pos[long_]
    short = np.flatnonzero((ln > 0) & (ln <= 12))
    if short.size:
        u8 = np.frombuffer(data, np.uint8)
        inline = u8[np.minimum(pos[short, None] + np.arange(12), len(u8) - 1)]
        inline[np.arange(12) >= ln[short, None]] = 0
        views.view(np.uint8).reshape(n, 16)[short, 4:] = inline
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), pa.py_buffer(data)])


def _empty_strings(valid: np.ndarray) -> pa.Array:
    """"" where ``valid``, else NULL."""
    n = len(valid)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.StringArray.from_buffers(n, pa.py_buffer(np.zeros(n + 1, np.int32)), pa.py_buffer(b""), validity)


def _with_cells(col: pa.Array, cells: dict[int, object], t: pa.DataType) -> pa.Array:
    """``col`` with the rows in ``cells`` replaced (one Python object per replaced row only)."""
    if not cells:
        return col
    n = len(col)
    index = np.arange(n, dtype=np.int64)
    index[list(cells)] = np.arange(n, n + len(cells))
    return pc.take(pa.concat_arrays([col, pa.array(list(cells.values()), t)]), index)


def _interleave(rows: pa.RecordBatch | None, slow: pa.RecordBatch | None, spans: list[tuple[int, int]],
                out: list[pa.RecordBatch]) -> None:
    """Append the ``spans`` of ``rows`` followed by ``slow`` to ``out`` as one batch, in the spans' order.

    One take over the two batches instead of a slice per span: a log with a
    control marker every few batches made hundreds of slices per run, and
    concatenating them (some sixty columns each) cost more than the decode
    (0.7 s of 2.5 s on the 1 M-record benchmark log, #37).
    """
    if not spans:
        return
    both = [b for b in (rows, slow) if b is not None]
    combined = both[0] if len(both) == 1 else pa.concat_batches(both)
    if len(spans) == 1:
        start, n = spans[0]
        out.append(combined.slice(start, n))
        return
    index = pa.array(np.concatenate([np.arange(start, start + n) for start, n in spans]))
    n = len(index)  # columns that are NULL throughout (most of the coordinators' ones) need no take
    out.append(pa.RecordBatch.from_arrays(
        [pa.nulls(n, c.type) if c.null_count == len(c) else c.take(index) for c in combined.columns],
        schema=combined.schema))


def _sparse_column(n: int, cells: dict[int, object] | None, t: pa.DataType) -> pa.Array:
    """An ``n``-row column, NULL but for ``cells``, built around the cells' own Arrow array: their values
    (and a list's or string's child data) stay where ``pa.array`` put them, only validity and offsets
    are spread to ``n`` rows.

    A take over the rows (:func:`_with_cells`) copies every row of every such column, most of them NULL:
    ~0.2 s of the 1 M-record benchmark log's decode for its twenty-odd group columns, half that this way.
    """
    if not cells:
        return pa.nulls(n, t)
    if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_list(t)):
        return _with_cells(pa.nulls(n, t), cells, t)
    rows = np.fromiter(cells, np.int64, len(cells))
    values = pa.array(list(cells.values()), t)
    valid = np.zeros(n, bool)
    valid[rows] = values.is_valid().to_numpy(zero_copy_only=False)
    validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    if pa.types.is_integer(t):
        column = np.zeros(n, t.to_pandas_dtype())
        column[rows] = values.fill_null(0).to_numpy()
        return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(column)])
    value_offsets = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1)
    lengths = np.zeros(n + 1, np.int32)
    lengths[rows + 1] = np.diff(value_offsets)
    offsets = pa.py_buffer(np.cumsum(lengths, dtype=np.int32) + value_offsets[0])
    if pa.types.is_string(t):
        return pa.Array.from_buffers(t, n, [validity, offsets, values.buffers()[2] or pa.py_buffer(b"")])
    return pa.Array.from_buffers(t, n, [validity, offsets], children=[values.values])


class _Columnar:
    """A segment's batches, many at a time, as Arrow record batches (:data:`ARROW_SCHEMA`).

    Batches ``protocol.columnar`` does not decode (it says why: bad bytes,
    records with headers, ...) go through the row path (:class:`_Chunk`) in
    their place in the log.
    """

    def __init__(self, ref: SegmentRef, verify_crc: bool) -> None:
        self.ref = ref
        self.verify_crc = verify_crc
        self.offsets_topic = ref.topic == OFFSETS_TOPIC
        self.keys: dict[bytes | None, tuple] = {}  # key bytes -> _key_entry, for the whole segment
        self.memo = GroupMemo()

    def add(self, buf: bytes, offsets: list[int], out: list[pa.RecordBatch]) -> None:
        """Append the batches at ``offsets`` of ``buf`` to ``out``, in log order.

        A corrupt batch raises CorruptRecordError after the rows before it are in ``out``.
        """
        self.add_columns(decode_batches(buf, offsets, verify_crc=self.verify_crc), buf, offsets, out)

    def add_columns(self, cols: RecordColumns, buf: bytes, offsets: list[int], out: list[pa.RecordBatch]) -> None:
        """:meth:`add` once ``protocol.columnar`` has decoded the batches."""
        fast = cols.ok
        if fast.all():
            if len(cols):
                out.append(self._batch(cols))
            return
        keep = fast[cols.batch]
        rows = self._batch(cols, None if keep.all() else keep) if keep.any() else None
        counts = np.where(fast, cols.records_count, 0).tolist()
        fastl = fast.tolist()
        slow, slow_rows, error = self._rows([off for off, f in zip(offsets, fastl, strict=True) if not f], buf)
        fast_n = 0 if rows is None else rows.num_rows
        spans: list[tuple[int, int]] = []  # (first row in rows + slow, rows) in log order
        at = slow_at = k = i = 0
        while i < len(offsets):
            j = i
            if fastl[i]:
                while j < len(offsets) and fastl[j]:
                    j += 1
                n = sum(counts[i:j])
                if n:
                    spans.append((at, n))
                at += n
            else:
                n = 0
                while j < len(offsets) and not fastl[j]:
                    if k == len(slow_rows):  # the batch that failed: rows before it are out, then raise
                        if n:
                            spans.append((fast_n + slow_at, n))
                        _interleave(rows, slow, spans, out)
                        raise error
                    n += slow_rows[k]
                    k += 1
                    j += 1
                if n:
                    spans.append((fast_n + slow_at, n))
                slow_at += n
            i = j
        _interleave(rows, slow, spans, out)

    def _rows(self, offsets: list[int], buf: bytes) -> tuple[pa.RecordBatch | None, list[int], Exception | None]:
        """The row path for ``offsets``, in one Arrow batch: (rows, rows per batch decoded, the error that
        stopped it).  One batch per call, not per run: a transactional log has a marker every few
        batches, and a small Arrow batch per marker cost more than decoding it."""
        chunk = _Chunk(self.ref)
        per_batch: list[int] = []
        error: Exception | None = None
        for off in offsets:
            try:
                header, records = decode_batch(buf, off, verify_crc=self.verify_crc)
                before = len(chunk)
                chunk.add(header, records)
            except Exception as exc:  # noqa: BLE001 -- re-raised by the caller once earlier rows are out
                error = exc
                break
            per_batch.append(len(chunk) - before)
        return (chunk.to_batch() if len(chunk) else None), per_batch, error

    def _batch(self, cols: RecordColumns, keep: np.ndarray | None = None) -> pa.RecordBatch:
        b, offset, timestamp = cols.batch, cols.offset, cols.timestamp
        key_pos, key_len, value_pos, value_len = cols.key_pos, cols.key_len, cols.value_pos, cols.value_len
        if keep is not None:
            b, offset, timestamp = b[keep], offset[keep], timestamp[keep]
            key_pos, key_len, value_pos, value_len = key_pos[keep], key_len[keep], value_pos[keep], value_len[keep]
        n = len(b)
        ref = self.ref

        def const(value: object, t: pa.DataType) -> pa.Array:
            return pa.repeat(pa.scalar(value, t), n)

        cells: dict[str, dict[int, object]] = {}

        def set_cell(column: str, row: int, value: object) -> None:
            cells.setdefault(column, {})[row] = value

        control = (cols.attributes[b] & CONTROL_MASK) != 0
        if not control.any():
            control = None
        if self.offsets_topic:
            # control records' keys and values are no offsets-topic ones: read as absent, then overridden
            key_cols, value_cols, key_errors = self._offsets_columns(
                cols.data, key_pos, key_len if control is None else np.where(control, -1, key_len), value_pos,
                value_len if control is None else np.where(control, -1, value_len), set_cell)
        else:
            key_errors = pa.nulls(n, pa.string())
            key_cols = [const(DATA, pa.string()), *(pa.nulls(n, t) for t in (pa.int32(), pa.string(),
                                                                                pa.string(), pa.int32()))]
            value_cols = [pa.nulls(n, t) for t in (pa.int64(), pa.int32(), pa.string(), pa.int64(), pa.int64())]
        if control is not None:
            key_cols, key_errors = _control_rows(control, cols.data, key_pos, key_len, key_cols, key_errors,
                                                 set_cell)
        errors = cells.pop("decode_error", {})

        def sparse(name: str) -> pa.Array:
            return _sparse_column(n, cells.get(name), ARROW_SCHEMA.field(name).type)

        columns = [
            const(ref.source_dir, pa.string()),
            const(ref.topic, pa.string()),
            const(ref.partition, pa.int32()),
            const(ref.base_offset, pa.int64()),
            pa.array(cols.base_offset[b]),
            pa.array(cols.last_offset[b]),
            pa.array(offset),
            pa.array(timestamp),
            key_cols[0],
            pa.array(value_len < 0),
            pa.array((cols.attributes[b] & TRANSACTIONAL_MASK) != 0),
            pa.array(cols.producer_id[b]),
            sparse("control_type"),
            *key_cols[1:],
            *value_cols,
            *(sparse(name) for name in GROUP_COLUMNS),
            _with_cells(key_errors, errors, pa.string()),
            *(pa.nulls(n, ARROW_SCHEMA.field(name).type) for name in COORDINATOR_COLUMNS),
            *(sparse(name) for name in MODERN_GROUP_COLUMNS),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)

    def _offsets_columns(self, data: bytes, key_pos: np.ndarray, key_len: np.ndarray, value_pos: np.ndarray,
                         value_len: np.ndarray, set_cell: Callable[[str, int, object], None]
                         ) -> tuple[list[pa.Array], list[pa.Array], pa.Array]:
        """Key-derived columns (by dictionary: each distinct key decoded once), OffsetCommit value columns
        and the key errors."""
        n = len(key_pos)
        encoded = pc.dictionary_encode(_binary_view(data, key_pos, key_len))  # null keys: null indices
        uniques = encoded.dictionary.to_pylist()
        indices = encoded.indices
        if indices.null_count:
            indices = pc.fill_null(indices, len(uniques))
            uniques.append(None)
        memo = self.keys
        if len(memo) > _KEY_MEMO_MAX:
            memo.clear()
        entries = []
        for kb in uniques:
            entry = memo.get(kb)
            if entry is None:
                entry = memo[kb] = _key_entry(kb, self.memo)
            entries.append(entry)
        rtype, ktype, group, ctopic, cpart, error, key = zip(*entries, strict=True)

        def take(values: tuple, t: pa.DataType) -> pa.Array:
            return pc.take(pa.array(values, t), indices)

        key_errors = take(error, pa.string()) if any(e is not None for e in error) else pa.nulls(n, pa.string())
        key_cols = [take(rtype, pa.string()), take(ktype, pa.int32()), take(group, pa.string()),
                    take(ctopic, pa.string()), take(cpart, pa.int32())]

        idx = indices.to_numpy()
        kind = np.array([1 if type(k) is OffsetKey else 2 if type(k) is GroupKey else 0 for k in key], np.int8)[idx]
        has_value = value_len >= 0
        valid = np.zeros(n, bool)
        values = {name: np.full(n, -1, np.int64) for _c, name in _VALUE_COLUMNS}
        metadata: dict[int, str] = {}
        rows = np.flatnonzero((kind == 1) & has_value)
        if rows.size:
            vpos, vlen = value_pos[rows], value_len[rows]
            version = np.where(vlen >= 2, _be16(data, vpos), -1)
            pending = np.ones(len(rows), bool)
            for v, layout in _VALUE_LAYOUTS.items():
                sel = np.flatnonzero(pending & (version == v))
                if not sel.size:
                    continue
                match, fields = read_fixed(layout, data, vpos[sel] + 2, vlen[sel] - 2)
                hit = rows[sel[match]]
                for _c, name in _VALUE_COLUMNS:
                    values[name][hit] = fields[name] if name in fields else layout.constants[name]
                valid[hit] = True
                pending[sel[match]] = False
            for r in rows[pending].tolist():  # other shapes (metadata, trailing bytes, bad bytes): storage decodes
                p = int(value_pos[r])
                try:
                    value = decode_value(key[idx[r]], data[p:p + int(value_len[r])])
                except RecordDecodeError as exc:
                    set_cell("decode_error", r, str(exc))
                    continue
                valid[r] = True
                for _c, name in _VALUE_COLUMNS:
                    values[name][r] = getattr(value, name)
                if value.metadata:
                    metadata[r] = value.metadata
        for r, k, p, length in _row_lists(np.flatnonzero((kind == 2) & has_value), idx, value_pos, value_len):
            _group_cells(set_cell, r, key[k], data[p:p + length], self.memo)
        modern = np.array([t in _MODERN_TYPES for t in rtype], bool)[idx]
        for r, k, p, length in _row_lists(np.flatnonzero(modern), idx, value_pos, value_len):
            _modern_group_cells(set_cell, r, uniques[k], None if length < 0 else data[p:p + length], self.memo)
        mask = ~valid
        value_cols = [pa.array(values["offset"], pa.int64(), mask=mask),
                      pa.array(values["leader_epoch"], pa.int32(), mask=mask),
                      _with_cells(_empty_strings(valid), metadata, pa.string()),
                      pa.array(values["commit_timestamp"], pa.int64(), mask=mask),
                      pa.array(values["expire_timestamp"], pa.int64(), mask=mask)]
        return key_cols, value_cols, key_errors


def _row_lists(rows: np.ndarray, *columns: np.ndarray) -> zip:
    """(row, column values...) of ``rows`` as Python ints: a loop over numpy scalars costs ~4x more."""
    return zip(rows.tolist(), *(c[rows].tolist() for c in columns), strict=True)


def _be16(data: bytes, pos: np.ndarray) -> np.ndarray:
    return np.ndarray((max(len(data) - 1, 0),), ">i2", buffer=data, strides=(1,))[np.minimum(pos, len(data) - 2)]


# --- entry points ----------------------------------------------------------------------------

Warn = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(f"odradek-log: {msg}", file=sys.stderr)


def _run_paused(steps: Iterator[pa.RecordBatch], finish: Callable[[], pa.RecordBatch | None], ref: SegmentRef,
                *, strict: bool, warn: Warn) -> Iterator[pa.RecordBatch]:
    """Drive one segment's decode loop: ``steps`` yields full batches, ``finish`` the last, partial one.

    The cyclic GC is paused while the loop works (not while the caller holds
    a batch): a row-path chunk keeps ~100k small objects (records, values)
    alive, and every GC pass over them more than doubled the decode time
    measured on a 200k-record log; none of them can form a cycle, so
    reference counting frees them all.  A corrupt batch ends the segment
    (``strict``: raises), as recovery would cut the log there.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            for out in steps:
                if gc_was_enabled:
                    gc.enable()
                yield out
                gc.disable()
        except (CorruptRecordError, ScanError) as exc:
            if strict:
                raise CorruptRecordError(f"{ref.path}: {exc}") from exc
            warn(f"{ref.path}: stopped at a corrupt batch ({exc}); rows before it are kept")
        last = finish()  # drops the loop's state before the GC is back
    finally:
        if gc_was_enabled:
            gc.enable()
    if last is not None:
        yield last


def _decode_rows(batches: Iterator[tuple[bytes, int]], ref: SegmentRef, *, verify_crc: bool, max_rows: int,
                 strict: bool, warn: Warn) -> Iterator[pa.RecordBatch]:
    """The row path over a whole segment: chunks of ``max_rows`` rows (or more, up to one batch).

    The reference the columnar path is held to (and the path of batches it
    does not decode).
    """
    state = {"chunk": _Chunk(ref)}

    def steps() -> Iterator[pa.RecordBatch]:
        for buf, off in batches:
            header, records = decode_batch(buf, off, verify_crc=verify_crc)
            chunk = state["chunk"]
            chunk.add(header, records)
            if len(chunk.records) >= max_rows:
                out = chunk.to_batch()
                state["chunk"] = chunk.successor()
                yield out

    def finish() -> pa.RecordBatch | None:
        chunk = state.pop("chunk")
        return chunk.to_batch() if chunk.records else None

    return _run_paused(steps(), finish, ref, strict=strict, warn=warn)


def _take_rows(pieces: list[pa.RecordBatch], n: int) -> pa.RecordBatch:
    """The first ``n`` rows of ``pieces`` as one batch; ``pieces`` keeps the rest."""
    have = 0
    k = 0
    while have < n:
        have += pieces[k].num_rows
        k += 1
    head = pieces[0] if k == 1 else pa.concat_batches(pieces[:k])
    rest = head.slice(n) if have > n else None
    pieces[:k] = [] if rest is None else [rest]
    return head.slice(0, n) if have > n else head


def _decode_columns(runs: Iterator[tuple[bytes, list[int]]], ref: SegmentRef, *, verify_crc: bool,
                    max_rows: int, strict: bool, warn: Warn) -> Iterator[pa.RecordBatch]:
    """Batches of exactly ``max_rows`` rows (the last one fewer) from runs of many batches each."""
    builder = _Columnar(ref, verify_crc)
    pieces: list[pa.RecordBatch] = []
    rows = 0

    def steps() -> Iterator[pa.RecordBatch]:
        nonlocal rows
        for buf, offsets in runs:
            before = len(pieces)
            try:
                builder.add(buf, offsets, pieces)
            finally:
                rows += sum(p.num_rows for p in pieces[before:])
            while rows >= max_rows:
                rows -= max_rows
                yield _take_rows(pieces, max_rows)

    def finish() -> pa.RecordBatch | None:
        last = _take_rows(pieces, rows) if rows else None
        pieces.clear()
        return last

    return _run_paused(steps(), finish, ref, strict=strict, warn=warn)


def decode_segment_file(ref: SegmentRef, *, verify_crc: bool = True, max_rows: int = DEFAULT_MAX_ROWS,
                        strict: bool = False, warn: Warn = _stderr, columnar: bool = True
                        ) -> Iterator[pa.RecordBatch]:
    """Arrow batches (:data:`ARROW_SCHEMA`) of one segment file, read 4 MiB at a time.

    ``columnar=False`` takes the row path for every batch (the reference:
    same rows, only slower, and chunks end at batch boundaries).
    """
    fd = os.open(ref.path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if columnar and ref.topic not in _COORDINATOR_TOPICS:  # the small txn log: row path
            yield from _decode_columns(iter_file_runs(fd, 0, size), ref, verify_crc=verify_crc,
                                       max_rows=max_rows, strict=strict, warn=warn)
        else:
            batches = ((buf, off) for _pos, buf, off, _h in iter_file_batches(fd, 0, size))
            yield from _decode_rows(batches, ref, verify_crc=verify_crc, max_rows=max_rows, strict=strict,
                                    warn=warn)
    finally:
        os.close(fd)


def _bytes_runs(data: bytes, pos: int = 0, run_bytes: int = 4 * CHUNK) -> Iterator[tuple[bytes, list[int]]]:
    """Runs of whole batches of an in-memory segment; at anything else, the row path's iterator takes over."""
    while True:
        offsets, nxt = whole_batches(data, pos, run_bytes)
        if not offsets:
            break
        yield data, offsets
        pos = nxt
    for p, off in _bytes_batches(data, pos):
        yield p, [off]


def _bytes_batches(data: bytes, pos: int = 0) -> Iterator[tuple[bytes, int]]:
    end = pos
    for p, h in iter_batch_headers(data, pos):
        yield data, p
        end = p + h.size
    if end != len(data):  # iter_batch_headers stops quietly at a partial tail; files do not
        raise ScanError(end, "partial batch at the end of the segment")


def decode_segment_bytes(data: bytes, ref: SegmentRef, *, verify_crc: bool = True,
                         max_rows: int = DEFAULT_MAX_ROWS, strict: bool = False,
                         warn: Warn = _stderr, columnar: bool = True) -> Iterator[pa.RecordBatch]:
    """The same for a segment already in memory (``binaryFile`` content)."""
    data = bytes(data)
    if columnar and ref.topic not in _COORDINATOR_TOPICS:
        yield from _decode_columns(_bytes_runs(data), ref, verify_crc=verify_crc, max_rows=max_rows,
                                   strict=strict, warn=warn)
    else:
        yield from _decode_rows(_bytes_batches(data), ref, verify_crc=verify_crc, max_rows=max_rows,
                                strict=strict, warn=warn)
