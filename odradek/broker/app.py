"""A running broker: configuration, data directory, handlers and listeners wired together."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from ..offsets.records import partition_for
from ..storage.config import FsyncMode, LogConfig
from ..storage.log import Log
from ..storage.log_manager import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC, LogManager
from .client_metrics import ClientMetricsManager
from .client_metrics_config import Subscription
from .client_quotas import QuotaStore
from .clock import BrokerClock, Clock
from .config import (
    WILDCARD_HOSTS,
    Config,
    ConfigError,
    basic_auth_users,
    parse_address,
    parse_http_address,
    registry_address,
)
from .control import BrokerControl
from .control.reset import finish_interrupted_reset
from .coordinator.config import CoordinatorConfig
from .coordinator.group_configs import GroupConfigs
from .coordinator.service import Coordinator
from .datadir import DirLocks, clear_bound, load_or_create_meta, prepare_data_dir, write_bound
from .dataplane import DataPlane, TopicRegistry
from .dispatch import HandlerTable, RequestContext
from .dynamic_config import DynamicBrokerConfig
from .emulation import advertised_floors, api_limits
from .features import GROUP_VERSION, SHARE_VERSION, TRANSACTION_VERSION, Features, parse_levels
from .fetch_sessions import FetchSessionCache
from .handlers import acls as acl_handlers
from .handlers import client_quotas as quota_handlers
from .handlers import cluster, groups, log_admin, partitions, producer_state, scram_credentials
from .handlers import configs as config_handlers
from .handlers import consumer_groups as consumer_group_handlers
from .handlers import features as feature_handlers
from .handlers import fetch as fetch_handlers
from .handlers import offsets as offset_handlers
from .handlers import produce as produce_handlers
from .handlers import sasl as sasl_handlers
from .handlers import share as share_handlers
from .handlers import share_groups as share_group_handlers
from .handlers import share_offsets as share_offset_handlers
from .handlers import telemetry as telemetry_handlers
from .handlers import topics as topic_handlers
from .handlers import transactions as txn_handlers
from .lazy_import import import_off_loop
from .metrics import Metrics
from .quota_enforcer import QuotaEnforcer
from .runtime.runtime import CoordinatorRuntime
from .security.listeners import Endpoint
from .security.scram_store import ScramCredentialStore
from .security.served import ServedListener, build_listeners
from .server import KafkaServer
from .share.coordinator import ShareCoordinator
from .share.manager import SharePartitionManager
from .share.sessions import ShareSessionCache
from .txn import TransactionCoordinator, TxnConfig
from .txn.markers import MarkerRouter

if TYPE_CHECKING:
    from ..web.control import ControlEndpoint  # the wiring starts the HTTP surfaces above it
    from ..web.deferred import DeferredListener
    from .cluster import Cluster
    from .schema_registry import SchemaStore  # loaded when the registry is on (_start_registry)
    from .security.authorizer import Authorizer

log = structlog.get_logger("odradek.broker")


_BIND_REASONS = {errno.EADDRINUSE: "the address is in use (another broker or program listens there)",
                 errno.EADDRNOTAVAIL: "the host is not an address of this machine",
                 errno.EACCES: "this user may not listen there (a port below 1024?)"}


@contextmanager
def _naming_the_setting(setting: str, host: str, port: int) -> Iterator[None]:
    """A port that cannot be bound becomes a ConfigError naming the setting to change, instead of
    asyncio's "error while attempting to bind" (which names neither the setting nor the cure)."""
    try:
        yield
    except OSError as exc:
        reason = _BIND_REASONS.get(exc.errno)
        if reason is None:
            raise
        raise ConfigError(f"cannot listen on {host or '0.0.0.0'}:{port}: {reason}; "
                          f"set {setting} to a free port (0 picks one)") from exc


class BrokerApp:
    def __init__(self, config: Config, clock: Clock | None = None):
        self.config = config
        self.clock = clock or BrokerClock()  # tests move it (``odradek.broker.control``)
        self.node_id: int = config["node.id"]
        self.data_dir: Path = config.data_dirs[0]
        release = config["odradek.emulate.kafka.version"]
        self.handlers = HandlerTable(api_limits(release), advertised_floors(release))
        self.metrics = Metrics()
        self.server = KafkaServer(self.handlers, config["socket.request.max.bytes"], self.metrics,
                                  idle_ms=config["connections.max.idle.ms"], clock=self.clock)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: threading.Thread | None = None
        self.metrics_port: int | None = None
        self.cluster_id = ""
        self.endpoint = Endpoint(self.node_id, "", 0)  # the first listener's (bootstrap_servers)
        self.endpoints: dict[str, Endpoint] = {}  # what each listener advertises, by listener name
        self.listeners: list = []  # ``security.served.ServedListener``, built at start
        self.bound: list[tuple[str, int]] = []
        self._lock: DirLocks | None = None
        self.log_config = LogConfig.from_broker_config(config.log_defaults())
        self.dynamic_config = DynamicBrokerConfig(config, self.data_dir)
        self.topics = TopicRegistry(self.data_dir, self.log_config, default_partitions=config["num.partitions"])
        self.topics.forget_offsets = partial(topic_handlers.forget_offsets, self)
        self.logs = LogManager(config.data_dirs, self.log_config, clock=self.clock.now_ms,
                               topic_config=self.topics.log_config,
                               retention_check_interval_ms=config["log.retention.check.interval.ms"],
                               cleaner_backoff_ms=config["log.cleaner.backoff.ms"])
        self.dataplane = DataPlane(self.topics, self.logs, self.data_dir)
        self.dataplane.internal_stable_offset = self._offsets_stable_offset
        self.coordinator_config = CoordinatorConfig.from_config(config)
        self.group_configs = GroupConfigs.from_config(config, self.data_dir)  # GROUP resources
        self.runtime = CoordinatorRuntime()  # every coordinator's shards write through it
        self.coordinator: Coordinator | None = None
        self.txn_config = TxnConfig.from_config(config)
        # the transaction coordinator (also the data plane's TxnVerifier); markers go through the router
        self.txn_coordinator: TransactionCoordinator | None = None
        self.marker_router = MarkerRouter(self)
        # share groups (KIP-932): the share coordinator (__share_group_state, opened at start), the
        # share-partitions this leader serves and the members' share sessions
        self.share_coordinator: ShareCoordinator | None = None
        self.share_partitions = SharePartitionManager(self)
        self.share_sessions = ShareSessionCache(config["group.share.max.share.sessions"])
        self.server.connection_closed = partial(share_handlers.connection_closed, self)
        self._loading: asyncio.Task | None = None
        self.coordinator_loaded = asyncio.Event()  # every offsets partition replayed
        # SCRAM users (SaslSettings.credentials): read at start, changed by AlterUserScramCredentials
        self.scram_credentials = ScramCredentialStore(self.data_dir)
        # client quotas (KIP-546): read at start, changed by AlterClientQuotas
        self.client_quotas = QuotaStore(self.data_dir)
        self.client_quotas_lock = asyncio.Lock()
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"],
                                                self.clock.now_ms)  # KIP-227, Kafka's FetchSessionCache
        # finalized feature levels (KIP-584): read at start, changed by UpdateFeatures
        self.features = Features(self.data_dir, release, parse_levels(config["odradek.initial.features"]))
        self.features.listeners.append(self.features_changed)
        self.features_lock = asyncio.Lock()
        self.quota_enforcer = QuotaEnforcer(self.client_quotas, self.clock.now_ms, config["quota.window.num"],
                                            config["quota.window.size.seconds"])
        # ACLs when authorizer.class.name names Kafka's authorizer; None: no checks at all (and
        # no ACL code loaded)
        self.authorizer: Authorizer | None = None
        if config["authorizer.class.name"]:
            from .security.authorizer import Authorizer  # noqa: PLC0415

            self.authorizer = Authorizer.from_config(config, self.data_dir)
        # several brokers in this process (``cluster``): the layout, None for the one broker
        self.cluster: Cluster | None = None
        if config["odradek.brokers"] > 1:
            from .cluster import service as cluster_service  # noqa: PLC0415 - one broker loads none of it

            self.cluster = cluster_service.Cluster(self, config["odradek.brokers"])
            self.dataplane.in_sync = self.cluster.in_sync
        # --- handler registration: one line per area ---
        cluster.register(self.handlers, self)
        sasl_handlers.register(self.handlers)
        offset_handlers.register(self.handlers, self)
        groups.register(self.handlers, self)
        consumer_group_handlers.register(self.handlers, self)
        share_group_handlers.register(self.handlers, self)
        topic_handlers.register(self.handlers, self)
        produce_handlers.register(self.handlers, self)
        txn_handlers.register(self.handlers, self)
        fetch_handlers.register(self.handlers, self)
        config_handlers.register(self.handlers, self)
        partitions.register(self.handlers, self)
        log_admin.register(self.handlers, self)
        producer_state.register(self.handlers, self)
        scram_credentials.register(self.handlers, self)
        acl_handlers.register(self.handlers, self)
        quota_handlers.register(self.handlers, self)
        feature_handlers.register(self.handlers, self)
        share_handlers.register(self.handlers, self)
        share_offset_handlers.register(self.handlers, self)
        # client telemetry (KIP-714): the client instances always exist (test control reads
        # them); the two APIs are served, and advertised, only when telemetry is on
        default_metrics = config["client.metrics.default.metrics"]
        default = Subscription.from_configs({"metrics": default_metrics, "interval.ms": str(
            config["client.metrics.default.interval.ms"])}) if default_metrics else None
        self.client_metrics = ClientMetricsManager(default, config["telemetry.max.bytes"], self.clock.now_ms,
                                                   self.data_dir)
        if config["client.telemetry.enable"] or default is not None:
            telemetry_handlers.register(self.handlers, self)
        # every handler above is registered: a cluster's node answers only for what it leads, after
        # Kafka's authorization checks (installed next, so they run first)
        if self.cluster is not None:
            from .cluster import guard  # noqa: PLC0415

            guard.install(self.handlers, self.cluster)
        if self.authorizer is not None:
            from .security import guards  # noqa: PLC0415

            guards.install(self.handlers, self)
        # test control: faults and capture (in-process always; from outside only if configured)
        self.control = BrokerControl(self, config["odradek.control.capture.requests"])
        self.control_endpoint: ControlEndpoint | None = None
        self.control_address: tuple[str, int] | None = None
        # the web console: its port bound after the Kafka listeners, its pages built on first use
        self.console: DeferredListener | None = None
        self.console_address: tuple[str, int] | None = None
        # the schema registry: its store replays _schemas, its HTTP listener starts after the
        # Kafka listeners answer (``_start_registry``), so start-up pays for neither
        self.schema_store: SchemaStore | None = None
        self.registry_listener: DeferredListener | None = None
        self.registry_address: tuple[str, int] | None = None
        self._registry_starting: asyncio.Task | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.endpoint.host}:{self.endpoint.port}"

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.current_thread()
        for d in self.config.data_dirs:
            prepare_data_dir(d)
        self._lock = DirLocks(self.config.data_dirs)
        self._lock.acquire()
        try:
            self.cluster_id = load_or_create_meta(self.data_dir, self.node_id)
            finish_interrupted_reset(self.config.data_dirs)  # a test's reset cut short by a crash
            self.scram_credentials.load()
            self.client_quotas.load()
            self.features.load()
            self.client_metrics.subscriptions.load()
            self.group_configs.load()
            self.quotas_changed()
            if self.authorizer is not None:
                self.authorizer.load()  # before any listener: no request is checked against no ACLs
            self.dynamic_config.load()  # broker-level defaults set at runtime, then topics' own
            self.set_log_defaults(self.dynamic_config.log_defaults())
            self.topics.load()  # before the logs open: per-topic configs steer their recovery
            await self.logs.start()
            self.share_coordinator = self._open_share_coordinator()  # the group coordinator's persister
            self.coordinator = self._open_coordinator()
            self.txn_coordinator = self._open_txn_coordinator()
            self.server.attach_runtime(self.runtime)
            await self.dataplane.start()
            # like Kafka, serve while the offsets partitions load: group requests get
            # COORDINATOR_LOAD_IN_PROGRESS until their shard is active
            self._loading = asyncio.get_running_loop().create_task(self._load())
            # every listener's TLS and SASL set-up is checked before the first port opens
            self.listeners = build_listeners(self.config, self.scram_credentials,
                                             self.clock.now_ms)
            for listener in self.listeners:
                listener.node_id = self.node_id
            for i, listener in enumerate(self.listeners):
                with _naming_the_setting("listeners (odradek serve --port N)" if i == 0 else "listeners",
                                         listener.spec.host, listener.spec.port):
                    self.bound.append(await self.server.listen(listener.spec.host, listener.spec.port, listener))
            write_bound(self.data_dir, self.bound)  # what `odradek health` probes
            self.endpoints = {listener.name: self._advertised(listener, bound)
                              for listener, bound in zip(self.listeners, self.bound, strict=True)}
            self.endpoint = self.endpoints[self.listeners[0].name]
            if self.cluster is not None:
                await self._start_cluster()
            self.metrics.attach(self)
            if self.config["odradek.control.listener"]:
                from ..web.control import ControlEndpoint  # noqa: PLC0415 - only when enabled

                self.control_endpoint = ControlEndpoint(self.control)
                address = parse_address(self.config["odradek.control.listener"], self.config["odradek.control.host"])
                with _naming_the_setting("odradek.control.listener", *address):
                    self.control_address = await self.control_endpoint.start(*address)
            if self.config["odradek.console.listener"]:
                self._start_console()
            if registry_address(self.config["odradek.schema.registry.listener"]) is not None:
                self._registry_starting = asyncio.get_running_loop().create_task(self._start_registry())
            if self.config["metrics.port"] is not None:
                with _naming_the_setting("metrics.port", self.config["metrics.host"], self.config["metrics.port"]):
                    self.metrics_port = self.metrics.serve(self.config["metrics.host"],
                                                           self.config["metrics.port"])
        except BaseException:
            await self._stop_console()
            await self._stop_registry()
            if self.control_endpoint is not None:
                await self.control_endpoint.stop()
            await self.server.stop_accepting()
            await self._close_storage()
            clear_bound(self.data_dir)
            self._lock.release()
            raise
        log.info("broker.started", node_id=self.node_id, cluster_id=self.cluster_id,
                 listeners=[f"{li.name}({li.spec.protocol})={h}:{p}"
                            for li, (h, p) in zip(self.listeners, self.bound, strict=True)],
                 advertised=self.bootstrap_servers, data_dir=str(self.data_dir),
                 metrics_port=self.metrics_port)

    async def _start_cluster(self) -> None:
        """The other nodes' listeners, each node's advertised endpoints; the saved layout (a node
        saved as down stays closed until brought up)."""
        cluster = self.cluster
        await cluster.load()
        cluster.endpoints[self.node_id] = self.endpoints
        for node, listeners in cluster.node_listeners(self.listeners).items():
            if node == self.node_id:
                continue
            eps = {}
            for listener in listeners:
                with _naming_the_setting("odradek.cluster.listeners", listener.spec.host, listener.spec.port):
                    bound = await self.server.listen(listener.spec.host, listener.spec.port, listener)
                eps[listener.name] = self._advertised(listener, bound, node)
            cluster.endpoints[node] = eps
        for node in cluster.layout.down:
            self.server.close_node(node)

    async def set_node_down(self, node: int, down: bool) -> int:
        """A cluster's node down (listeners closed, partitions failed over) or back up."""
        if self.cluster is None:
            raise ValueError("one broker: use broker_down/broker_up (odradek.brokers is 1)")
        changed = await self.cluster.set_down(node, down)
        if down:
            self.server.close_node(node)
        else:
            await self.server.open_node(node)
        return changed

    def _start_console(self) -> None:
        """Bind the console's port; its pages (aiohttp, Jinja2, the routes) are built on the first
        connection (``web.deferred``), so a broker whose console nobody opens pays for neither.  A
        port it cannot bind is logged and the broker runs on without it (8080 is often taken)."""
        from ..web.deferred import DeferredListener  # noqa: PLC0415 - the wiring starts the HTTP surfaces

        host, port = parse_http_address(self.config["odradek.console.listener"])
        listener = DeferredListener(self._console_application, "console")
        try:
            self.console_address = listener.bind(host, port)
        except OSError as exc:
            log.warning("console.not_started", host=host, port=port, error=str(exc),
                        note="set odradek.console.listener to a free port (0 picks one), or empty for none")
            return
        self.console = listener
        log.info("console.listening", url=self.console_url)

    async def _console_application(self):
        """The console's aiohttp application (its modules imported in a worker thread)."""
        pages = await import_off_loop("odradek.web.console")
        return pages.ConsolePages(self, read_only=self.config["odradek.console.read.only"]).application()

    @property
    def console_url(self) -> str | None:
        """``http://host:port/`` of the console once it listens, else None."""
        if self.console_address is None:
            return None
        host, port = self.console_address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"

    async def _stop_console(self) -> None:
        if self.console is not None:
            await self.console.stop()
            self.console = None
            self.console_address = None

    async def _start_registry(self) -> None:
        """Replay ``_schemas`` and bind the registry's port; its HTTP application (aiohttp, the
        routes) is built on the first connection (``web.deferred``), so a broker whose registry
        is never used pays neither the import nor its memory."""
        # the store loads on the loop's thread, not import_off_loop's: the first requests' codecs
        # compile meanwhile (CPython 3.11's concurrent-compile SystemError, gh-106905)
        from ..web.deferred import DeferredListener  # noqa: PLC0415 - the wiring starts the HTTP surfaces
        from .schema_registry import SchemaStore  # noqa: PLC0415 - only with the registry on

        setting = "odradek.schema.registry.listener"
        host, port = registry_address(self.config[setting])
        try:
            store = SchemaStore(self.topics, self.dataplane, self.clock.now_ms, topic=self.config["kafkastore.topic"],
                                default_compatibility=self.config["schema.compatibility.level"].upper())
            await store.start()
            self.schema_store = store
            self.registry_listener = DeferredListener(self._registry_application, "schema-registry")
            with _naming_the_setting(setting, host, port):
                self.registry_address = self.registry_listener.bind(host, port)
        except Exception as exc:
            log.error("registry.start_failed", setting=setting, error=str(exc),
                      note="the broker serves Kafka without the schema registry")
            self.registry_listener = None
            raise
        log.info("registry.listening", url=self.registry_url)

    async def _registry_application(self):
        """The registry's aiohttp application (its modules imported in a worker thread)."""
        routes = await import_off_loop("odradek.web.registry")
        return routes.RegistryRoutes(self.schema_store, self.cluster_id).application(
            basic_auth_users(self.config["odradek.schema.registry.basic.auth.users"]))

    @property
    def registry_url(self) -> str | None:
        """``http://host:port`` of the schema registry once it listens, else None."""
        if self.registry_address is None:
            return None
        host, port = self.registry_address
        return f"http://{host}:{port}"

    async def wait_registry(self) -> str:
        """Until the schema registry listens (tests and tools): its URL; its start-up error if it failed."""
        if self._registry_starting is None:
            raise ConfigError("the schema registry is off (odradek.schema.registry.listener is empty)")
        await asyncio.shield(self._registry_starting)
        return self.registry_url  # type: ignore[return-value]

    async def _stop_registry(self) -> None:
        if self._registry_starting is not None:
            self._registry_starting.cancel()
            await asyncio.gather(self._registry_starting, return_exceptions=True)
            self._registry_starting = None
        if self.registry_listener is not None:
            await self.registry_listener.stop()
            self.registry_listener = None
        self.registry_address = None

    def authorize_cluster(self, ctx: RequestContext, operation: str) -> bool:
        """``operation`` (an ACL operation name: DESCRIBE, ALTER, ...) on the cluster resource,
        for handlers that check it themselves (the SCRAM credential APIs); True without ACLs."""
        if self.authorizer is None:
            return True
        from .security.acls import AclOperation  # noqa: PLC0415 - loaded with the authorizer

        return self.authorizer.cluster(ctx, AclOperation[operation])

    def features_changed(self) -> None:
        """The finalized feature levels moved (UpdateFeatures, a reset, the start's load): the
        coordinator's cached consumer-protocol switch follows."""
        if self.coordinator is not None:
            self.coordinator.features_changed()

    def quotas_changed(self) -> None:
        """The client quotas changed: the connections enforce them only while one is set."""
        self.server.quotas = self.quota_enforcer if self.quota_enforcer.refresh() else None

    def set_log_defaults(self, config: LogConfig) -> None:
        """Broker-level log defaults (static plus dynamic): topics without an override follow at once."""
        self.log_config = config
        self.topics.set_defaults(config)
        self.logs.set_default_config(config)

    async def _load(self) -> None:
        await asyncio.gather(self.coordinator.load(), self.txn_coordinator.load(), self.share_coordinator.load())
        self.coordinator_loaded.set()
        try:  # deletes a crash interrupted also forget their topics' offsets, now that it can be done
            await self.topics.finish_deletes()
        except Exception as exc:  # the marker stays: the next start tries again
            log.error("topic.deletes_unfinished", error=str(exc))

    async def wait_loaded(self) -> None:
        """Until every offsets partition has been replayed (tests and tools use this)."""
        if self._loading is not None:
            await asyncio.shield(self._loading)

    def _coordinator_logs(self, topic: str, configured: int, segment_bytes_setting: str) -> list[Log]:
        """A coordinator topic's partition logs.  As in Kafka, the partition count is fixed once
        the topic exists: the key -> partition hash depends on it (``odradek import``
        re-partitions the offsets topic deliberately)."""
        n = configured
        existing = sorted(p for t, p in self.logs.logs() if t == topic)
        if existing and len(existing) != n:
            log.warning("config.coordinator_partitions_fixed", topic=topic, configured=n, existing=len(existing))
            n = len(existing)
        config = self.logs.config_for(topic).with_topic_config({"segment.bytes": self.config[segment_bytes_setting]})
        return [self.logs.create(topic, p, config) for p in range(n)]

    def reopen_coordinators(self) -> None:
        """Fresh coordinators on the offsets and transaction topics' current logs (a reset's switch):
        Loading until ``load()``; the old transaction coordinator forgets its ids first."""
        if self.share_coordinator is not None:  # share-partition states, live ones and sessions too
            self.share_coordinator.unload()
            self.share_coordinator = self._open_share_coordinator()
            self.share_partitions.clear()
            self.share_sessions.clear()
        self.coordinator = self._open_coordinator()  # share groups go with it (records 10-15)
        if self.txn_coordinator is not None:  # transactional ids go too (their markers stop)
            self.txn_coordinator.unload()
            self.txn_coordinator = self._open_txn_coordinator()

    def _open_coordinator(self) -> Coordinator:
        logs = self._coordinator_logs(OFFSETS_TOPIC, self.coordinator_config.num_partitions,
                                      "offsets.topic.segment.bytes")
        self.coordinator_config = dataclasses.replace(self.coordinator_config, num_partitions=len(logs))
        coordinator = Coordinator(self.clock, self.coordinator_config, logs, runtime=self.runtime,
                                  await_fsync=logs[0].config.fsync is FsyncMode.ALWAYS)
        topics = coordinator.topics  # what consumer groups know of topics: the data plane's registry
        topics.lookup = self._topic_shape
        topics.names = self.topics.names
        topics.version = lambda: self.topics.version
        features = self.features
        coordinator.group_version = lambda: (features.level(GROUP_VERSION) if GROUP_VERSION in features.supported
                                             else None)
        coordinator.share_version = lambda: features.level(SHARE_VERSION)
        coordinator.group_configs = self.group_configs  # GROUP resources: session timeouts, intervals
        coordinator.share_persister = self.share_coordinator
        return coordinator

    def _topic_shape(self, name: str) -> tuple | None:
        """(topic id, partition count) of a topic consumer groups may subscribe to, else None."""
        topic = self.topics.get(name)
        return None if topic is None else (topic.topic_id, topic.partitions)

    def _open_txn_coordinator(self) -> TransactionCoordinator:
        logs = self._coordinator_logs(TRANSACTION_STATE_TOPIC, self.txn_config.num_partitions,
                                      "transaction.state.log.segment.bytes")
        self.txn_config = dataclasses.replace(self.txn_config, num_partitions=len(logs))
        groups = self.coordinator_config.num_partitions
        return TransactionCoordinator(self.clock, self.txn_config, logs, markers=self.marker_router,
                                      group_partition=lambda group: partition_for(group, groups),
                                      runtime=self.runtime,
                                      await_fsync=logs[0].config.fsync is FsyncMode.ALWAYS,
                                      offsets_topic=OFFSETS_TOPIC,
                                      transaction_version=lambda: self.features.level(TRANSACTION_VERSION))

    def _open_share_coordinator(self) -> ShareCoordinator:
        logs = self._coordinator_logs(SHARE_STATE_TOPIC, self.config["share.coordinator.state.topic.num.partitions"],
                                      "share.coordinator.state.topic.segment.bytes")
        return ShareCoordinator(self.clock, logs, runtime=self.runtime,
                                await_fsync=logs[0].config.fsync is FsyncMode.ALWAYS,
                                updates_per_snapshot=self.config["share.coordinator.snapshot.update.records.per.snapshot"])

    def _offsets_stable_offset(self, lg: Log) -> int | None:
        """The cleaner's bound on an internal topic: an offsets partition's last stable offset,
        kept by its shard, so pending transactional offsets are never compacted.  Other internal
        topics (``__transaction_state``) are not transactional: no bound."""
        coordinator = self.coordinator
        if lg.topic != OFFSETS_TOPIC or coordinator is None or not 0 <= lg.partition < len(coordinator.shards) \
                or coordinator.shards[lg.partition].log is not lg:
            return None
        return coordinator.stable_offset(lg.partition)

    async def _close_storage(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
            await asyncio.gather(self._loading, return_exceptions=True)
            self._loading = None
        if self.txn_coordinator is not None:
            await self.txn_coordinator.stop()
        await self.share_partitions.stop()
        if self.coordinator is not None:
            await self.coordinator.stop()
        await self.logs.close()

    async def stop(self, grace: float = 5.0) -> None:
        await self._stop_console()
        await self._stop_registry()
        if self.control_endpoint is not None:
            await self.control_endpoint.stop()
            self.control_endpoint = None
        await self.server.stop_accepting()
        await self.server.close_all(grace=min(grace, 0.5))
        await self.server.finish_orphans(grace)
        await self.topics.drain()  # a create or delete under way ends before the logs close
        self.dataplane.stop()
        self.metrics.close()
        await self._close_storage()
        if self._lock is not None:
            clear_bound(self.data_dir)
            self._lock.release()
            self._lock = None
        log.info("broker.stopped", node_id=self.node_id)

    def _advertised(self, listener: ServedListener, bound: tuple[str, int], node: int | None = None) -> Endpoint:
        """``advertised.listeners``' entry for the listener, else where it is bound (Kafka's
        ``ListenerInfo``): a wildcard or empty host becomes this machine's name, port 0 the bound port."""
        advertised = listener.spec.advertised
        host, port = (advertised.host, advertised.port) if advertised else (listener.spec.host, bound[1])
        if port == 0:
            port = bound[1]
        if host in WILDCARD_HOSTS:
            host = socket.getfqdn()
        return Endpoint(self.node_id if node is None else node, host, port)

    def endpoint_for(self, listener: str) -> Endpoint:
        """What a request that arrived on ``listener`` is told (Metadata, FindCoordinator)."""
        return self.endpoints.get(listener, self.endpoint)


def served_apis(config: Config) -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} a broker of ``config`` serves (the generated docs' tables read it)."""
    return {key: (lo, hi) for key, lo, hi in BrokerApp(config).handlers.served()}
