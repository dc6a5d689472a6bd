"""pytest plugin (entry point ``pytest11``): a real broker for your tests.

    def test_roundtrip(kafka_broker):
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)

``kafka_broker`` is session-scoped by default (one broker for the run; each
test should use its own topic and group names); choose another scope with
``--kafka-broker-scope=function`` or the ini option ``kafka_broker_scope``.
``fresh_kafka_broker`` is always function-scoped; ``clean_kafka_broker`` is
the shared broker reset to empty (``reset()``) before the test.  Under
pytest-xdist each worker is its own process with its own session, so it gets
a broker of its own: tests in different workers never share one.  Broker settings can be
passed with the ini option ``kafka_broker_overrides`` (``key=value`` lines); one test gives
its own fresh broker settings with a marker, over the ini's::

    @pytest.mark.kafka_broker_overrides({"offsets.retention.minutes": 1})
    def test_offsets_expire(fresh_kafka_broker): ...

(the marker sets up ``fresh_kafka_broker``, and ``kafka_broker`` when it is function-scoped;
a session-scoped broker is shared and cannot take one test's settings).
``--kafka-broker-port=N`` (ini ``kafka_broker_port``) fixes ``kafka_broker``'s port
(listener and advertised; each xdist worker adds its number).  The brokers log
to Python's ``logging`` at warning and above (``log.level`` in the overrides).
The broker runs in a background thread on 127.0.0.1 with an ephemeral port
and a temporary data directory, so it serves synchronous and asyncio clients
alike.

Schema registry: ``--kafka-broker-schema-registry`` (or the ini option
``kafka_broker_schema_registry = true``) serves Confluent's Schema Registry API beside the
fixture brokers; ``kafka_broker.schema_registry_url`` is its URL (off by default).  The web
console likewise: ``--kafka-broker-console`` (ini ``kafka_broker_console = true``),
``kafka_broker.console_url``.

Security: ``--kafka-broker-security=SASL_SSL`` (or the ini option
``kafka_broker_security``; also SSL, SASL_PLAINTEXT) serves that protocol with
a throw-away CA and a PLAIN user; ``kafka_broker.client`` holds the client
settings (``.kafka_python()``, ``.aiokafka()``, ``.confluent()``).  One test can
ask for its own with ``@pytest.mark.parametrize("fresh_kafka_broker",
["SASL_SSL"], indirect=True)`` (a protocol name or a dict of
``odradek.testing.security.make_security`` options).
"""

from __future__ import annotations

import pytest

from .handle import BrokerHandle

# the HTTP surfaces a fixture broker serves when asked: BrokerHandle's keyword -> what it is
SURFACES = {"schema_registry": "the schema registry", "console": "the web console"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("odradek", "in-process Kafka-protocol broker")
    group.addoption("--kafka-broker-scope", default=None,
                    help="scope of the kafka_broker fixture (session, module, function)")
    parser.addini("kafka_broker_scope", "scope of the kafka_broker fixture", default="session")
    parser.addini("kafka_broker_overrides", "broker settings, one key=value per line",
                  type="linelist", default=[])
    group.addoption("--kafka-broker-security", default=None,
                    help="serve the fixture brokers over SSL, SASL_SSL or SASL_PLAINTEXT (throw-away CA, PLAIN user)")
    parser.addini("kafka_broker_security", "SSL, SASL_SSL or SASL_PLAINTEXT (default PLAINTEXT)", default="")
    for name, what in SURFACES.items():
        group.addoption(f"--kafka-broker-{name.replace('_', '-')}", action="store_true", default=None,
                        help=f"serve {what} beside the fixture brokers ({name}_url)")
        parser.addini(f"kafka_broker_{name}", f"serve {what} beside the fixture brokers", type="bool",
                      default=False)
    group.addoption("--kafka-broker-port", default=None,
                    help="port of the kafka_broker fixture (default: a free one); under xdist, plus the worker number")
    parser.addini("kafka_broker_port", "port of the kafka_broker fixture (default: a free one)", default="")
    group.addoption("--kafka-brokers", default=None,
                    help="emulate a cluster of N brokers in each fixture broker (docs/CLUSTER.md); default 1")
    parser.addini("kafka_brokers", "brokers per fixture broker (a cluster: docs/CLUSTER.md)", default="")
    group.addoption("--kafka-group-protocol", default=None, choices=("classic", "consumer"),
                    help="the group protocol the fixture brokers offer: consumer (Kafka 4's default: "
                         "KIP-848 and classic) or classic only")
    parser.addini("kafka_group_protocol", "consumer (default) or classic: see --kafka-group-protocol", default="")


MARKER = "kafka_broker_overrides"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(settings): broker settings (Kafka names) for this "
                            "test's fresh_kafka_broker, over the ini option's")


def _scope(fixture_name: str, config: pytest.Config) -> str:
    return config.getoption("--kafka-broker-scope") or config.getini("kafka_broker_scope")


def _overrides(config: pytest.Config) -> dict[str, str]:
    out = {}
    protocol = config.getoption("--kafka-group-protocol") or config.getini("kafka_group_protocol")
    if protocol:
        if protocol not in ("classic", "consumer"):
            raise pytest.UsageError(f"kafka_group_protocol: {protocol!r} is not classic or consumer")
        out["group.coordinator.rebalance.protocols"] = "classic" if protocol == "classic" else "classic,consumer"
    brokers = str(config.getoption("--kafka-brokers") or config.getini("kafka_brokers") or "").strip()
    if brokers:
        if not brokers.isdigit() or int(brokers) < 1:
            raise pytest.UsageError(f"kafka_brokers: {brokers!r} is not a number of brokers")
        out["odradek.brokers"] = brokers
    for line in config.getini("kafka_broker_overrides"):
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"kafka_broker_overrides: {line!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def _marked_overrides(request: pytest.FixtureRequest) -> dict[str, str]:
    """The settings of the test's ``kafka_broker_overrides`` markers (a dict, or keywords with
    ``_`` for ``.``), the closest marker last so it wins."""
    out: dict[str, str] = {}
    for mark in reversed(list(request.node.iter_markers(MARKER))):
        for arg in mark.args:
            if not isinstance(arg, dict):
                raise pytest.UsageError(f"{MARKER} takes a dict of settings, not {arg!r}")
            out.update({str(k): str(v) for k, v in arg.items()})
        out.update({k.replace("_", "."): str(v) for k, v in mark.kwargs.items()})
    return out


def _test_overrides(request: pytest.FixtureRequest) -> dict[str, str]:
    return {**_overrides(request.config), **_marked_overrides(request)}


def _port(config: pytest.Config) -> int:
    """The fixed port asked for, else 0 (a free one); each xdist worker adds its number (gw3: +3)
    so that workers' brokers do not collide."""
    value = str(config.getoption("--kafka-broker-port") or config.getini("kafka_broker_port") or "0").strip()
    if not value.isdigit() or not 0 <= int(value) < 65536:
        raise pytest.UsageError(f"kafka_broker_port: {value!r} is not a port")
    # this session's own worker id (an env variable would leak into pytester's subprocesses)
    worker = getattr(config, "workerinput", {}).get("workerid", "gw0").removeprefix("gw")
    return int(value) + int(worker) if int(value) and worker.isdigit() else int(value)


def _surfaces(config: pytest.Config) -> dict[str, bool]:
    """BrokerHandle's keywords for the HTTP surfaces the options ask for."""
    return {name: bool(config.getoption(f"--kafka-broker-{name.replace('_', '-')}")
                       or config.getini(f"kafka_broker_{name}")) for name in SURFACES}


def _security(config: pytest.Config):
    value = config.getoption("--kafka-broker-security") or config.getini("kafka_broker_security")
    return None if not value or value.upper() == "PLAINTEXT" else value


@pytest.fixture(scope=_scope)
def kafka_broker(request: pytest.FixtureRequest):
    """A running broker; ``.bootstrap_servers``, ``.client``, ``.create_topic()``, ``.restart()``."""
    overrides = _test_overrides(request) if request.scope == "function" else _overrides(request.config)
    with BrokerHandle(overrides=overrides, security=_security(request.config),
                      port=_port(request.config), **_surfaces(request.config)) as handle:
        yield handle


@pytest.fixture
def clean_kafka_broker(kafka_broker):
    """The shared ``kafka_broker``, reset to empty before the test (milliseconds, not a new broker)."""
    kafka_broker.reset()
    return kafka_broker


@pytest.fixture
def fresh_kafka_broker(request: pytest.FixtureRequest):
    """A broker of the test's own, with an empty data directory (its settings: the ini option's
    and the test's ``kafka_broker_overrides`` marker; its security: an indirect parameter, else
    the session's)."""
    security = getattr(request, "param", None) or _security(request.config)
    with BrokerHandle(overrides=_test_overrides(request), security=security,
                      **_surfaces(request.config)) as handle:
        yield handle
