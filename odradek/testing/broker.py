"""In-process brokers for tests.

``Broker`` is an async context manager for asyncio tests; ``ThreadedBroker``
runs the same broker on its own event loop in a background thread, for
synchronous clients (kafka-python, confluent-kafka) that would otherwise
block the loop the broker needs.  Both bind an ephemeral port on 127.0.0.1
and use a temporary data directory unless told otherwise, and both can
restart keeping their data.

Their events go to Python's ``logging`` (loggers ``odradek.<component>``) at
``warning`` and above unless ``log.level`` / ``log.levels`` say otherwise, so
a test's output is not a line per request; see ``logging_setup.configure_embedded``.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..broker import logging_setup
from ..broker.app import BrokerApp
from ..broker.config import Config, port_overrides
from ..broker.security.scram import SCRAM_MECHANISMS
from ..broker.security.scram_users import ScramUser, add_users, add_users_offline, check_iterations
from .control import ControlApi
from .security import ClientSecurity, make_security


async def add_scram_user(app: BrokerApp | None, data_dir: Path, name: str, password: str,
                         mechanism: str, iterations: int) -> None:
    """Into the running broker's store (under its lock), or into the data dir's file before start."""
    user = ScramUser(mechanism, name, password, check_iterations(iterations))
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; use one of {', '.join(SCRAM_MECHANISMS)}")
    if app is None:
        data_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(add_users_offline, data_dir, [user])
        return
    async with app.scram_credentials.lock:
        await asyncio.to_thread(add_users, app.scram_credentials, [user])


CAPTURE_REQUESTS = 1000  # test brokers keep the last 1000 requests for ``captured``
LOG_LEVEL = "warning"  # a test's output shows what went wrong, not every request (log.level overrides)


def _config(data_dir: Path, port: int, overrides: Mapping[str, Any], protocol: str = "PLAINTEXT",
            port_wins: bool = False) -> Config:
    """``port_wins``: the caller asked for this port, so it replaces the port of the first listener
    and of its advertised entry even where ``overrides`` name them (``odradek serve --port``).
    The web console is off unless ``overrides`` set ``odradek.console.listener``."""
    settings = {"listeners": f"{protocol}://127.0.0.1:{port}", "log.dirs": str(data_dir),
                "odradek.control.capture.requests": str(CAPTURE_REQUESTS), "log.level": LOG_LEVEL,
                "odradek.console.listener": ""}
    settings.update({k: str(v) for k, v in overrides.items()})
    config = Config.load(None, overrides=settings, environ={})
    if port_wins:
        config = Config.load(None, overrides={**settings, **port_overrides(config, port)}, environ={})
    return config


Security = str | Mapping[str, Any] | None


def _loopback(port: int | None) -> str:
    """An HTTP surface's listener setting: ``http://127.0.0.1:PORT`` (0: a free port), or off (None)."""
    return "" if port is None else f"http://127.0.0.1:{port}"


def _security_settings(security: Security, directory: Path) -> tuple[dict[str, str], ClientSecurity]:
    """``"SASL_SSL"`` or ``{"protocol": "SSL", "client_auth": "required", ...}`` (``make_security``'s
    keyword arguments) -> the broker's settings and the client's side."""
    if security is None:
        return {}, ClientSecurity()
    options = {"protocol": security} if isinstance(security, str) else dict(security)
    return make_security(options.pop("protocol"), directory, **options)


class Broker(ControlApi):
    """``async with Broker() as b: ... b.bootstrap_servers``

    The test-control methods (``fault``, ``captured``, ``broker_down`` ...)
    run at once on this loop; an operation that is a coroutine is returned
    for the caller to await.
    """

    def __init__(self, data_dir: str | Path | None = None, port: int = 0,
                 overrides: Mapping[str, Any] | None = None, security: Security = None,
                 schema_registry: bool = False, console: bool = False, brokers: int = 1):
        """``brokers``: emulate a cluster of that many brokers (``odradek.brokers``, docs/CLUSTER.md);
        ``bootstrap_servers`` then lists every one.  ``security``: ``"SSL"``, ``"SASL_SSL"`` or ``"SASL_PLAINTEXT"`` (or a dict of
        ``make_security`` options) serves that protocol with throw-away certificates and a PLAIN
        user; ``client`` then says how to connect (``client.kafka_python()``, ``.aiokafka()``,
        ``.confluent()``).  ``schema_registry``: serve the schema registry too, on a free port
        of 127.0.0.1 (``schema_registry_url``); off by default.  ``console``: serve the web
        console too (``console_url``); off by default."""
        self._registry_port: int | None = 0 if schema_registry else None
        self._console_port: int | None = 0 if console else None  # a restart keeps the console's port
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="odradek-"))
        self._security_dir: Path | None = None
        security_overrides: dict[str, str] = {}
        if security is not None:
            self._security_dir = Path(tempfile.mkdtemp(prefix="odradek-tls-"))
            security_overrides, self.client = _security_settings(security, self._security_dir)
        else:
            self.client = ClientSecurity()
        self._protocol = self.client.security_protocol
        self._scram_added = False
        security_overrides.pop("listeners", None)
        self.overrides = {**security_overrides, **(overrides or {})}
        if brokers != 1:
            self.overrides.setdefault("odradek.brokers", str(brokers))
        self._port = port
        self._port_given = port != 0
        self.app: BrokerApp | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the broker; of every broker of a cluster, comma-separated."""
        assert self.app is not None, "broker not started"
        cluster = self.app.cluster
        if cluster is None:
            return self.app.bootstrap_servers
        listener = self.app.listeners[0].name
        return ",".join(f"{ep.host}:{ep.port}" for node in cluster.nodes
                        if (ep := (cluster.endpoints.get(node) or {}).get(listener)) is not None)

    @property
    def port(self) -> int:
        assert self.app is not None, "broker not started"
        return self.app.endpoint.port

    @property
    def console_url(self) -> str | None:
        """``http://127.0.0.1:PORT/`` of the web console (``console=True``), None when it is off."""
        assert self.app is not None, "broker not started"
        return self.app.console_url

    @property
    def schema_registry_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the schema registry (``Broker(schema_registry=True)``)."""
        assert self.app is not None, "broker not started"
        if self.app.registry_url is None:
            raise RuntimeError("the schema registry is off: start the broker with schema_registry=True")
        return self.app.registry_url

    def control(self, name: str, **kwargs: Any) -> Any:
        """Call a ``BrokerControl`` operation by name (this is the broker's loop)."""
        assert self.app is not None, "broker not started"
        if name not in self.app.control.operations():
            raise AttributeError(f"no control operation {name!r}")
        return getattr(self.app.control, name)(**kwargs)

    async def start(self) -> None:
        if self.client.sasl and not self._scram_added:  # the SCRAM users, as `kafka-storage format --add-scram`
            for name, password in self.client.users.items():
                for mechanism in SCRAM_MECHANISMS:
                    await add_scram_user(None, self.data_dir, name, password, mechanism, 4096)
            self._scram_added = True
        overrides = {"odradek.schema.registry.listener": _loopback(self._registry_port),
                      "odradek.console.listener": _loopback(self._console_port), **self.overrides}
        config = _config(self.data_dir, self._port, overrides, self._protocol, port_wins=self._port_given)
        logging_setup.configure_embedded(config["log.level"], config["log.levels"])
        self.app = BrokerApp(config)
        await self.app.start()
        self._port = self.app.endpoint.port  # a restart comes back on the same port
        self._keep_cluster_ports()
        if self._registry_port is not None:
            try:
                await self.app.wait_registry()
            except BaseException:
                await self.stop()
                raise
            self._registry_port = self.app.registry_address[1]  # ... and so does the registry
        if self._console_port is not None and self.app.console_address is not None:
            self._console_port = self.app.console_address[1]  # ... and the console

    def _keep_cluster_ports(self) -> None:
        """A cluster's other brokers come back on their ports too (clients know them all)."""
        cluster = self.app.cluster
        if cluster is None or self.overrides.get("odradek.cluster.listeners"):
            return
        first = self.app.listeners
        self.overrides["odradek.cluster.listeners"] = "|".join(
            ",".join(f"{li.name}://{li.spec.host}:{cluster.endpoints[node][li.name].port}" for li in first)
            for node in cluster.nodes[1:])

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.stop()
            self.app = None

    async def restart(self) -> None:
        """Stop and start again on the same port and data directory."""
        await self.stop()
        await self.start()

    async def add_scram_user(self, name: str, password: str, mechanism: str = "SCRAM-SHA-256",
                             iterations: int = 4096) -> None:
        """Add (or replace) a SCRAM user, running or not; it survives restarts
        (what ``kafka-storage format --add-scram`` or kafka-configs would do)."""
        await add_scram_user(self.app, self.data_dir, name, password, mechanism, iterations)

    def cleanup(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if self._security_dir is not None:
            shutil.rmtree(self._security_dir, ignore_errors=True)

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()
        self.cleanup()


class ThreadedBroker(ControlApi):
    """The same broker on a private event loop in a daemon thread."""

    def __init__(self, data_dir: str | Path | None = None, port: int = 0,
                 overrides: Mapping[str, Any] | None = None, security: Security = None,
                 schema_registry: bool = False, console: bool = False, brokers: int = 1):
        self.broker = Broker(data_dir, port, overrides, security, schema_registry, console, brokers)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="odradek-broker",
                                        daemon=True)
        self._thread.start()

    def _call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's loop (for inspecting broker state safely)."""
        async def run():
            return fn(*args)
        return self._call(run())

    def control(self, name: str, **kwargs: Any) -> Any:
        """Call a ``BrokerControl`` operation by name on the broker's loop; its errors are raised here."""
        async def run():
            result = self.broker.control(name, **kwargs)
            return await result if inspect.isawaitable(result) else result
        return self._call(run())

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def client(self) -> ClientSecurity:
        """How a client connects (security protocol, CA file, client certificate, user)."""
        return self.broker.client

    @property
    def console_url(self) -> str | None:
        """See ``Broker.console_url``."""
        return self.broker.console_url

    @property
    def schema_registry_url(self) -> str:
        """See ``Broker.schema_registry_url``."""
        return self.broker.schema_registry_url

    @property
    def app(self) -> BrokerApp | None:
        return self.broker.app

    @property
    def data_dir(self) -> Path:
        return self.broker.data_dir

    def start(self) -> ThreadedBroker:
        self._call(self.broker.start())
        return self

    def stop(self) -> None:
        self._call(self.broker.stop())

    def restart(self) -> None:
        self._call(self.broker.restart())

    def wait_loaded(self) -> None:
        """Until the group and transaction state is rebuilt from the log.  A (re)started broker
        serves while it loads, as Kafka does (group requests get COORDINATOR_LOAD_IN_PROGRESS
        meanwhile), so a test that inspects a group right after ``restart`` waits for this first."""
        self._call(self.broker.app.wait_loaded())

    def add_scram_user(self, name: str, password: str, mechanism: str = "SCRAM-SHA-256",
                       iterations: int = 4096) -> None:
        """See ``Broker.add_scram_user``."""
        self._call(self.broker.add_scram_user(name, password, mechanism, iterations))

    def close(self) -> None:
        try:
            if self.broker.app is not None:
                self.stop()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
            self.broker.cleanup()

    def __enter__(self) -> ThreadedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
