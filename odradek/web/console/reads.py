"""What the console's pages show, gathered as plain values.

Whatever a Kafka client could ask goes through the broker's own handlers (``LocalKafka``: the same
code and, with an authorizer, the same ACLs as a client's request): topic lists, offsets, configs,
groups, committed offsets.  What only the broker knows -- a partition's size on disk, a group's
generation, the offsets log as a timeline, the broker clock -- is read from the domain objects,
never by loading a whole partition: messages are read one bounded Fetch at a time, the timeline
scans one offsets partition in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...broker.security.listeners import Endpoint
from ...offsets.records import GroupKey, GroupValue, OffsetKey, OffsetValue, decode_key, decode_value
from ...protocol.errors import ErrorCode
from ...protocol.records import batch_size_at, decode_batch
from ...storage.log_manager import OFFSETS_TOPIC
from ..kafka_local import KafkaCallError, LocalKafka
from .render import Registered, Shown, schema_id, show, show_registered

if TYPE_CHECKING:
    from ...broker.config import Config
    from ...broker.coordinator.service import Coordinator
    from ...broker.dataplane import TopicRegistry
    from ...broker.metrics import Metrics
    from ...broker.schema_registry import SchemaStore
    from ...registry.operations import Registry
    from ...storage.log import Log

EARLIEST, LATEST = -2, -1
TOPIC_RESOURCE = 2
PAGE_RECORDS = 50  # messages on one page
FETCH_BYTES = 64 << 10  # what one Fetch of a page asks for (a bigger batch comes whole)
FETCH_ROUNDS = 8  # Fetches for one page at most
TIMELINE_POINTS = 2000  # newest commits kept for the timeline
RATE_WINDOW = 10.0  # seconds the overview's rates span
SIZE_TTL = 5.0  # seconds the data dirs' size is reused
LIST_PAGE = 100  # topics or groups on one page of a list
CG_METADATA_KEY = b"\x00\x03"  # the key type of a consumer group's epoch record (ConsumerGroupMetadata)


class ReadServices(Protocol):
    """What the console's pages read of the broker besides its Kafka APIs (``BrokerApp`` wires it)."""

    config: Config
    cluster_id: str
    node_id: int
    endpoints: dict[str, Endpoint]
    topics: TopicRegistry
    coordinator: Coordinator | None
    metrics: Metrics
    schema_store: SchemaStore | None


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _version() -> str:
    try:
        return dist_version("odradek")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class Rates:
    """Produce and commit requests per second over the last few seconds, from the request counters
    (every overview refresh of every tab samples; the rate spans the oldest sample kept), and the
    data dirs' size, walked at most once per SIZE_TTL seconds however many tabs look."""

    samples: deque = field(default_factory=deque)  # (monotonic time, produce count, commit count)
    size: tuple[float, int] | None = None  # (when, bytes)

    def sample(self, produce: int, commits: int) -> tuple[float, float]:
        now = time.monotonic()
        samples = self.samples
        samples.append((now, produce, commits))
        while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW:
            samples.popleft()
        first = samples[0]
        dt = now - first[0]
        if dt <= 0:
            return 0.0, 0.0
        return (produce - first[1]) / dt, (commits - first[2]) / dt

    async def data_size(self, dirs: list[Path]) -> int:
        now = time.monotonic()
        if self.size is None or now - self.size[0] > SIZE_TTL:
            self.size = (now, await asyncio.to_thread(_dir_size, dirs))
        return self.size[1]


def _count(app: ReadServices, api_key: int) -> int:
    return sum(stats.count for (key, _), stats in list(app.metrics.stats.items()) if key == api_key)


def _dir_size(paths: list[Path]) -> int:
    total = 0
    for root in paths:
        for path in root.rglob("*"):
            try:
                if path.is_file():
                    total += path.stat().st_size
            except OSError:
                continue
    return total


async def overview(app: ReadServices, kafka: LocalKafka, rates: Rates) -> dict:
    topics = [t for t in (await _metadata(kafka, None)).topics if t.error_code == 0]
    groups = await group_list(kafka)
    produce, commits = rates.sample(_count(app, 0), _count(app, 8))
    size = await rates.data_size(list(app.config.data_dirs))
    return {"cluster_id": app.cluster_id, "node_id": app.node_id, "version": _version(),
            "emulated": app.config["odradek.emulate.kafka.version"] or "(latest)",
            "listeners": [(name, e.host, e.port) for name, e in app.endpoints.items()],
            "topics": len(topics), "partitions": sum(len(t.partitions) for t in topics),
            "groups": len(groups), "produce_rate": produce, "commit_rate": commits,
            "data_dirs": [str(d) for d in app.config.data_dirs], "data_size": size}


# --- topics ---------------------------------------------------------------------------------------

async def _metadata(kafka: LocalKafka, names: list[str] | None) -> Any:
    topics = None if names is None else [{"name": n} for n in names]
    return await kafka.call("Metadata", 9, {"topics": topics, "allow_auto_topic_creation": False})


async def _configs(kafka: LocalKafka, names: list[str]) -> dict[str, dict[str, Any]]:
    if not names:
        return {}
    answer = await kafka.call("DescribeConfigs", 4, {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None} for n in names]})
    out: dict[str, dict[str, Any]] = {}
    for r in answer.results:
        out[r.resource_name] = {"error": error_name(r.error_code) if r.error_code else None,
                                "configs": [{"name": c.name, "value": c.value, "source": c.config_source,
                                             "read_only": c.read_only, "sensitive": c.is_sensitive}
                                            for c in r.configs]}
    return out


def _setting(configs: dict, name: str) -> str | None:
    for c in configs.get("configs", ()):
        if c["name"] == name:
            return c["value"]
    return None


@dataclass(frozen=True)
class Slice:
    """One page of a long list: which rows, and where the neighbours start."""

    rows: list
    total: int
    start: int
    size: int

    @property
    def prev(self) -> int | None:
        return max(0, self.start - self.size) if self.start > 0 else None

    @property
    def next(self) -> int | None:
        return self.start + self.size if self.start + self.size < self.total else None


def window(items: list, start: int, size: int = LIST_PAGE) -> Slice:
    start = max(0, min(start, max(0, len(items) - 1)))
    return Slice(items[start:start + size], len(items), start, size)


async def topic_list(app: ReadServices, kafka: LocalKafka, start: int = 0) -> Slice:
    """A page of the topics (their configs asked for only for that page)."""
    md = await _metadata(kafka, None)
    shown = window(sorted((t for t in md.topics if t.error_code == 0), key=lambda t: t.name), start)
    configs = await _configs(kafka, [t.name for t in shown.rows])
    out = []
    for t in shown.rows:
        size = records = 0
        for p in t.partitions:
            log = app.topics.log(t.name, p.partition_index)
            if log is not None:
                size += log.size_bytes
                records += log.log_end_offset - log.log_start_offset
        c = configs.get(t.name, {})
        out.append({"name": t.name, "internal": t.is_internal, "partitions": len(t.partitions),
                    "size": size, "records": records,
                    "retention_ms": _setting(c, "retention.ms"), "retention_bytes": _setting(c, "retention.bytes"),
                    "cleanup_policy": _setting(c, "cleanup.policy")})
    return Slice(out, shown.total, shown.start, shown.size)


async def list_offsets(kafka: LocalKafka, topic: str, partitions: list[int], timestamp: int) -> dict[int, tuple]:
    """{partition: (offset, error name or None)} at ``timestamp`` (EARLIEST, LATEST or ms)."""
    answer = await kafka.call("ListOffsets", 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                                       for p in partitions]}]})
    return {p.partition_index: (p.offset, error_name(p.error_code) if p.error_code else None)
            for t in answer.topics for p in t.partitions}


async def topic_detail(app: ReadServices, kafka: LocalKafka, name: str) -> dict | None:
    md = await _metadata(kafka, [name])
    topic = next((t for t in md.topics if t.name == name), None)
    if topic is None or topic.error_code:
        return {"name": name, "error": error_name(topic.error_code) if topic else "UNKNOWN_TOPIC_OR_PARTITION"}
    indexes = sorted(p.partition_index for p in topic.partitions)
    starts = await list_offsets(kafka, name, indexes, EARLIEST)
    ends = await list_offsets(kafka, name, indexes, LATEST)
    partitions = []
    for p in sorted(topic.partitions, key=lambda p: p.partition_index):
        log = app.topics.log(name, p.partition_index)
        partitions.append({"index": p.partition_index, "leader": p.leader_id, "leader_epoch": p.leader_epoch,
                           "start": starts[p.partition_index][0], "end": ends[p.partition_index][0],
                           "size": log.size_bytes if log is not None else 0})
    configs = (await _configs(kafka, [name])).get(name, {})
    return {"name": name, "error": None, "internal": topic.is_internal, "partitions": partitions,
            "configs": configs.get("configs", []), "configs_error": configs.get("error")}


# --- messages ------------------------------------------------------------------------------------

@dataclass
class Message:
    offset: int
    timestamp: int
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]] = field(default_factory=list)


async def fetch_page(kafka: LocalKafka, topic: str, partition: int, offset: int, limit: int) -> tuple[list, str | None]:
    """Up to ``limit`` records from ``offset`` on, read with Fetches of at most FETCH_BYTES each (a
    batch bigger than that still comes whole, as KIP-74 has it), at most FETCH_ROUNDS of them."""
    out: list = []
    position = offset
    for _ in range(FETCH_ROUNDS):
        answer = await kafka.call("Fetch", 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": FETCH_BYTES, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                        "fetch_offset": position, "log_start_offset": -1,
                                                        "partition_max_bytes": FETCH_BYTES}]}]})
        part = answer.responses[0].partitions[0]
        if part.error_code:
            return out, error_name(part.error_code)
        data = part.records or b""
        got = await asyncio.to_thread(_decode, data, position, limit - len(out))  # decompression off the loop
        if not got:
            break
        out += got
        position = got[-1].offset + 1
        if len(out) >= limit or position >= part.high_watermark:
            break
    return out, None


def _decode(data: bytes, offset: int, limit: int) -> list:
    out: list = []
    pos = 0
    while pos < len(data) and len(out) < limit:
        size = batch_size_at(data, pos)
        if size is None or pos + size > len(data):
            break
        header, records = decode_batch(data, pos)
        pos += size
        if header.is_control:  # transaction markers are not messages
            continue
        out.extend(r for r in records if r.offset >= offset)
    return out[:limit]


async def browse(app: ReadServices, kafka: LocalKafka, topic: str, partition: int, *, start: str, at: int | None,
                 newest_first: bool, fmt: str, limit: int = PAGE_RECORDS) -> dict:
    """One page of a partition: from ``at`` (an offset, or a timestamp with ``start='timestamp'``),
    or from the end backwards (``newest_first`` without ``at``)."""
    bounds = await list_offsets(kafka, topic, [partition], EARLIEST)
    ends = await list_offsets(kafka, topic, [partition], LATEST)
    low, error = bounds.get(partition, (0, "UNKNOWN_TOPIC_OR_PARTITION"))
    high = ends.get(partition, (0, None))[0]
    page: dict[str, Any] = {"low": low, "high": high, "messages": [], "error": error, "from": None}
    if error:
        return page
    if start == "timestamp" and at is not None:
        found = await list_offsets(kafka, topic, [partition], at)
        first = found[partition][0]
        if first < 0:
            first = high
    elif at is not None:
        first = at
    else:
        first = low if not newest_first else high
    if newest_first:  # the page ending just before ``first``
        first = min(max(first, low), high)
        begin = max(low, first - limit)
        records, page["error"] = await fetch_page(kafka, topic, partition, begin, first - begin)
        records = [r for r in records if r.offset < first]
        records.reverse()
        page["next"] = begin if begin > low else None
        page["prev"] = first if first < high else None
    else:
        first = min(max(first, low), high)
        records, page["error"] = await fetch_page(kafka, topic, partition, first, limit)
        last = records[-1].offset + 1 if records else first
        page["next"] = last if last < high else None
        page["prev"] = max(low, first - limit) if first > low else None
    page["from"] = first
    known = await registered(app, {i for r in records for i in (schema_id(r.key), schema_id(r.value))
                                   if i is not None}) if fmt != "hex" else {}
    page["messages"] = await asyncio.to_thread(_shown, records, fmt, known)  # decoding off the loop
    return page


def _shown(records: list, fmt: str, known: dict[int, Registered]) -> list[Message]:
    def one(data: bytes | None) -> Shown:
        found = known.get(schema_id(data)) if known else None
        return show(data, fmt) if found is None else show_registered(data, fmt, found)
    return [Message(r.offset, r.timestamp, one(r.key), one(r.value),
                    [(k, show(v, fmt)) for k, v in (r.headers or ())]) for r in records]


async def registered(app: ReadServices, ids: set[int]) -> dict[int, Registered]:
    """What the schema registry knows of ``ids`` (nothing when it is off)."""
    store = app.schema_store
    if store is None or not ids:
        return {}

    def look(registry: Registry) -> dict[int, Registered]:
        out = {}
        for i in ids:
            sv = registry.state.by_id.get(i)
            if sv is None:
                continue
            try:
                model = registry.parsed(sv).model if sv.schema_type == "AVRO" else None
            except Exception:  # a schema the registry cannot parse now: the id is still worth naming
                model = None
            out[i] = Registered(f"{sv.subject} v{sv.version} ({sv.schema_type})", sv.schema_type, model)
        return out
    return await store.read(look)


# --- groups --------------------------------------------------------------------------------------

async def group_list(kafka: LocalKafka) -> list[dict]:
    """Every group with its state and type (ListGroups v5: ``classic``, ``consumer`` (KIP-848) or
    ``share`` (KIP-932); an emulated release before v5 has classic groups only)."""
    answer = await kafka.call("ListGroups", 5, {"states_filter": [], "types_filter": []})
    return sorted(({"id": g.group_id, "protocol_type": g.protocol_type, "state": g.group_state,
                    "type": getattr(g, "group_type", "") or "classic"}
                   for g in answer.groups), key=lambda g: g["id"])


async def committed(kafka: LocalKafka, group: str) -> tuple[dict[tuple[str, int], int], str | None]:
    answer = await kafka.call("OffsetFetch", 7, {"group_id": group, "topics": None, "require_stable": False})
    if answer.error_code:
        return {}, error_name(answer.error_code)
    return {(t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions
            if p.committed_offset >= 0}, None


async def share_lag(kafka: LocalKafka, group: str) -> dict:
    """A share group's start offset, end offset and lag per share-partition it has initialized
    (DescribeShareGroupOffsets v1, ``kafka-share-groups --describe --offsets``: the start offset
    is the first record not yet acknowledged, the lag the broker's count of records not yet
    delivered for good), with the total."""
    answer = await kafka.call("DescribeShareGroupOffsets", 1, {"groups": [{"group_id": group, "topics": None}]})
    g = answer.groups[0]
    if g.error_code:
        return {"rows": [], "error": error_name(g.error_code), "total": 0, "kind": "share"}
    rows = []
    for t in sorted(g.topics, key=lambda t: t.topic_name):
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        ends = await list_offsets(kafka, t.topic_name, [p.partition_index for p in parts], LATEST)
        rows.extend({"topic": t.topic_name, "partition": p.partition_index, "committed": p.start_offset,
                     "end": ends.get(p.partition_index, (-1, None))[0],
                     "lag": p.lag if p.lag >= 0 else None} for p in parts)
    return {"rows": rows, "error": None, "total": sum(r["lag"] or 0 for r in rows), "kind": "share"}


async def group_lag(kafka: LocalKafka, group: str, kind: str) -> dict:
    """The lag table of a group page: a share group's share-partitions, any other's committed offsets."""
    return await (share_lag if kind == "share" else lag)(kafka, group)


async def lag(kafka: LocalKafka, group: str) -> dict:
    """Committed offset, end offset and lag per partition, with totals (``kafka-consumer-groups
    --describe``'s figures: the end offset is the high watermark, lag = end - committed)."""
    offsets, error = await committed(kafka, group)
    by_topic: dict[str, list[int]] = {}
    for topic, p in offsets:
        by_topic.setdefault(topic, []).append(p)
    rows = []
    for topic in sorted(by_topic):
        ends = await list_offsets(kafka, topic, sorted(by_topic[topic]), LATEST)
        for p in sorted(by_topic[topic]):
            end = ends.get(p, (-1, None))[0]
            rows.append({"topic": topic, "partition": p, "committed": offsets[(topic, p)], "end": end,
                         "lag": max(0, end - offsets[(topic, p)]) if end >= 0 else None})
    return {"rows": rows, "error": error, "total": sum(r["lag"] or 0 for r in rows), "kind": "committed"}


def _assignment(blob: bytes | None) -> list[tuple[str, list[int]]]:
    """The partitions of a ``consumer`` protocol assignment (Kafka's ConsumerProtocolAssignment)."""
    from ...offsets.consumer_protocol import decode_assignment  # noqa: PLC0415 - only for group pages

    if not blob:
        return []
    try:
        return [(tp.topic, sorted(tp.partitions)) for tp in decode_assignment(blob).assigned_partitions]
    except ValueError:
        return []


async def modern_group(kafka: LocalKafka, api: str, group: str) -> Any | None:
    """``api``'s answer for ``group``: ConsumerGroupDescribe for a KIP-848 group, ShareGroupDescribe
    for a KIP-932 share group.  None for a group of another kind or none (GROUP_ID_NOT_FOUND), and
    on a broker that does not serve the API or has the protocol off (UNSUPPORTED_VERSION)."""
    try:
        answer = await kafka.call(api, 1, {"group_ids": [group], "include_authorized_operations": False})
    except KafkaCallError:
        return None
    g = answer.groups[0]
    return None if g.error_code else g


async def describe(kafka: LocalKafka, group: str) -> tuple[Any, str, Any | None]:
    """DescribeGroups' answer for ``group``, the group's type, and ConsumerGroupDescribe's or
    ShareGroupDescribe's answer when it is a consumer or share group (DescribeGroups answers Dead
    for one, v6 GROUP_ID_NOT_FOUND: it is not a classic group)."""
    answer = await kafka.call("DescribeGroups", 4, {"groups": [group], "include_authorized_operations": False})
    g = answer.groups[0]
    dead = g.error_code == 0 and g.group_state == "Dead"
    if dead or g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        for kind, api in (("consumer", "ConsumerGroupDescribe"), ("share", "ShareGroupDescribe")):
            modern = await modern_group(kafka, api, group)
            if modern is not None:
                return g, kind, modern
    return g, "classic", None


async def group_state(kafka: LocalKafka, group: str) -> tuple[str, int, str]:
    """(state, error code, type) of a group of any type."""
    g, kind, modern = await describe(kafka, group)
    return (modern.group_state, 0, kind) if modern is not None else (g.group_state, g.error_code, kind)


def _partitions_of(assignment: Any) -> dict[str, set[int]]:
    return {tp.topic_name: set(tp.partitions) for tp in assignment.topic_partitions if tp.partitions}


def _listed(partitions: dict[str, set[int]]) -> list[tuple[str, list[int]]]:
    return [(t, sorted(ps)) for t, ps in sorted(partitions.items()) if ps]


def _consumer_member(m: Any, revoking: dict[str, set[int]]) -> dict:
    """A KIP-848 member: its epoch, subscription, its assignment, what its target adds (pending
    assignment: partitions another member has still to give up) and what it still holds but must
    give up (pending revocation, which ConsumerGroupDescribe does not carry)."""
    have, target = _partitions_of(m.assignment), _partitions_of(m.target_assignment)
    return {"id": m.member_id, "instance": m.instance_id, "client_id": m.client_id, "host": m.client_host,
            "rack": m.rack_id, "epoch": m.member_epoch, "topics": sorted(m.subscribed_topic_names),
            "regex": m.subscribed_topic_regex, "assigned": _listed(have),
            "pending_assignment": _listed({t: ps - have.get(t, set()) for t, ps in target.items()}),
            "pending_revocation": _listed(revoking)}


def _revoking(app: ReadServices, group: str) -> dict[str, dict[str, set[int]]]:
    """Each member's partitions pending revocation, from the coordinator's group (as a classic
    group's generation is): {member id: {topic: partitions}}."""
    coordinator = app.coordinator
    if coordinator is None:
        return {}
    live = coordinator.shards[coordinator.partition_for(group)].consumer_groups.get(group)
    if live is None:
        return {}
    names = {t.topic_id: t.topic_name for t in live.subscription_metadata.values()}
    return {mid: {names[t]: set(ps) for t, ps in m.pending_revocation.items() if t in names and ps}
            for mid, m in live.members.items()}


async def _consumer_detail(app: ReadServices, kafka: LocalKafka, g: Any) -> dict:
    revoking = _revoking(app, g.group_id)
    return {"id": g.group_id, "error": None, "type": "consumer", "state": g.group_state,
            "protocol_type": "consumer", "protocol": g.assignor_name, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "members": sorted((_consumer_member(m, revoking.get(m.member_id, {})) for m in g.members),
                              key=lambda m: m["id"]),
            "lag": await lag(kafka, g.group_id)}


def _share_member(m: Any) -> dict:
    """A share group's member: its epoch, subscription and the partitions it is assigned (several
    members may share one: records, not partitions, are what a share group hands out)."""
    return {"id": m.member_id, "instance": None, "client_id": m.client_id, "host": m.client_host,
            "rack": m.rack_id, "epoch": m.member_epoch, "topics": sorted(m.subscribed_topic_names),
            "regex": None, "assigned": _listed(_partitions_of(m.assignment))}


async def _share_detail(kafka: LocalKafka, g: Any) -> dict:
    return {"id": g.group_id, "error": None, "type": "share", "state": g.group_state,
            "protocol_type": "share", "protocol": g.assignor_name, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "members": sorted((_share_member(m) for m in g.members), key=lambda m: m["id"]),
            "lag": await share_lag(kafka, g.group_id)}


async def group_detail(app: ReadServices, kafka: LocalKafka, group: str) -> dict:
    g, kind, modern = await describe(kafka, group)
    if kind == "share":
        return await _share_detail(kafka, modern)
    if kind == "consumer":
        return await _consumer_detail(app, kafka, modern)
    live = None
    coordinator = app.coordinator
    if coordinator is not None:
        live = coordinator.shards[coordinator.partition_for(group)].groups.get(group)
    members = [{"id": m.member_id, "instance": m.group_instance_id, "client_id": m.client_id,
                "host": m.client_host,
                "assigned": _assignment(m.member_assignment) if g.protocol_type == "consumer" else []}
               for m in g.members]
    return {"id": group, "error": error_name(g.error_code) if g.error_code else None, "type": "classic",
            "state": g.group_state,
            "protocol_type": g.protocol_type, "protocol": g.protocol_data,
            "generation": live.generation if live is not None else None,
            "leader": live.leader_id if live is not None else None,
            "members": members, "lag": await lag(kafka, group)}


# --- the offsets timeline ------------------------------------------------------------------------

def timeline_scan(log: Log, group: str, limit: int = TIMELINE_POINTS) -> dict:
    """A group's commits and generations from its offsets partition, oldest first (a worker thread:
    the log is read 1 MiB at a time, as a shard loads it; only this group's records are kept, the
    newest ``limit`` commits)."""
    from ...broker.runtime.loading import iter_log_batches  # noqa: PLC0415 - only for the timeline

    commits: list[dict] = []
    generations: list[dict] = []
    for header, records in iter_log_batches(log):
        if header.is_control:
            continue
        for r in records:
            try:
                key = decode_key(r.key)
                if key is None:
                    _epoch(r, header, group, generations)
                    continue
                if key.group != group:
                    continue
                value = decode_value(key, r.value)
            except ValueError:
                continue
            if isinstance(key, OffsetKey) and isinstance(value, OffsetValue):
                commits.append({"time": value.commit_timestamp, "topic": key.topic, "partition": key.partition,
                                "offset": value.offset, "log_offset": r.offset})
                if len(commits) > 2 * limit:
                    del commits[:limit]
            elif isinstance(key, GroupKey):
                if isinstance(value, GroupValue):
                    generations.append({"time": value.current_state_timestamp if value.current_state_timestamp >= 0
                                        else header.max_timestamp, "generation": value.generation,
                                        "members": len(value.members), "protocol": value.protocol,
                                        "leader": value.leader, "log_offset": r.offset})
                elif value is None:
                    generations.append({"time": header.max_timestamp, "generation": None, "members": 0,
                                        "protocol": "(deleted)", "leader": None, "log_offset": r.offset})
    return {"commits": commits[-limit:], "generations": generations[-limit:]}


def _epoch(r: Any, header: Any, group: str, generations: list[dict]) -> None:
    """A consumer-protocol group's epoch (its ConsumerGroupMetadata record, key type 3) as a
    generation of the timeline; its tombstone as the group's deletion."""
    from ...offsets.consumer_records import CGMetadataKey, decode_cg_record  # noqa: PLC0415 - timeline only

    if r.key is None or bytes(r.key[:2]) != CG_METADATA_KEY:
        return
    found = decode_cg_record(r.key, r.value)
    if found is None or not isinstance(found[0], CGMetadataKey) or found[0].group != group:
        return
    value = found[1]
    generations.append({"time": header.max_timestamp, "generation": value.epoch if value is not None else None,
                        "members": None, "protocol": "consumer (group epoch)" if value is not None else "(deleted)",
                        "leader": None, "log_offset": r.offset, "kind": "epoch"})


async def timeline(app: ReadServices, group: str) -> dict:
    coordinator = app.coordinator
    if coordinator is None:
        return {"commits": [], "generations": [], "error": "the coordinator is not running"}
    partition = coordinator.partition_for(group)
    data = await asyncio.to_thread(timeline_scan, coordinator.shards[partition].log, group)
    data["error"] = None
    data["partition"] = f"{OFFSETS_TOPIC}-{partition}"
    data["svg"] = chart(data["commits"], data["generations"])
    return data


def chart(commits: list[dict], generations: list[dict], width: int = 900, height: int = 260) -> dict:
    """Scaled points for the SVG: each topic-partition's committed offset over time, and a line per
    generation change (the template draws them; nothing here is markup)."""
    times = [c["time"] for c in commits] + [g["time"] for g in generations]
    if not times:
        return {"series": [], "marks": [], "width": width, "height": height}
    t0, t1 = min(times), max(times)
    top = max([c["offset"] for c in commits] or [1]) or 1
    span = (t1 - t0) or 1
    pad = 40

    def x(t: int) -> float:
        return round(pad + (t - t0) * (width - 2 * pad) / span, 1)

    def y(o: int) -> float:
        return round(height - pad - o * (height - 2 * pad) / top, 1)

    series: dict[str, list[tuple[float, float]]] = {}
    for c in commits:
        series.setdefault(f'{c["topic"]}-{c["partition"]}', []).append((x(c["time"]), y(c["offset"])))
    marks = [{"x": x(g["time"]), "label": f'{g.get("kind", "gen")} {g["generation"]}' if g["generation"] is not None else "deleted"}
             for g in generations]
    return {"series": [{"name": name, "points": " ".join(f"{a},{b}" for a, b in pts)}
                       for name, pts in sorted(series.items())],
            "marks": marks, "width": width, "height": height, "t0": t0, "t1": t1, "top": top}


# --- schemas (when the schema registry is on) ----------------------------------------------------

async def schemas(app: ReadServices, subject: str | None = None) -> dict | None:
    """Subjects with their versions, ids, types and compatibility; one subject's schemas in full.
    None when the registry is off."""
    store = app.schema_store
    if store is None:
        return None

    def gather(registry: Registry) -> dict:
        state = registry.state
        names = [subject] if subject is not None else state.subject_names()
        return {"global_compatibility": state.compatibility(None), "global_mode": state.mode(None),
                "subjects": [{"name": name, "compatibility": state.compatibility(name), "mode": state.mode(name),
                              "versions": [{"version": sv.version, "id": sv.id, "type": sv.schema_type,
                                            "schema": _pretty_schema(sv.schema) if subject is not None else "",
                                            "references": sv.references}
                                           for sv in state.versions(name)]}
                             for name in names]}
    return await store.read(gather)


def _pretty_schema(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:
        return text  # Protobuf: as registered
