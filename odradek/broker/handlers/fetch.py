"""Fetch (v0-v18) and ListOffsets (v0-v11).

Fetch returns stored batches as they are, from the one holding the fetch
offset, within partition_max_bytes and the response's limit, the smaller of
the request's max_bytes and the broker's ``fetch.max.bytes`` (as
``KafkaApis.handleFetchRequest``); the first batch of the response is whole
even when it is bigger (KIP-74), so a consumer always makes progress.  A
partition named twice is answered once, as Kafka's ``FetchRequest.fetchData``
collapses the request into a map: the last occurrence's position and limits
win, at the first occurrence's place.  So one answer holds at most
``fetch.max.bytes`` plus one batch, whatever the request names.

Transactions (Kafka's ``UnifiedLog.read`` with ``FetchIsolation.TXN_COMMITTED``):
every v4+ answer carries the last stable offset (the first offset of the
oldest open transaction, else the high watermark = log end on one node); a
``read_committed`` fetch (isolation_level 1) reads only below it and gets the
aborted transactions of the returned range, which the client filters on
(markers and aborted batches are returned as stored); ``read_uncommitted``
gets a null list.  A marker wakes long polls like any append.

A topic whose ``compression.type`` is zstd answers Fetch below v10
UNSUPPORTED_COMPRESSION_TYPE, as Kafka's ``maybeConvertFetchedData`` does
(those fetchers predate zstd).

Fetch sessions (KIP-227) are kept as Kafka keeps them (``fetch_sessions.py``): a full
fetch with epoch 0 opens one, incremental fetches read every partition of the session and are
answered only the partitions that changed.  From v13 topics come by id (KIP-516): an id no
topic has (the zero uuid included) is UNKNOWN_TOPIC_ID on its partitions, a session's id
whose topic was since re-created under the same name INCONSISTENT_TOPIC_ID, and the answer is
keyed by id.  v15 moves the replica id into a tagged ReplicaState, v16 adds the KIP-951
leader hints (set by Kafka only beside NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH, which
this always-leading node never answers itself), v17/v18 only tagged follower fields.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.record_conversion import ConversionError, down_convert
from ...storage.errors import LogClosedError, OffsetOutOfRangeError
from ...storage.log import Log, wall_clock_ms
from ..dataplane.service import BIG_READ_BYTES
from ..dispatch import AUTHORIZED_TOPICS, LED_PARTITIONS, ON_THROTTLE, HandlerTable, RequestContext
from ..fetch_sessions import TOPIC_ID_VERSION, ZERO_UUID, FetchContext, Key, Wanted

if TYPE_CHECKING:
    from ..config import Config
    from ..dataplane import DataPlane, TopicRegistry
    from ..fetch_sessions import FetchSessionCache


class FetchServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): the topics and the data
    plane's reads."""

    config: Config
    topics: TopicRegistry
    dataplane: DataPlane
    fetch_sessions: FetchSessionCache
    cluster_id: str  # the internal topics' derived ids (``TopicRegistry.name_by_id``)


READ_COMMITTED = 1
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6
# the first ListOffsets version that may ask each special timestamp (Kafka's
# ReplicaManager.timestampMinSupportedVersion); any other negative one is UNSUPPORTED_VERSION
SPECIAL_TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                                 EARLIEST_PENDING_UPLOAD: 11}
LEADER_EPOCH = 0
ZSTD_FETCH_VERSION = 10  # older fetchers of a topic whose compression.type is zstd are refused


def register(table: HandlerTable, app: FetchServices) -> None:
    table.register(1, partial(fetch, app))
    table.register(2, partial(list_offsets, app))


def _epoch_error(requested: int, current: int = LEADER_EPOCH) -> ErrorCode | None:
    """``Partition.checkCurrentLeaderEpoch``: a newer epoch than the partition's (``Log.leader_epoch``,
    0 unless a cluster's leader moved) is unknown here, an older one fenced; -1 is not checked."""
    if requested > current:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if 0 <= requested < current:
        return ErrorCode.FENCED_LEADER_EPOCH
    return None


def _epoch_at(log: Log, offset: int) -> int:
    """The leader epoch of the batch at ``offset`` (its history is read only once a leader moved)."""
    return log.epochs.epoch_at(offset) if log.leader_epoch else LEADER_EPOCH


# --- Fetch ----------------------------------------------------------------------------

def _partition_error(index: int, code: ErrorCode, aborted) -> dict:
    return {"partition_index": index, "error_code": code, "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "aborted_transactions": aborted, "preferred_read_replica": -1,
            "records": b""}


class _Pass:
    """One read over every requested partition."""

    __slots__ = ("budget", "bytes", "errors", "waitable", "first")

    def __init__(self, max_bytes: int):
        self.budget = max_bytes
        self.bytes = 0
        self.errors = False
        self.waitable: list[tuple[str, int]] = []
        self.first = True  # no data yet: the next batch goes out whole whatever the limits (KIP-74)


def fetch_partitions(app: FetchServices, version: int, req) -> list[Wanted]:
    """The requested partitions once each, in Kafka's order.

    Kafka reads the request into a ``LinkedHashMap`` keyed by topic-partition
    (``FetchRequest.fetchData``): a repeated partition keeps its first place
    and takes the last occurrence's fetch offset and limits.  From v13 topics
    come by id, resolved to names as ``metadataCache.topicIdsToNames`` (None:
    no topic has the id).
    """
    by_id = version >= TOPIC_ID_VERSION
    wanted: dict = {}
    for t in req["topics"]:  # item access: a decoded Container's attribute access costs ten times more
        if by_id:
            topic_id = t["topic_id"]
            name = app.topics.name_by_id(topic_id, app.cluster_id)
            key = topic_id if topic_id != ZERO_UUID else None
        else:
            topic_id, name = ZERO_UUID, t["topic"]
            key = name
        for p in t["partitions"]:
            index = p["partition"]
            wanted[(key, index)] = Wanted((key, index), name, topic_id, index, p["fetch_offset"],
                                          p["partition_max_bytes"], p["current_leader_epoch"],
                                          p["log_start_offset"], p["last_fetched_epoch"])
    return list(wanted.values())


def _forgotten(version: int, req) -> list[Key]:
    """The partitions a session is to forget: by name (v7-12), by topic id (v13+)."""
    forgotten = req["forgotten_topics_data"] if version >= 7 else None
    if not forgotten:
        return []
    by_id = version >= TOPIC_ID_VERSION
    return [(t["topic_id"] if by_id else t["topic"], p) for t in forgotten for p in t["partitions"]]


def _follower(version: int, req) -> bool:
    """A replica's fetch (``FetchRequest.replicaId`` >= 0): its session is privileged."""
    return (req["replica_state"]["replica_id"] if version >= 15 else req["replica_id"]) >= 0


def fetch_context(app: FetchServices, version: int, req) -> FetchContext:
    """The request's session context (KIP-227); below v7 every fetch is sessionless."""
    wanted = fetch_partitions(app, version, req)
    if version < 7:
        return FetchContext(app.fetch_sessions, wanted)
    context = app.fetch_sessions.context(version, req["session_id"], req["session_epoch"], _follower(version, req),
                                         wanted, _forgotten(version, req))
    if version >= TOPIC_ID_VERSION and context.session is not None:  # maybeResolveUnknownName
        for w in context.wanted:
            if w.topic is None:
                w.topic = app.topics.name_by_id(w.topic_id, app.cluster_id)
    return context


async def fetch(app: FetchServices, ctx: RequestContext, req) -> dict:
    """Answer once min_bytes are there, on an error, or at max_wait_ms; appends wake us early."""
    loop = asyncio.get_running_loop()
    version = ctx.api_version
    deadline = loop.time() + max(req["max_wait_ms"], 0) / 1000
    limit = min(req["max_bytes"], app.config["fetch.max.bytes"])
    min_bytes = req["min_bytes"]
    committed = version >= 4 and req["isolation_level"] == READ_COMMITTED
    context = fetch_context(app, version, req)
    wanted = context.wanted
    denied = _denied(req, wanted)
    refused = _not_led(req, wanted)
    await app.dataplane.barrier(ctx.connection_id)
    while True:
        state = _Pass(limit)
        answers = [_partition_error(w.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                   if denied and w.topic in denied else
                   _partition_error(w.partition, refused[w.key], None) if refused and w.key in refused else
                   await _read(app, committed, w, state, version)
                   for w in wanted]
        state.errors = state.errors or bool(refused)
        remaining = deadline - loop.time()
        if state.bytes >= min_bytes or state.errors or not state.waitable or remaining <= 0:
            break
        await app.dataplane.waiters.wait(state.waitable, remaining)
    if version < 4:
        convert = partial(_down_convert, answers, wanted, 0 if version < 2 else 1)
        if state.bytes > BIG_READ_BYTES:  # a big answer is converted off the event loop
            await asyncio.to_thread(convert)
        else:
            convert()
    error, session_id, kept = context.finish(list(zip(wanted, answers, strict=True)))
    return {"throttle_time_ms": 0, "error_code": error, "session_id": session_id, "responses": _by_topic(kept),
            ON_THROTTLE: partial(_throttled, context)}


def _denied(req, wanted: list[Wanted]) -> set[str]:
    """The topics the guard's ACL check refuses READ on, among all the fetch reads (a session's
    too, as Kafka checks each partition of the context): TOPIC_AUTHORIZATION_FAILED, never waited on."""
    authorized = req.get(AUTHORIZED_TOPICS)
    if authorized is None:
        return set()
    names = {w.topic for w in wanted if w.topic is not None}
    return names - authorized(names)


def _not_led(req, wanted: list[Wanted]) -> dict:
    """{partition key: error} for the partitions a cluster's node does not serve (``LED_PARTITIONS``),
    a session's cached ones too (Kafka reads each partition of the context through the replica
    manager): never waited on."""
    check = req.get(LED_PARTITIONS)
    if check is None:
        return {}
    return {w.key: code for w in wanted if w.topic is not None
            and (code := check(w.topic, w.partition, w.current_leader_epoch)) is not None}


def _throttled(context: FetchContext, body: dict) -> None:
    """A fetch over its quota answers no partitions (``getThrottledResponse``)."""
    body["error_code"], body["session_id"] = context.throttled()
    body["responses"] = []


def _by_topic(answers: list[tuple[Wanted, dict]]) -> list[dict]:
    """Kafka's response topics: a new entry wherever the topic changes from the previous partition's."""
    out: list[dict] = []
    last = None
    for w, answer in answers:
        key = w.key[0]
        if not out or key != last:
            out.append({"topic": w.topic, "topic_id": w.topic_id, "partitions": []})
            last = key
        out[-1]["partitions"].append(answer)
    return out


def _down_convert(answers: list[dict], wanted: list[Wanted], magic: int) -> None:
    """Fetch v0-1 read magic 0, v2-3 magic 1: stored batches are converted as Kafka's
    ``RecordsUtil.downConvert`` does (headers dropped); zstd cannot be, so that
    partition gets UNSUPPORTED_COMPRESSION_TYPE (``KafkaApis.maybeConvertFetchedData``)."""
    for answer, w in zip(answers, wanted, strict=True):
        if not answer["records"]:
            continue
        try:
            answer["records"] = down_convert(answer["records"], magic, w.fetch_offset)
        except ConversionError:
            answer.update(_partition_error(w.partition, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None))


async def _read(app: FetchServices, committed: bool, p: Wanted, state: _Pass, version: int) -> dict:
    aborted: list | None = [] if committed else None
    topic = p.topic
    if topic is None:  # an id no topic has: answered, never waited on (Kafka's ``erroneous``)
        return _partition_error(p.partition, ErrorCode.UNKNOWN_TOPIC_ID, aborted)
    log = app.topics.log(topic, p.partition)
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if log is None else _epoch_error(p.current_leader_epoch,
                                                                                   log.leader_epoch)
    if code is None and p.topic_id != ZERO_UUID and app.topics.id_by_name(topic, app.cluster_id) != p.topic_id:
        code = ErrorCode.INCONSISTENT_TOPIC_ID  # a session's topic since re-created (ReplicaManager.read)
    if code is None and version < ZSTD_FETCH_VERSION and log.config.compression_type == "zstd":  # type: ignore[union-attr]
        code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE  # KafkaApis.maybeConvertFetchedData
    if code is None and not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:  # type: ignore[union-attr]
        code = ErrorCode.OFFSET_OUT_OF_RANGE
    if code is not None:
        state.errors = True
        return _partition_error(p.partition, code, aborted)
    assert log is not None
    dp = app.dataplane
    if version >= 4 and not dp.loaded(log):
        await dp.ensure_loaded(log)
    lso = dp.last_stable_offset(log)
    records = b""
    limit = min(p.partition_max_bytes, state.budget)
    end = log.log_end_offset
    upper = lso if committed else end
    read_end = p.fetch_offset
    if p.fetch_offset < upper and (limit > 0 or state.first):
        try:
            background = state.bytes > BIG_READ_BYTES
            if committed:  # the end of what was read bounds the aborted transactions listed
                # bounded by the LSO even when it is the log end: a read in a worker thread would
                # otherwise return a transaction opened meanwhile, past the LSO answered
                records, read_end = await dp.read_span(log, p.fetch_offset, max(limit, 0), background=background,
                                                       max_offset=lso)
            else:
                records = await dp.read(log, p.fetch_offset, max(limit, 0), background=background)
        except OffsetOutOfRangeError:  # retention moved the start meanwhile
            state.errors = True
            return _partition_error(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE, aborted)
        except LogClosedError:  # deleted meanwhile
            state.errors = True
            return _partition_error(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, aborted)
    if len(records) > limit and not state.first:
        records = b""  # only the answer's first batch may pass the limits (KIP-74's minOneMessage)
    if records:
        state.first = False
        state.bytes += len(records)
        state.budget -= len(records)
    state.waitable.append((topic, p.partition))
    if committed and records:
        aborted = [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                   for a in dp.aborted_txns(log, p.fetch_offset, read_end)]
    hw = log.log_end_offset
    return {"partition_index": p.partition, "error_code": ErrorCode.NONE, "high_watermark": hw,
            "last_stable_offset": lso if version >= 4 else hw, "log_start_offset": log.log_start_offset,
            "aborted_transactions": aborted, "preferred_read_replica": -1, "records": records}


# --- ListOffsets ----------------------------------------------------------------------

async def list_offsets(app: FetchServices, ctx: RequestContext, req) -> dict:
    await app.dataplane.barrier(ctx.connection_id)
    dupes = _duplicates(req)
    topics = []
    for t in req.topics:
        if ctx.api_version == 0:
            parts = [await _list_v0(app, t.name, p) for p in t.partitions]
            topics.append({"name": t.name, "partitions": parts})
            continue
        committed = ctx.api_version >= 2 and req.isolation_level == READ_COMMITTED
        parts = [_offset(p.partition_index, ErrorCode.INVALID_REQUEST) if (t.name, p.partition_index) in dupes
                 else await _list_one(app, ctx.api_version, t.name, p, committed) for p in t.partitions]
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def _list_v0(app: FetchServices, topic: str, p) -> dict:
    """ListOffsets v0 (sarama, Burrow): up to max_num_offsets segment-boundary offsets.

    As Kafka 3.9's ``handleListOffsetRequestV0`` and ``UnifiedLog.legacyFetchOffsetsBefore``:
    timestamps below -2 are UNSUPPORTED_VERSION; no duplicate check.
    """
    answer = _offset(p.partition_index, ErrorCode.NONE)
    if p.timestamp < EARLIEST:
        answer["error_code"] = ErrorCode.UNSUPPORTED_VERSION
        return answer
    log = app.topics.log(topic, p.partition_index)
    if log is None:
        answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return answer
    try:
        answer["old_style_offsets"] = await asyncio.to_thread(
            legacy_offsets_before, log, p.timestamp, p.max_num_offsets)
    except LogClosedError:
        answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return answer


def legacy_offsets_before(log: Log, timestamp: int, max_num: int) -> list[int]:
    """Kafka's ``legacyFetchOffsetsBefore``: (segment base, file mtime) pairs, plus
    (log end, now) when the active segment holds data; LATEST starts at the last
    pair, EARLIEST at the first, a time at the last pair modified at or before it;
    then up to ``max_num`` offsets walking back, newest first.

    The segment files are pinned (``Log.reading``) and their times read through
    the open descriptors, so DeleteRecords, retention or DeleteTopics removing a
    segment meanwhile does not fail the read; a log closed before raises
    LogClosedError."""
    with log.reading() as segments:
        start = log.log_start_offset
        pairs = [(max(seg.base_offset, start), seg.last_modified_ms()) for seg in segments]
        if segments[-1].size > 0:
            pairs.append((log.log_end_offset, wall_clock_ms()))
    if timestamp == LATEST:
        index = len(pairs) - 1
    elif timestamp == EARLIEST:
        index = 0
    else:
        index = len(pairs) - 1
        while index >= 0 and pairs[index][1] > timestamp:
            index -= 1
    count = min(max_num, index + 1)
    return sorted((pairs[index - j][0] for j in range(max(count, 0))), reverse=True)


def _duplicates(req) -> set[tuple[str, int]]:
    """Partitions named more than once: each occurrence is INVALID_REQUEST from v1 on
    (``ListOffsetsRequest.duplicatePartitions``), so a request cannot multiply its scans."""
    seen: set[tuple[str, int]] = set()
    dupes: set[tuple[str, int]] = set()
    for t in req.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            (dupes if key in seen else seen).add(key)
    return dupes


def _offset(index: int, code: ErrorCode, offset: int = -1, timestamp: int = -1, epoch: int = -1) -> dict:
    return {"partition_index": index, "error_code": code, "old_style_offsets": [],
            "timestamp": timestamp, "offset": offset, "leader_epoch": epoch}


async def _list_one(app: FetchServices, version: int, topic: str, p, committed: bool) -> dict:
    """One partition's offset; under read_committed the last stable offset bounds LATEST and the
    timestamp lookups (Kafka's ``Partition.fetchOffsetForTimestamp``: a record found at or past
    the bound is answered offset -1, timestamp -1)."""
    ts = p.timestamp
    if ts < 0 and version < SPECIAL_TIMESTAMP_MIN_VERSION.get(ts, version + 1):
        return _offset(p.partition_index, ErrorCode.UNSUPPORTED_VERSION)
    log = app.topics.log(topic, p.partition_index)
    if log is None:
        return _offset(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    code = _epoch_error(p.current_leader_epoch, log.leader_epoch)
    if code is not None:
        return _offset(p.partition_index, code)
    if ts in (EARLIEST, EARLIEST_LOCAL):  # no tiered storage: the local log starts at the log start
        return _offset(p.partition_index, ErrorCode.NONE, log.log_start_offset, -1,
                       _epoch_at(log, log.log_start_offset))
    if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # nothing tiered, nothing pending upload
        return _offset(p.partition_index, ErrorCode.NONE, -1, -1, -1)
    bound = log.log_end_offset
    if committed:
        await app.dataplane.ensure_loaded(log)
        bound = app.dataplane.last_stable_offset(log)
    if ts == LATEST:
        return _offset(p.partition_index, ErrorCode.NONE, bound, -1, log.leader_epoch)
    try:
        found = await asyncio.to_thread(_search, log, ts)
    except LogClosedError:
        return _offset(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if found is None or found[0] >= bound:
        return _offset(p.partition_index, ErrorCode.NONE)
    offset, timestamp = found
    return _offset(p.partition_index, ErrorCode.NONE, offset, timestamp, _epoch_at(log, offset))


def _search(log: Log, ts: int) -> tuple[int, int] | None:
    """(offset, timestamp) by time or of the max timestamp; header scans, so in a worker thread."""
    if ts == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
        return None if found is None else (found[1], found[0])
    return log.offset_for_timestamp(ts)
