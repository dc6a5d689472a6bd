"""Reset: the running broker back to empty in one call, for a broker shared by many tests.

Gone: every topic and its logs, every group and committed offset, share-partition states, share
sessions and live share-partitions, producer
state, fetch sessions, broker settings changed at runtime (AlterConfigs on the broker: back to
the static configuration), client quotas (AlterClientQuotas), feature levels (UpdateFeatures),
client-metrics resources and telemetry instances, group configs (``_STORES``: one list, for the running
reset and for a start finishing an interrupted one), a cluster's layout (every node up, every
partition as placed: done while the marker stands); ``BrokerControl.reset`` also clears
the fault rules and the captured requests.  Kept: the listeners and their connections, the
cluster id, the producer-id block (ids never repeat), the clock (time only
moves forward; a frozen clock runs again), the static configuration and the security
set-up (SCRAM credentials and ACLs, like the listeners: what the tests log in with).

Crash safety: the marker file ``reset.pending`` is written durably before
anything is touched and removed once the empty state is durable; a start
that finds it finishes the reset (``finish_interrupted_reset``) before it
opens any log.  So a ``kill -9`` at any point leaves the old state (no
marker yet) or the empty one.

Connected clients: the switch from the old state to the empty one happens
without yielding to the event loop, so every request is answered either from
the old state or from the empty one.  Parked JoinGroup/SyncGroup answers get
NOT_COORDINATOR (the clients re-find the coordinator and join the new, empty
one), long polls on the old topics wake with UNKNOWN_TOPIC_OR_PARTITION.
The old directories are renamed ``*-delete`` during the switch and removed in
a worker thread afterwards (a start removes any that remain).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from ...protocol.lean_dataclass import dataclass
from ...storage.checkpoint import CLEANER_FILE, LOG_START_FILE, RECOVERY_POINT_FILE
from ...storage.files import (
    DELETE_DIR_SUFFIX,
    atomic_write_text,
    delete_dir_name,
    fsync_dir,
    parse_partition_dir,
    remove_tree,
)
from ...storage.log import Log
from ...storage.log_manager import CheckpointSnapshot
from ..client_metrics import FILE as CLIENT_METRICS_FILE
from ..client_quotas import FILE_NAME as CLIENT_QUOTAS_FILE
from ..cluster.layout import LAYOUT_FILE
from ..coordinator import rebalance
from ..coordinator.group_configs import FILE as GROUP_CONFIGS_FILE
from ..dataplane.topics import REGISTRY_FILE
from ..dynamic_config import FILE as DYNAMIC_CONFIG_FILE
from ..features import FILE_NAME as FEATURES_FILE
from ..features import forget_levels

if TYPE_CHECKING:
    from ...storage.config import LogConfig
    from ...storage.log_manager import LogManager
    from ..client_metrics import ClientMetricsManager
    from ..client_quotas import QuotaStore
    from ..clock import Clock
    from ..config import Config
    from ..coordinator.group_configs import GroupConfigs
    from ..coordinator.service import Coordinator
    from ..dataplane import DataPlane, TopicRegistry
    from ..dynamic_config import DynamicBrokerConfig
    from ..features import Features
    from ..fetch_sessions import FetchSessionCache
    from ..runtime.runtime import CoordinatorRuntime
    from ..schema_registry import SchemaStore
    from ..share.coordinator import ShareCoordinator
    from ..txn import TransactionCoordinator

log = structlog.get_logger("odradek.control")

RESET_MARKER = "reset.pending"


class ResetServices(Protocol):
    """What a reset uses of the broker (``BrokerApp`` wires it)."""

    config: Config
    data_dir: Path
    clock: Clock
    runtime: CoordinatorRuntime
    logs: LogManager
    topics: TopicRegistry
    dataplane: DataPlane
    dynamic_config: DynamicBrokerConfig
    client_quotas: QuotaStore
    client_quotas_lock: asyncio.Lock
    features: Features
    features_lock: asyncio.Lock
    client_metrics: ClientMetricsManager
    group_configs: GroupConfigs
    coordinator: Coordinator | None
    txn_coordinator: TransactionCoordinator | None
    share_coordinator: ShareCoordinator | None
    fetch_sessions: FetchSessionCache
    schema_store: SchemaStore | None

    async def wait_loaded(self) -> None: ...

    def set_log_defaults(self, config: LogConfig) -> None: ...

    def reopen_coordinators(self) -> None: ...

    def quotas_changed(self) -> None: ...

# a cluster's layout goes too (``cluster/layout.py``): a reset returns to the initial one
_CHECKPOINTS = (RECOVERY_POINT_FILE, CLEANER_FILE, LOG_START_FILE, LAYOUT_FILE)


async def reset_broker(app: ResetServices, lock: asyncio.Lock,
                       also: Callable[[], Awaitable[None]] | None = None) -> dict[str, Any]:
    """Empty the broker, one reset at a time (``lock``); returns what went (topics, groups) and how long
    it took (ms).  ``also``: what else returns to its start while the marker stands (a cluster's
    layout, whose file a start finishing the reset removes), so no crash keeps it without the rest."""
    async with lock:
        started = time.perf_counter()
        await asyncio.to_thread(_write_marker, app.data_dir)  # from here on a crash ends empty
        await app.wait_loaded()
        for store in _STORES:
            await store.forget(app)
        async with app.logs.maintenance:  # no retention or cleaning round on the old logs
            await app.topics.drain()  # no create or delete half-way
            old_txn = app.txn_coordinator
            old_logs, topics, groups, old_coordinator = _switch(app)
            app.fetch_sessions.clear()  # incremental fetches of the old topics: FETCH_SESSION_ID_NOT_FOUND
        await old_coordinator.stop()
        if old_txn is not None:
            await old_txn.stop()
        await app.coordinator.load()  # empty logs: at once
        if app.txn_coordinator is not None:
            await app.txn_coordinator.load()
        if app.share_coordinator is not None:  # share-partition states went with __share_group_state
            await app.share_coordinator.load()
        if also is not None:
            await also()
        await app.topics.save()
        await asyncio.to_thread(_make_durable, app, app.logs.checkpoint_snapshot())
        cleanup = asyncio.ensure_future(_remove_old(old_logs))
        app.logs.track(cleanup)
        if getattr(app.clock, "frozen", False):
            app.clock.unfreeze()
        ms = (time.perf_counter() - started) * 1000
        log.info("broker.reset", topics=len(topics), groups=groups, ms=round(ms, 2))
        return {"topics": len(topics), "groups": groups, "ms": ms}


async def _forget_dynamic_config(app: ResetServices) -> None:
    """Broker-level settings a test changed at runtime (AlterConfigs) go back to the static ones."""
    dynamic = app.dynamic_config
    if dynamic.node or dynamic.default:
        await dynamic.change(True, lambda _old: {})
        app.set_log_defaults(await dynamic.change(False, lambda _old: {}))


async def _forget_features(app: ResetServices) -> None:
    """Feature levels a test changed (UpdateFeatures) go back to the fresh cluster's; the epoch
    still grows, so clients notice."""
    features = app.features
    async with app.features_lock:
        if features.levels != features.defaults:
            await asyncio.to_thread(features.save, dict(features.defaults), features.epoch + 1)
            features.apply(dict(features.defaults))


async def _forget_client_quotas(app: ResetServices) -> None:
    """Quotas a test set (AlterClientQuotas) go: durable first, then no longer enforced."""
    store = app.client_quotas
    async with app.client_quotas_lock:
        if store.quotas:
            await asyncio.to_thread(store.save, {})
            store.apply({})
            app.quotas_changed()


async def _forget_client_metrics(app: ResetServices) -> None:
    """Client-metrics resources (IncrementalAlterConfigs) and the client instances go."""
    await app.client_metrics.reset()


async def _forget_group_configs(app: ResetServices) -> None:
    """Group configs (IncrementalAlterConfigs on GROUP resources) go: durable first."""
    await app.group_configs.forget_all()


def _unlink(data_dir: Path, name: str) -> None:
    (data_dir / name).unlink(missing_ok=True)


@dataclass(frozen=True)
class _Store:
    """A durable store (a file in the first data directory) a reset empties: how the running
    broker forgets it, and how a start finishing an interrupted reset does."""

    file: str
    forget: Callable[[ResetServices], Awaitable[None]]
    forget_at_start: Callable[[Path, str], None] = _unlink


# every store a reset empties besides the logs, the topic registry and the checkpoints: both
# paths go through this list, so a store added to one cannot be missed by the other
_STORES = (
    _Store(DYNAMIC_CONFIG_FILE, _forget_dynamic_config),
    _Store(CLIENT_QUOTAS_FILE, _forget_client_quotas),
    _Store(FEATURES_FILE, _forget_features, lambda d, _name: forget_levels(d)),
    _Store(CLIENT_METRICS_FILE, _forget_client_metrics),
    _Store(GROUP_CONFIGS_FILE, _forget_group_configs),
)


def _switch(app: ResetServices) -> tuple[list[Log], list[str], int, Any]:
    """Old state to empty without yielding: every request sees one or the other."""
    runtime = app.runtime
    if runtime.turn_open:
        runtime.flush_turn()  # what this turn staged reaches the old logs while they are open
    old_coordinator = app.coordinator
    groups = sum(len(shard.groups) for shard in old_coordinator.shards)
    old_coordinator.expiry.stop()
    for shard in old_coordinator.shards:
        rebalance.unload_shard(shard)  # parked joins and syncs answer NOT_COORDINATOR, timers stop
    topics = app.topics.clear()
    old_logs = app.logs.detach_all()
    for lg in old_logs:  # move every partition away, so a new topic of the same name starts empty
        target = lg.directory.with_name(delete_dir_name(lg.topic, lg.partition, uuid.uuid4().hex))
        os.replace(lg.directory, target)
        lg.directory = target
    app.dataplane.forget_all(topics)
    if app.schema_store is not None:  # the schema registry's subjects went with _schemas
        app.schema_store.forget()
    app.reopen_coordinators()  # fresh offsets partitions, Loading until load(); transactional ids go too
    return old_logs, topics, groups, old_coordinator


def _make_durable(app: ResetServices, checkpoints: CheckpointSnapshot) -> None:
    """The renames, the empty registry and checkpoints on disk, then the marker goes (a worker
    thread: the checkpoints were read on the loop)."""
    app.logs.write_snapshot(checkpoints)
    for d in app.config.data_dirs:
        fsync_dir(d)
    _remove_marker(app.data_dir)


async def _remove_old(logs: list[Log]) -> None:
    await asyncio.gather(*(lg.durability.drain() for lg in logs), return_exceptions=True)
    await asyncio.to_thread(_close_and_remove, logs)


def _close_and_remove(logs: list[Log]) -> None:
    for lg in logs:
        try:
            lg.discard()
            remove_tree(lg.directory, ignore_errors=True)
        except Exception as exc:  # a start removes what is left (``*-delete``)
            log.error("broker.reset_cleanup_failed", dir=str(lg.directory), error=str(exc))


# --- the marker --------------------------------------------------------------------------

def _write_marker(data_dir: Path) -> None:
    atomic_write_text(data_dir / RESET_MARKER, "reset\n")


def _remove_marker(data_dir: Path) -> None:
    (data_dir / RESET_MARKER).unlink(missing_ok=True)
    fsync_dir(data_dir)


def finish_interrupted_reset(data_dirs: list[Path]) -> bool:
    """At start, before any log opens: a reset cut short by a crash is finished (blocking).

    Removes every partition directory (internal topics included, ``_schemas`` with them), the
    topic registry and the log checkpoints, forgets every store in ``_STORES`` as the running
    reset does (feature levels back to the defaults), then the marker; run again if cut
    short again.  Returns True if there was a reset to finish.
    """
    first = data_dirs[0]
    if not (first / RESET_MARKER).exists():
        return False
    for d in data_dirs:
        if not d.is_dir():
            continue
        for entry in os.listdir(d):
            path = d / entry
            if path.is_dir() and (entry.endswith(DELETE_DIR_SUFFIX) or parse_partition_dir(entry)):
                remove_tree(path)
        for name in _CHECKPOINTS:
            (d / name).unlink(missing_ok=True)
        fsync_dir(d)
    (first / REGISTRY_FILE).unlink(missing_ok=True)
    for store in _STORES:
        store.forget_at_start(first, store.file)
    fsync_dir(first)
    _remove_marker(first)
    log.warning("broker.reset_finished_at_start", data_dirs=[str(d) for d in data_dirs])
    return True
