"""The topic registry: which topics exist, their ids, partition counts and config overrides.

State lives in ``topics.json`` in the first data directory (written whole:
temp file, fsync, rename, fsync dir).  Like Kafka, each partition directory
also gets a ``partition.metadata`` file naming the topic id, so a data dir
whose registry is missing (an imported Kafka dir, or one written before the
registry existed) is *adopted* on start: every ``<topic>-<n>/`` directory
becomes a topic again, with its recorded id.

Ordering makes every crash point recoverable:

- create: registry entry first, then the logs; a crash in between leaves an
  entry whose missing partitions are created on the next start (the config
  overrides survive, which matters: a compacted log must be recovered as one).
- delete: the entry is replaced by a *deleting* marker, then the logs go,
  then the topic's committed offsets (``forget_offsets``, the coordinator's
  tombstones), then the marker; a start finds the marked topics, removes
  their leftover logs, and forgets their offsets once the coordinator has
  loaded (``finish_deletes``).

A create or delete, once accepted, runs to its end whoever waits for it
(``_finish``): Kafka completes an accepted request whatever its client does,
and a change cut half-way (a client that hung up, a timeout) would leave the
registry and the directories disagreeing.  Registry writes are one at a
time, each held under its lock until the file is in place.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import structlog

from ...protocol.errors import ErrorCode, clip_message
from ...storage.config import LogConfig
from ...storage.files import fsync_dir
from ...storage.log import Log
from ...storage.log_manager import OFFSETS_TOPIC, SHARE_STATE_TOPIC, LogManager
from . import topic_configs

log = structlog.get_logger("odradek.topics")

REGISTRY_FILE = "topics.json"
PARTITION_METADATA = "partition.metadata"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})
MAX_NAME_LENGTH = 249
MAX_PARTITIONS = 10_000  # per topic: each partition holds two open files
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_T = TypeVar("_T")


class TopicError(Exception):
    """A topic operation refused with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str):
        message = clip_message(message)  # it may echo a client's 32 KiB name
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # overrides only

    def to_json(self) -> dict:
        return {"name": self.name, "id": str(self.topic_id), "partitions": self.partitions,
                "configs": self.configs}

    @classmethod
    def from_json(cls, d: Mapping) -> Topic:
        return cls(d["name"], uuid.UUID(d["id"]), int(d["partitions"]), dict(d.get("configs") or {}))


class _Staged(NamedTuple):
    """A topic of a CreateTopics being created: its place in the answer, what it will be."""

    index: int
    topic: Topic
    config: LogConfig
    done: asyncio.Future


def name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal Kafka topic name, or None (Kafka's ``Topic.validate``)."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL_NAME.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        return None


def write_partition_metadata(directory: Path, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    """Kafka's ``partition.metadata`` (version 0); blocking.  ``sync``: fsynced and replaced
    atomically; else written in place (the registry's start-up check repairs a torn one)."""
    path = directory / PARTITION_METADATA
    text = f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\n"
    if not sync:
        path.write_text(text, encoding="utf-8")
        return
    tmp = path.with_name(PARTITION_METADATA + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    try:
        text = (directory / PARTITION_METADATA).read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            return parse_kafka_uuid(value.strip())
    return None


def _collision_key(name: str) -> str:
    """Kafka refuses names that differ only by '.' vs '_' (they clash in metric names)."""
    return name.replace(".", "_")


class TopicRegistry:
    """Topics by name and id; creates and deletes their partition logs."""

    def __init__(self, data_dir: Path, defaults: LogConfig, *, default_partitions: int = 1):
        self.path = data_dir / REGISTRY_FILE
        self.defaults = defaults
        self.default_partitions = default_partitions
        self.logs: LogManager | None = None
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._collisions: dict[str, str] = {}
        self._log_configs: dict[str, LogConfig] = {}
        self._creating: dict[str, tuple[Topic, asyncio.Future[Topic]]] = {}
        self._deleting: set[str] = set()
        self._growing: dict[str, Topic] = {}  # topics getting partitions: their new shape
        self._grow_lock = asyncio.Lock()
        self._save_lock = asyncio.Lock()
        self._changes: set[asyncio.Task] = set()  # creates and deletes under way (``_finish``)
        # deleted topics' committed offsets go too (the broker wires in the coordinator)
        self.forget_offsets: Callable[[list[str]], Awaitable[None]] | None = None
        self._interrupted: set[str] = set()  # deletes found under way at start, logs gone
        # moves on every create, delete and partition-count change: consumer groups refresh
        # their subscribed topics' metadata when it moved (KIP-848)
        self.version = 0

    # --- lookups (event loop) -----------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._topics)

    def __contains__(self, name: str) -> bool:
        return name in self._topics

    def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic`` (internal topics included), or None if it does not exist."""
        t = self._topics.get(topic)
        if t is not None:
            return t.partitions
        if topic in INTERNAL_TOPICS and self.logs is not None:
            n = sum(1 for t, _p in self.logs.logs() if t == topic)
            return n or None
        return None

    def internal_topic_id(self, name: str, cluster_id: str) -> uuid.UUID:
        """A stable id for an internal topic (Kafka gives them ids too; we derive one)."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"odradek:{cluster_id}:{name}")

    def name_by_id(self, topic_id: uuid.UUID, cluster_id: str) -> str | None:
        """The name of the topic with this id, the internal topics' derived ids included (Metadata
        hands those out, so requests by id find them as Kafka's do)."""
        topic = self._by_id.get(topic_id)
        if topic is not None:
            return topic.name
        return next((n for n in sorted(INTERNAL_TOPICS)
                     if self.partition_count(n) and self.internal_topic_id(n, cluster_id) == topic_id), None)

    def id_by_name(self, name: str, cluster_id: str) -> uuid.UUID | None:
        """The id of topic ``name`` (an internal topic's derived one), None if it does not exist."""
        topic = self._topics.get(name)
        if topic is not None:
            return topic.topic_id
        return self.internal_topic_id(name, cluster_id) if name in INTERNAL_TOPICS and self.partition_count(name) \
            else None

    def name_items_by_id(self, items: Iterable[MutableMapping], cluster_id: str) -> None:
        """Set each decoded request item's ``name`` from its ``topic_id`` (None: no topic has it),
        so a request naming topics by id (OffsetCommit v10) is served by name, as Kafka's
        ``metadataCache.getTopicName``; unknown ids are then UNKNOWN_TOPIC_ID, before any ACL."""
        for item in items:
            item["name"] = self.name_by_id(item["topic_id"], cluster_id)

    def log(self, topic: str, partition: int) -> Log | None:
        return None if self.logs is None else self.logs.get(topic, partition)

    def log_config(self, topic: str) -> LogConfig | None:
        """LogManager's per-topic hook: None means the broker defaults."""
        return self._log_configs.get(topic)

    # --- start-up -----------------------------------------------------------------------

    def load(self) -> None:
        """Read the registry file (blocking, small); call before the logs are opened."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        for entry in data.get("topics", []):
            self._publish(Topic.from_json(entry))
        self._deleting = set(data.get("deleting", []))

    async def reconcile(self, logs: LogManager) -> None:
        """Finish interrupted deletes, adopt unregistered partition dirs, create missing partitions."""
        self.logs = logs
        changed = bool(self._deleting)
        for name in sorted(self._deleting):
            try:
                await self._delete_logs(name, None)
            except OSError as exc:  # never a reason not to start: the marker stays, the next start retries
                log.error("topic.delete_unfinished", topic=name, error=str(exc))
                continue
            if self.forget_offsets is None:
                self._deleting.discard(name)
            else:  # the marker stays until finish_deletes
                self._interrupted.add(name)
        on_disk: dict[str, list[int]] = {}
        for t, p in logs.logs():
            on_disk.setdefault(t, []).append(p)
        for name, parts in sorted(on_disk.items()):
            if name in INTERNAL_TOPICS or name in self._topics or name in self._deleting:
                continue
            self._publish(self._adopt(name, parts))
            changed = True
        await self._create_logs(list(self._topics.values()))
        if changed or not self.path.exists():
            await self._save()

    async def finish_deletes(self) -> None:
        """Once offsets can be forgotten (the coordinator loaded): finish the deletes a crash
        interrupted, so no group keeps offsets of a topic that is gone."""
        names, self._interrupted = sorted(self._interrupted), set()
        if not names or self.forget_offsets is None:
            return
        if not await self._forgot_offsets(names):
            return
        self._deleting.difference_update(names)
        await self._save()
        log.info("topic.deletes_finished", topics=names)

    async def _forgot_offsets(self, names: list[str]) -> bool:
        """Run the offsets hook; False (the deletion markers stay, so the next start retries and
        the names stay refused until then) when it failed: a marker dropped with the offsets
        still there would let a re-created topic inherit them."""
        if self.forget_offsets is None:
            return True
        try:
            await self.forget_offsets(names)
        except Exception as exc:  # logged by the hook; anything it raises means "not done"
            log.error("topic.delete_unfinished", topics=names, error=str(exc) or type(exc).__name__)
            return False
        return True

    def _adopt(self, name: str, parts: list[int]) -> Topic:
        logs = self.logs
        assert logs is not None
        ids = {read_partition_metadata(lg.directory) for p in parts if (lg := logs.get(name, p)) is not None}
        ids.discard(None)
        topic_id = next(iter(ids)) if len(ids) == 1 else uuid.uuid4()
        if topic_id in self._by_id:
            topic_id = uuid.uuid4()
        log.warning("topic.adopted", topic=name, partitions=max(parts) + 1, topic_id=str(topic_id))
        return Topic(name, topic_id, max(parts) + 1)  # type: ignore[arg-type]

    def clear(self) -> list[str]:
        """Forget every topic at once (a test's reset; the caller removes the logs and saves).
        Only between changes: ``drain`` first.  Returns the names that were known."""
        assert not self._creating, "clear() while a create is under way"
        names = sorted(self._topics)
        for store in (self._topics, self._by_id, self._collisions, self._log_configs):
            store.clear()
        self._deleting.clear()
        self._interrupted.clear()
        return names

    async def save(self) -> None:
        await self._save()

    # --- validation ---------------------------------------------------------------------

    def check_name(self, name: str) -> None:
        why = name_error(name)
        if why is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, why)

    def check_identity(self, name: str) -> None:
        """The name is free: not internal, not taken, not being deleted, no '.'/'_' clash."""
        if name in INTERNAL_TOPICS:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"{name} is an internal topic; the broker manages it")
        if name in self._topics or name in self._creating:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if name in self._deleting:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} is marked for deletion")
        key = _collision_key(name)
        other = self._collisions.get(key) or next((n for n in self._creating if _collision_key(n) == key), None)
        if other is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"topic {name!r} collides with existing topic {other!r} ('.' and '_' clash)")

    def check_new(self, name: str, partitions: int, overrides: Mapping[str, str | None]) -> LogConfig:
        """Everything CreateTopics checks before creating; returns the topic's LogConfig."""
        self.check_name(name)
        self.check_identity(name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"number of partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}")
        try:
            return topic_configs.validate(overrides, self.defaults)
        except topic_configs.TopicConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    # --- create / delete ----------------------------------------------------------------

    async def create(self, name: str, partitions: int, overrides: Mapping[str, str | None] | None = None,
                     *, validate_only: bool = False) -> Topic:
        """Create a topic (or only validate it); raises TopicError."""
        result = (await self.create_many([(name, partitions, overrides or {})], validate_only=validate_only))[0]
        if isinstance(result, TopicError):
            raise result
        return result

    async def create_many(self, wanted: Sequence[tuple[str, int, Mapping[str, str | None]]], *,
                          validate_only: bool = False) -> list[Topic | TopicError]:
        """Create topics (or only validate them): each one's Topic or TopicError, in order.

        The durable part is one round for the whole list, however long: one
        ``topics.json`` write naming every new topic, the partition directories
        created (with their ``partition.metadata``) by parallel worker threads,
        then one fsync per log dir (a CreateTopics of 1,000 topics used to pay
        a registry rewrite and fsyncs per topic, its files created one by one
        on the event loop).
        """
        results: list[Topic | TopicError] = []
        staged: list[_Staged] = []
        loop = asyncio.get_running_loop()
        for name, partitions, overrides in wanted:
            try:
                config = self.check_new(name, partitions, overrides)
            except TopicError as exc:
                results.append(exc)
                continue
            topic = Topic(name, uuid.uuid4(), partitions, {k: v for k, v in overrides.items() if v is not None})
            results.append(topic)
            if not validate_only:
                done: asyncio.Future[Topic] = loop.create_future()
                self._creating[name] = (topic, done)  # from now on the name is taken
                staged.append(_Staged(len(results) - 1, topic, config, done))
        if staged:
            failed = await self._finish(self._create_all(staged))
            for index, error in failed.items():
                results[index] = error
        return results

    async def _create_all(self, staged: list[_Staged]) -> dict[int, TopicError]:
        """Registry entry, logs, metadata for every staged topic; the ones that failed, by index
        (rolled back: their logs removed, the registry rewritten once without them)."""
        failed: dict[int, TopicError] = {}
        try:
            await self._save()
            for s in staged:
                self._log_configs[s.topic.name] = s.config
            results = await self._open_logs([s.topic for s in staged])
            opened: list[tuple[_Staged, list[Path], list[Path]]] = []
            for s in staged:
                result = results[s.topic.name]
                if isinstance(result, Exception):
                    failed[s.index] = self._create_failed(s, result)
                else:
                    opened.append((s, *result))
            try:
                await _write_metadata_round([(s.topic.topic_id, fresh, existing) for s, fresh, existing in opened])
            except Exception as exc:
                for s, _fresh, _existing in opened:
                    failed[s.index] = self._create_failed(s, exc)
        except BaseException as exc:  # the registry write failed, or we are being cancelled
            for s in staged:
                if s.index not in failed:
                    failed[s.index] = self._create_failed(s, exc)
            await self._rollback([s.topic for s in staged])
            if not isinstance(exc, Exception):
                raise
            return failed
        if failed:
            await self._rollback([s.topic for s in staged if s.index in failed])
        for s in staged:
            if s.index in failed:
                continue
            self._creating.pop(s.topic.name, None)
            self._publish(s.topic)
            s.done.set_result(s.topic)
            log.info("topic.created", topic=s.topic.name, partitions=s.topic.partitions,
                     topic_id=str(s.topic.topic_id), configs=s.topic.configs)
        return failed

    def _create_failed(self, s: _Staged, exc: BaseException) -> TopicError:
        """Forget a topic whose creation failed; its waiters get KAFKA_STORAGE_ERROR."""
        name = s.topic.name
        self._log_configs.pop(name, None)
        self._creating.pop(name, None)
        error = TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"creating {name!r} failed: {exc}")
        if not s.done.done():
            s.done.set_exception(error)
            s.done.exception()  # retrieved: nobody else may be waiting
        if isinstance(exc, Exception):
            log.error("topic.create_failed", topic=name, error=str(exc))
        return error

    async def ensure(self, name: str) -> Topic:
        """The topic, auto-created with ``num.partitions`` if absent (caller checked the policy)."""
        topic = self._topics.get(name)
        if topic is not None:
            return topic
        pending = self._creating.get(name)
        if pending is not None:
            return await asyncio.shield(pending[1])
        return await self.create(name, self.default_partitions)

    def check_grow(self, name: str, count: int, new_assignments: int | None) -> Topic:
        """CreatePartitions' checks, in Kafka's order (``ReplicationControlManager.createPartitions``);
        returns the topic as it would be after growing."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        current = topic.partitions
        if count == current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if count < current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"The topic {name} currently has {current} partition(s); "
                             f"{count} would not be an increase.")
        if new_assignments is not None and new_assignments != count - current:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {count - current} additional partition(s), but only "
                             f"{new_assignments} assignment(s) were specified.")
        if count > MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"number of partitions must be between 1 and {MAX_PARTITIONS}, got {count}")
        return Topic(topic.name, topic.topic_id, count, dict(topic.configs))

    async def grow(self, name: str, count: int, *, new_assignments: int | None = None,
                   validate_only: bool = False) -> Topic:
        """Add partitions up to ``count`` (CreatePartitions); raises TopicError.

        Grows run one at a time, each checked against the count the previous
        one left (Kafka's controller is serial too).  Registry entry first,
        then the new logs, then the topic is published with its new count: a
        crash in between leaves an entry whose missing partitions
        ``reconcile`` creates on the next start, so clients see the growth
        whole or not at all (the pattern of ``create``).
        """
        if validate_only:
            return self.check_grow(name, count, new_assignments)
        return await self._finish(self._grow(name, count, new_assignments))

    async def _grow(self, name: str, count: int, new_assignments: int | None) -> Topic:
        async with self._grow_lock:
            grown = self.check_grow(name, count, new_assignments)
            topic = self._topics[name]
            before = topic.partitions
            self._growing[name] = grown
            try:
                await self._save()
                await self._create_logs([grown])
            except Exception as exc:
                self._growing.pop(name, None)
                await self._undo_grow(name, before, count)
                log.error("topic.grow_failed", topic=name, error=str(exc))
                raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"adding partitions to {name!r} failed: {exc}") from exc
            self._growing.pop(name, None)
            topic.partitions = count  # the same object: whoever holds it sees the growth
            self.version += 1
            log.info("topic.partitions_added", topic=name, partitions=count, before=before)
            return topic

    async def _undo_grow(self, name: str, before: int, count: int) -> None:
        """The old count back on disk and the new partitions' leftovers gone; if that fails
        too, the next start creates the missing partitions instead (the entry may say either)."""
        try:
            if self.logs is not None:
                for p in range(before, count):
                    await self.logs.delete(name, p)
            await self._save()
        except Exception as exc:
            log.error("topic.grow_rollback_failed", topic=name, error=str(exc))

    async def delete(self, name: str) -> Topic:
        """Remove the topic and its logs; raises TopicError if unknown or internal."""
        if name in INTERNAL_TOPICS:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is an internal topic")
        if name in self._growing:  # a growth under way ends first (Kafka's controller is serial too)
            async with self._grow_lock:
                pass
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        self._unpublish(topic)
        self._deleting.add(name)  # from now on every registry write carries the marker
        return await self._finish(self._delete(topic))

    async def _delete(self, topic: Topic) -> Topic:
        name = topic.name
        try:
            await self._save()
        except Exception as exc:  # nothing changed on disk: the topic stays
            self._deleting.discard(name)
            self._publish(topic)
            log.error("topic.delete_failed", topic=name, error=str(exc))
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"deleting {name!r} failed: {exc}") from exc
        try:
            await self._delete_logs(name, topic.partitions)
        except Exception as exc:  # the marker stays: the next start finishes the delete
            log.error("topic.delete_unfinished", topic=name, error=str(exc))
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"deleting {name!r} failed: {exc}") from exc
        if not await self._forgot_offsets([name]):
            return topic  # gone from clients' view; the marker stays and the next start finishes
        self._deleting.discard(name)
        self._log_configs.pop(name, None)
        await self._save()
        log.info("topic.deleted", topic=name, topic_id=str(topic.topic_id))
        return topic

    # --- config changes (AlterConfigs) ---------------------------------------------------

    def check_configs(self, overrides: Mapping[str, str]) -> LogConfig:
        """The LogConfig a topic with these overrides gets; INVALID_CONFIG if Kafka would refuse them."""
        try:
            return topic_configs.validate(overrides, self.defaults)
        except topic_configs.TopicConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    async def alter_configs(self, name: str, overrides: Mapping[str, str]) -> Topic:
        """Replace the topic's overrides: durably first, then on its live logs.

        Runs to its end once begun (``_finish``), so the file and the logs never
        disagree because a client hung up half-way.
        """
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        self.check_configs(overrides)
        # the new set is the current one from now on: a change computed after this one starts
        # from it, never from the set this one replaces
        old, topic.configs = topic.configs, dict(overrides)
        return await self._finish(self._alter(topic, old))

    async def _alter(self, topic: Topic, old: dict[str, str]) -> Topic:
        overrides = topic.configs
        try:
            await self._save()
        except Exception as exc:  # nothing changed on disk: the old overrides stay in force
            if topic.configs is overrides:
                topic.configs = old
            log.error("topic.config_change_failed", topic=topic.name, error=str(exc))
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"storing configs of {topic.name!r} failed: {exc}") \
                from exc
        if self._topics.get(topic.name) is topic:  # not deleted meanwhile
            config = self.defaults.with_topic_config(overrides)  # on the defaults now in force
            if overrides:
                self._log_configs[topic.name] = config
            else:
                self._log_configs.pop(topic.name, None)
            if self.logs is not None:
                self.logs.update_config(topic.name, config)
        log.info("topic.configs_changed", topic=topic.name, configs=overrides)
        return topic

    def set_defaults(self, defaults: LogConfig) -> None:
        """New broker-level log defaults (dynamic broker configs): topics inherit them at once."""
        self.defaults = defaults
        for name in list(self._log_configs):
            topic = self._topics.get(name) or next((t for t, _d in self._creating.values() if t.name == name), None)
            self._log_configs[name] = defaults.with_topic_config(topic.configs if topic else {})

    async def _finish(self, change: Coroutine[Any, Any, _T]) -> _T:
        """Run a multi-step change to its end even if the caller is cancelled; the caller gets its
        result (or is cancelled itself, the change going on without it)."""
        task = asyncio.ensure_future(change)
        self._changes.add(task)
        task.add_done_callback(_change_done)
        task.add_done_callback(self._changes.discard)
        return await asyncio.shield(task)

    async def drain(self) -> None:
        """Until every create and delete under way is done (before the logs close)."""
        while self._changes:
            await asyncio.wait(list(self._changes))

    # --- internals ----------------------------------------------------------------------

    def _publish(self, topic: Topic) -> None:
        self.version += 1
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._collisions[_collision_key(topic.name)] = topic.name
        if topic.configs:
            self._log_configs[topic.name] = self.defaults.with_topic_config(topic.configs)

    def _unpublish(self, topic: Topic) -> None:
        self.version += 1
        self._topics.pop(topic.name, None)
        self._by_id.pop(topic.topic_id, None)
        self._collisions.pop(_collision_key(topic.name), None)

    async def _create_logs(self, topics: list[Topic]) -> None:
        """Open (creating if needed) every partition of ``topics`` and write their
        partition.metadata, in one round; raises the first partition's error."""
        opened = await self._open_logs(topics)
        jobs = []
        for topic in topics:
            result = opened[topic.name]
            if isinstance(result, Exception):
                raise result
            jobs.append((topic.topic_id, *result))
        await _write_metadata_round(jobs)

    async def _open_logs(self, topics: list[Topic]) -> dict[str, tuple[list[Path], list[Path]] | Exception]:
        """Per topic: its new partition directories and its existing ones, or the error of a
        partition that could not be opened (``LogManager.create_many``: worker threads)."""
        logs = self.logs
        assert logs is not None, "registry not started"
        before = {(t.name, p) for t in topics for p in range(t.partitions) if logs.get(t.name, p) is not None}
        ids = {t.name: t.topic_id for t in topics}

        def stamp(log: Log) -> None:  # in the worker that created the partition, beside its segment
            write_partition_metadata(log.directory, ids[log.topic], sync=False)

        opened = await logs.create_many(((t.name, p, logs.config_for(t.name))
                                         for t in topics for p in range(t.partitions)), on_new=stamp)
        out: dict[str, tuple[list[Path], list[Path]] | Exception] = {}
        for t in topics:
            fresh: list[Path] = []
            existing: list[Path] = []
            error: Exception | None = None
            for p in range(t.partitions):
                lg = opened[(t.name, p)]
                if isinstance(lg, Exception):
                    error = error or lg
                else:
                    (existing if (t.name, p) in before else fresh).append(lg.directory)
            out[t.name] = error if error is not None else (fresh, existing)
        return out

    async def _rollback(self, topics: list[Topic]) -> None:
        """Remove the logs of topics whose creation failed, then rewrite the registry once."""
        try:
            for topic in topics:
                await self._delete_logs(topic.name, topic.partitions)
            await self._save()
        except Exception as exc:  # the next start reconciles whatever is left
            log.error("topic.create_rollback_failed", topics=[t.name for t in topics], error=str(exc))

    async def _delete_logs(self, name: str, partitions: int | None) -> None:
        logs = self.logs
        assert logs is not None
        parts = [p for t, p in logs.logs() if t == name]
        if partitions is not None:
            parts = sorted(set(parts) | set(range(partitions)))
        for p in parts:
            await logs.delete(name, p)

    def _snapshot(self) -> dict:
        """Published topics and those being created (their entry is written before their logs)."""
        every = [self._growing.get(t.name, t) for t in self._topics.values()]
        every += [t for t, _done in self._creating.values()]
        topics = [t.to_json() for t in sorted(every, key=lambda t: t.name)]
        return {"version": 1, "topics": topics, "deleting": sorted(self._deleting)}

    async def _save(self) -> None:
        """Persist the registry durably; saves run one at a time, each writing the state of its turn.

        A cancelled save still holds the lock until its file is in place: a
        second writer must never race it on the temp file (``os.replace``
        failing, or one file holding the bytes of two snapshots).
        """
        async with self._save_lock:
            write = asyncio.ensure_future(asyncio.to_thread(_write_json, self.path, self._snapshot()))
            cancelled = False
            while not write.done():
                try:
                    await asyncio.wait([write])
                except asyncio.CancelledError:
                    cancelled = True
            if cancelled:
                raise asyncio.CancelledError
            write.result()


def _change_done(task: asyncio.Task) -> None:
    """Retrieve the outcome of a change nobody may be waiting for any more (its client is gone)."""
    if not task.cancelled():
        task.exception()


async def _write_metadata_round(jobs: list[tuple[uuid.UUID, list[Path], list[Path]]]) -> None:
    """For each (topic id, new partition dirs, existing ones): the new directories got their
    partition.metadata from the worker that created them (``_open_logs``); an existing one
    is rewritten where it does not read back as the topic's id; then one fsync per log dir,
    for the new directories' entries.

    The files are not fsynced one by one: ``topics.json``, fsynced before,
    holds the ids, and every start rewrites a partition.metadata that a crash
    left missing or torn (``reconcile``), so one round covers any request.
    """
    def finish() -> None:
        parents = set()
        for topic_id, fresh, existing in jobs:
            parents.update(d.parent for d in fresh)
            for d in existing:
                if read_partition_metadata(d) != topic_id:
                    write_partition_metadata(d, topic_id, sync=False)
                    parents.add(d.parent)
        for parent in parents:
            fsync_dir(parent)

    await asyncio.to_thread(finish)


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
