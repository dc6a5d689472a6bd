"""``odradek offsets``: committed offsets read straight from a data dir's ``__consumer_offsets``.

No broker, no lock: the ``__consumer_offsets-N`` segment files are read
read-only (a running broker's directory is fine), batches are validated
(length, magic, CRC) and a torn or corrupt tail ends that partition, as
recovery would -- but nothing is ever truncated or written here.

The records are applied with the coordinator's own ``Shard.replay`` and groups
are rebuilt with ``Shard.rebuild`` (Stable with members, Empty without,
commit-only groups as simple groups), so what this prints is what a broker
restarted on that prefix of the log would hold.

Time travel: ``--at TIME`` replays each partition up to the first record
written after TIME; ``--offset N`` up to and including log offset N.  Only
history the cleaner has not compacted is exact: in a cleaned segment a value
that was later overwritten is gone, so an earlier point in time shows the
partition without it (the output names each partition's cleaned prefix).

``--expiry-preview`` lists, with the live sweep's own rule functions
(``coordinator.expiry``), when each offset expires and which groups die,
assuming every group stays in its recorded state.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ..offsets.expiry import expires_at
from ..offsets.records import RecordDecodeError
from ..offsets.replay import OffsetsReplay
from ..protocol.records import CorruptRecordError, batch_size_at, decode_batch
from ..storage.checkpoint import CLEANER_FILE, read_checkpoint
from ..storage.files import parse_base_offset, parse_partition_dir
from ..storage.log_manager import OFFSETS_TOPIC
from .clock import ManualClock
from .coordinator.consumer_group import ConsumerGroup
from .coordinator.expiry import group_rule
from .coordinator.group import ClassicGroup
from .coordinator.shard import Shard
from .coordinator.state import GroupState

_SEGMENT = re.compile(r"^\d{20}\.log$")
_RETRIES = 5


class ViewError(Exception):
    """The data dir cannot be read as asked."""


@dataclass
class PartitionView:
    """One offsets partition replayed up to the requested point."""

    partition: int
    directory: Path
    shard: Shard
    records: int = 0
    next_offset: int = 0  # first log offset not applied
    cleaned_up_to: int = 0  # the cleaner's checkpoint: history before it is compacted
    problem: str | None = None  # why reading stopped early (torn or corrupt tail)


@dataclass
class View:
    now_ms: int
    partitions: list[PartitionView] = field(default_factory=list)

    def groups(self, only: str | None = None) -> Iterator[tuple[PartitionView, ClassicGroup]]:
        for pv in self.partitions:
            for group_id in sorted(pv.shard.groups):
                if only is None or group_id == only:
                    yield pv, pv.shard.groups[group_id]

    def consumer_groups(self, only: str | None = None) -> Iterator[tuple[PartitionView, ConsumerGroup]]:
        """The KIP-848 consumer groups the records rebuild."""
        for pv in self.partitions:
            for group_id in sorted(pv.shard.consumer_groups):
                if only is None or group_id == only:
                    yield pv, pv.shard.consumer_groups[group_id]


# --- reading ---------------------------------------------------------------------------------

def offsets_partitions(data_dirs: list[Path]) -> dict[int, Path]:
    """``__consumer_offsets-N`` directories of the data dirs, by partition."""
    found: dict[int, Path] = {}
    for d in data_dirs:
        if not d.is_dir():
            raise ViewError(f"{d} is not a directory")
        for child in d.iterdir():
            parsed = parse_partition_dir(child.name)
            if parsed is not None and parsed[0] == OFFSETS_TOPIC and child.is_dir():
                found[parsed[1]] = child
    return found


def _segments(directory: Path) -> list[Path]:
    files = [p for p in directory.iterdir() if _SEGMENT.match(p.name)]
    return sorted(files, key=lambda p: parse_base_offset(p.name))


def iter_batches(directory: Path) -> Iterator[tuple[Any, list, str | None]]:
    """(header, records, None) per valid batch in log order; finally (None, [], why) if cut short.

    Read-only.  A segment swapped away by a concurrent cleaner pass raises
    FileNotFoundError, which ``replay_partition`` answers by starting over.
    """
    for path in _segments(directory):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            size = batch_size_at(data, pos)
            if size is None or pos + size > len(data):
                yield None, [], f"torn tail in {path.name} at position {pos}"
                return
            try:
                header, records = decode_batch(data, pos)
            except CorruptRecordError as exc:
                yield None, [], f"invalid batch in {path.name} at position {pos}: {exc}"
                return
            yield header, records, None
            pos += size


def replay_partition(partition: int, directory: Path, now_ms: int, *, until_ms: int | None = None,
                     until_offset: int | None = None) -> PartitionView:
    """Replay one partition's log prefix; retried if the cleaner swaps segments meanwhile."""
    for _ in range(_RETRIES):
        try:
            return _replay_once(partition, directory, now_ms, until_ms, until_offset)
        except FileNotFoundError:
            continue
    raise ViewError(f"{directory}: segments kept changing while reading; try again")


def _replay_once(partition: int, directory: Path, now_ms: int, until_ms: int | None,
                 until_offset: int | None) -> PartitionView:
    shard = Shard(partition, None, ManualClock(now_ms))
    pv = PartitionView(partition, directory, shard)
    checkpoint = read_checkpoint(directory.parent / CLEANER_FILE)
    pv.cleaned_up_to = checkpoint.get((OFFSETS_TOPIC, partition), 0)
    replay = OffsetsReplay(shard.replay_record)
    for header, records, problem in iter_batches(directory):
        if problem is not None:
            pv.problem = problem
            break
        if header.last_offset < pv.next_offset:
            continue  # overlap left by a concurrent segment swap
        if not _apply(pv, replay, header, records, until_ms, until_offset):
            break
    replay.finish()  # transactions still open at that point had committed nothing
    shard.rebuild()
    return pv


def _apply(pv: PartitionView, replay: OffsetsReplay, header, records: list, until_ms: int | None,
           until_offset: int | None) -> bool:
    """Apply one batch's records; False once the requested point is passed."""
    for record in records:
        if record.offset < pv.next_offset:
            continue
        if (until_offset is not None and record.offset > until_offset) or \
                (until_ms is not None and record.timestamp > until_ms):
            return False
        pv.next_offset = record.offset + 1
        try:
            if replay.feed(header, record):
                pv.records += 1
        except RecordDecodeError as exc:
            raise ViewError(f"{pv.directory.name} offset {record.offset}: {exc}") from None
    return True


def build_view(data_dirs: list[Path], *, group: str | None = None, until_ms: int | None = None,
               until_offset: int | None = None, now_ms: int | None = None) -> View:
    """Replay every offsets partition (only the group's own, when one is named)."""
    from ..offsets.records import partition_for

    found = offsets_partitions(data_dirs)
    if not found:
        raise ViewError(f"no {OFFSETS_TOPIC}-N directories in {', '.join(map(str, data_dirs))}")
    now = now_ms if now_ms is not None else (until_ms if until_ms is not None else _wall_ms())
    wanted = sorted(found)
    if group is not None:
        wanted = [partition_for(group, max(found) + 1)]  # partitions are 0..n-1
        if wanted[0] not in found:
            raise ViewError(f"partition {wanted[0]} of {OFFSETS_TOPIC} is missing")
    view = View(now)
    for p in wanted:
        view.partitions.append(replay_partition(p, found[p], now, until_ms=until_ms,
                                                until_offset=until_offset))
    return view


def _wall_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


# --- expiry preview -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expiry:
    at_ms: int
    group: str
    topic: str | None  # None: the group itself dies
    partition: int | None
    reason: str


def expiry_preview(view: View, retention_ms: int, group: str | None = None) -> list[Expiry]:
    """What the sweeps would remove, and when, if every group kept its recorded state."""
    out: list[Expiry] = []
    for pv, g in view.groups(group):
        offsets = pv.shard.offsets.get(g.group_id) or {}
        rule = group_rule(g)
        times = []
        for (topic, partition), value in sorted(offsets.items()):
            at = None if rule is None else expires_at(rule, topic, value, retention_ms)
            times.append(at)
            if at is not None:
                reason = "explicit expire_timestamp" if value.expire_timestamp != -1 else rule.reason
                out.append(Expiry(at, g.group_id, topic, partition, reason))
        if g.state is GroupState.EMPTY and all(t is not None for t in times):
            why = "last offset expired" if times else "empty group without offsets"
            out.append(Expiry(max(times, default=view.now_ms), g.group_id, None, None, why))
    return sorted(out, key=lambda e: (e.at_ms, e.group, e.topic is None, e.topic or "",
                                      e.partition or 0))


# --- output -----------------------------------------------------------------------------------------

def iso(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> int:
    """Epoch milliseconds, or ISO 8601 (a time without a zone is UTC)."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ViewError(f"--at {text!r}: not epoch milliseconds or an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def group_json(pv: PartitionView, g: ClassicGroup) -> dict:
    return {
        "group": g.group_id, "partition": pv.partition, "state": g.state.value,
        "protocol_type": g.protocol_type, "protocol": g.protocol_name, "generation": g.generation,
        "leader": g.leader_id, "members": sorted(g.members),
        # a simple group has no state timestamp of its own (rebuild stamps it "now")
        "current_state_timestamp": g.current_state_timestamp if g.protocol_type is not None else None,
        "offsets": _offsets_json(pv, g.group_id),
    }


def _offsets_json(pv: PartitionView, group_id: str) -> list[dict]:
    return [{"topic": t, "partition": p, "offset": v.offset, "leader_epoch": v.leader_epoch,
             "metadata": v.metadata, "commit_timestamp": v.commit_timestamp, "expire_timestamp": v.expire_timestamp}
            for (t, p), v in sorted((pv.shard.offsets.get(group_id) or {}).items())]


def consumer_group_json(pv: PartitionView, g: ConsumerGroup) -> dict:
    """A KIP-848 group: epochs, members with their epoch, state and partitions (by topic name)."""
    names = {t.topic_id: t.topic_name for t in g.subscription_metadata.values()}

    def parts(assignment: dict) -> dict:
        return {names.get(t, str(t)): sorted(ps) for t, ps in assignment.items() if ps}
    return {
        "group": g.group_id, "partition": pv.partition, "type": "consumer", "state": g.state,
        "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
        "members": {m.member_id: {"member_epoch": m.member_epoch, "state": int(m.state),
                                  "instance_id": m.meta.instance_id,
                                  "subscribed_topic_names": list(m.meta.subscribed_topic_names),
                                  "subscribed_topic_regex": m.meta.subscribed_topic_regex,
                                  "assigned": parts(m.assigned), "target": parts(g.targets.get(m.member_id, {}))}
                    for m in g.members.values()},
        "offsets": _offsets_json(pv, g.group_id),
    }


def partition_json(pv: PartitionView) -> dict:
    return {"partition": pv.partition, "records": pv.records, "next_offset": pv.next_offset,
            "cleaned_up_to": pv.cleaned_up_to, "problem": pv.problem}


def write_json(view: View, out: TextIO, group: str | None, preview: list[Expiry] | None) -> None:
    doc: dict[str, Any] = {"as_of_ms": view.now_ms,
                           "partitions": [partition_json(pv) for pv in view.partitions],
                           "groups": [group_json(pv, g) for pv, g in view.groups(group)]
                           + [consumer_group_json(pv, g) for pv, g in view.consumer_groups(group)]}
    if preview is not None:
        doc["expiry_preview"] = [{"at_ms": e.at_ms, "at": iso(e.at_ms), "group": e.group,
                                  "topic": e.topic, "partition": e.partition, "reason": e.reason,
                                  "overdue": e.at_ms <= view.now_ms} for e in preview]
    out.write(json.dumps(doc, indent=2) + "\n")


def write_text(view: View, out: TextIO, group: str | None, preview: list[Expiry] | None,
               check_interval_ms: int) -> None:
    for pv in view.partitions:
        if pv.problem or pv.cleaned_up_to:
            notes = [f"cleaned up to offset {pv.cleaned_up_to}"] if pv.cleaned_up_to else []
            notes += [pv.problem] if pv.problem else []
            out.write(f"# {OFFSETS_TOPIC}-{pv.partition}: {'; '.join(notes)}\n")
    shown = 0
    for pv, g in view.groups(group):
        shown += 1
        out.write(_group_line(pv, g))
        _offsets_table(out, pv, g.group_id)
    for pv, cg in view.consumer_groups(group):
        shown += 1
        out.write(f"\ngroup {cg.group_id!r} ({OFFSETS_TOPIC}-{pv.partition}): {cg.state}, group epoch "
                  f"{cg.group_epoch}, assignment epoch {cg.assignment_epoch}, consumer (KIP-848), "
                  f"{len(cg.members)} members\n")
        _offsets_table(out, pv, cg.group_id)
    if not shown:
        out.write("no groups" + (f" named {group!r}" if group is not None else "") + "\n")
    if preview is not None:
        out.write(f"\nexpiry preview (sweeps every {check_interval_ms} ms remove each entry within "
                  "one interval of its time):\n")
        _table(out, ["AT", "GROUP", "TOPIC", "PARTITION", "REASON"],
               [[iso(e.at_ms) + (" (overdue)" if e.at_ms <= view.now_ms else ""), e.group,
                 e.topic if e.topic is not None else "(group dies)",
                 "" if e.partition is None else e.partition, e.reason] for e in preview])


def _group_line(pv: PartitionView, g: ClassicGroup) -> str:
    kind = g.protocol_type if g.protocol_type is not None else "simple (commits only)"
    since = ""
    if g.state is GroupState.EMPTY and g.protocol_type is not None and g.current_state_timestamp >= 0:
        since = f", empty since {iso(g.current_state_timestamp)}"
    return (f"\ngroup {g.group_id!r} ({OFFSETS_TOPIC}-{pv.partition}): {g.state.value}, "
            f"generation {g.generation}, {kind}, {len(g.members)} members{since}\n")


def _offsets_table(out: TextIO, pv: PartitionView, group_id: str) -> None:
    _table(out, ["TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "COMMITTED", "EXPIRES", "METADATA"],
           [[t, p, v.offset, v.leader_epoch, iso(v.commit_timestamp), iso(v.expire_timestamp), json.dumps(v.metadata)]
            for (t, p), v in sorted((pv.shard.offsets.get(group_id) or {}).items())])


def _table(out: TextIO, head: list[str], rows: list[list[Any]]) -> None:
    if not rows:
        out.write("  (no committed offsets)\n")
        return
    cells = [head] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    for r in cells:
        out.write("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


# --- command -------------------------------------------------------------------------------------------

def run(args, out: TextIO | None = None) -> int:
    """The ``odradek offsets`` command (arguments from ``cli.py``)."""
    out = out if out is not None else sys.stdout
    from .config import Config, ConfigError

    try:
        config = Config.load(args.config, overrides=args.override or ())
    except (ConfigError, OSError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 2
    data_dirs = [Path(d) for d in args.data_dir] if args.data_dir else config.data_dirs
    retention_ms = (args.retention_minutes if args.retention_minutes is not None
                    else config["offsets.retention.minutes"]) * 60_000
    try:
        until_ms = parse_time(args.at) if args.at is not None else None
        view = build_view(data_dirs, group=args.group, until_ms=until_ms, until_offset=args.offset)
    except ViewError as exc:  # an OSError reaches the CLI's one handler, which names its path
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    preview = expiry_preview(view, retention_ms, args.group) if args.expiry_preview else None
    if args.json:
        write_json(view, out, args.group, preview)
    else:
        write_text(view, out, args.group, preview, config["offsets.retention.check.interval.ms"])
    return 0
