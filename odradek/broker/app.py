"""A running broker: configuration, data directory, handlers and listeners wired together."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import structlog

from .clock import Clock, RealClock
from .config import Config, parse_listeners
from .datadir import DirLock, load_or_create_meta
from .dispatch import HandlerTable
from .handlers import cluster
from .server import KafkaServer

log = structlog.get_logger("odradek.broker")

_WILDCARDS = {"", "0.0.0.0", "::", "[::]"}


@dataclass(frozen=True)
class Endpoint:
    """What clients are told: this node's id, host and port."""

    node_id: int
    host: str
    port: int


class BrokerApp:
    def __init__(self, config: Config, clock: Clock | None = None):
        self.config = config
        self.clock = clock or RealClock()
        self.node_id: int = config["node.id"]
        self.data_dir: Path = config.data_dirs[0]
        self.handlers = HandlerTable()
        self.server = KafkaServer(self.handlers, config["socket.request.max.bytes"])
        self.cluster_id = ""
        self.endpoint = Endpoint(self.node_id, "", 0)
        self.bound: list[tuple[str, int]] = []
        self._lock: DirLock | None = None
        cluster.register(self.handlers, self)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.endpoint.host}:{self.endpoint.port}"

    async def start(self) -> None:
        for d in self.config.data_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self._lock = DirLock(self.data_dir)
        self._lock.acquire()
        try:
            self.cluster_id = load_or_create_meta(self.data_dir, self.node_id)
            for listener in self.config.listeners:
                self.bound.append(await self.server.listen(listener.host, listener.port))
            self.endpoint = self._advertised()
        except BaseException:
            await self.server.stop_accepting()
            self._lock.release()
            raise
        log.info("broker.started", node_id=self.node_id, cluster_id=self.cluster_id,
                 listeners=[f"{h}:{p}" for h, p in self.bound],
                 advertised=self.bootstrap_servers, data_dir=str(self.data_dir))

    async def stop(self, grace: float = 5.0) -> None:
        await self.server.stop_accepting()
        await self.server.close_all(grace=min(grace, 0.5))
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        log.info("broker.stopped", node_id=self.node_id)

    def _advertised(self) -> Endpoint:
        advertised = self.config["advertised.listeners"]
        if advertised:
            first = parse_listeners(advertised)[0]
            host, port = first.host, first.port
        else:
            host, port = self.config.listeners[0].host, self.bound[0][1]
        if host in _WILDCARDS:
            host = socket.getfqdn()
        return Endpoint(self.node_id, host, port)
