"""What the pytest fixture yields: a thread-backed broker plus conveniences."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..broker.wire_client import SyncClient
from .broker import Security, ThreadedBroker
from .control import ControlApi
from .security import ClientSecurity

CREATE_TOPICS = 19
CREATE_TOPICS_VERSION = 5


class TopicError(RuntimeError):
    pass


class BrokerHandle(ControlApi):
    """The fixture's broker: ``bootstrap_servers``, ``create_topic``, ``restart`` and test control
    (``fault``, ``coordinator_unavailable``, ``broker_down``, ``captured``; see ``control.py``)."""

    def __init__(self, data_dir: str | Path | None = None,
                 overrides: Mapping[str, Any] | None = None, security: Security = None, port: int = 0,
                 schema_registry: bool = False, console: bool = False, brokers: int = 1):
        """``brokers``: a cluster of that many brokers in the one process (docs/CLUSTER.md); ``port``: listen (and advertise) on this port instead of a free one; ``schema_registry``:
        serve the schema registry too (``schema_registry_url``); ``console``: serve the web console
        on a free loopback port too (``console_url``)."""
        self._broker = ThreadedBroker(data_dir=data_dir, port=port, overrides=overrides, security=security,
                                      schema_registry=schema_registry, console=console, brokers=brokers)

    @property
    def bootstrap_servers(self) -> str:
        return self._broker.bootstrap_servers

    @property
    def client(self) -> ClientSecurity:
        """How a client connects: ``client.kafka_python()``, ``.aiokafka()``, ``.confluent()``."""
        return self._broker.client

    @property
    def group_protocol(self) -> str:
        """What a consumer's ``group.protocol`` should be here: ``consumer`` when the broker serves
        KIP-848 groups (``--kafka-group-protocol``, ``group.coordinator.rebalance.protocols``), else
        ``classic``."""
        return "consumer" if self._broker.call(lambda: self._broker.app.coordinator.consumer_protocol_enabled()) \
            else "classic"

    @property
    def schema_registry_url(self) -> str:
        """The schema registry's URL (``BrokerHandle(schema_registry=True)``), for
        ``SchemaRegistryClient({"url": ...})``."""
        return self._broker.schema_registry_url

    @property
    def host(self) -> str:
        return self.bootstrap_servers.split(",")[0].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])

    @property
    def data_dir(self) -> Path:
        return self._broker.data_dir

    @property
    def console_url(self) -> str | None:
        """The web console's ``http://127.0.0.1:PORT/`` (``console=True``, or the setting
        ``odradek.console.listener``), else None."""
        return self._broker.console_url

    @property
    def app(self):
        """The running BrokerApp (inspect it only through ``call``: it lives on another thread)."""
        return self._broker.app

    def call(self, fn, *args):
        return self._broker.call(fn, *args)

    def control(self, name: str, **kwargs: Any) -> Any:
        return self._broker.control(name, **kwargs)

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, str] | None = None, replication_factor: int = -1) -> None:
        """Create a topic through the real CreateTopics API; an existing one is an error."""
        body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication_factor,
                            "assignments": [],
                            "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()]}],
                "timeout_ms": 30000, "validate_only": False}
        with SyncClient(self.host, self.port, **self.client.wire()) as client:
            response = client.request(CREATE_TOPICS, CREATE_TOPICS_VERSION, body)
        result = response.topics[0]
        if result.error_code != 0:
            raise TopicError(f"CreateTopics {name!r}: error {result.error_code} {result.error_message}")

    def restart(self) -> None:
        """Stop and start again on the same port with the same data (a broker 'crash-free' restart)."""
        self._broker.restart()

    def wait_loaded(self) -> None:
        """Until the group and transaction state is rebuilt from the log (see ``ThreadedBroker.wait_loaded``)."""
        self._broker.wait_loaded()

    def start(self) -> BrokerHandle:
        self._broker.start()
        return self

    def close(self) -> None:
        self._broker.close()

    def __enter__(self) -> BrokerHandle:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
