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
passed with the ini option ``kafka_broker_overrides`` (``key=value`` lines).
The broker runs in a background thread on 127.0.0.1 with an ephemeral port
and a temporary data directory, so it serves synchronous and asyncio clients
alike.
"""

from __future__ import annotations

import pytest

from .handle import BrokerHandle


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("odradek", "in-process Kafka-protocol broker")
    group.addoption("--kafka-broker-scope", default=None,
                    help="scope of the kafka_broker fixture (session, module, function)")
    parser.addini("kafka_broker_scope", "scope of the kafka_broker fixture", default="session")
    parser.addini("kafka_broker_overrides", "broker settings, one key=value per line",
                  type="linelist", default=[])


def _scope(fixture_name: str, config: pytest.Config) -> str:
    return config.getoption("--kafka-broker-scope") or config.getini("kafka_broker_scope")


def _overrides(config: pytest.Config) -> dict[str, str]:
    out = {}
    for line in config.getini("kafka_broker_overrides"):
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"kafka_broker_overrides: {line!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope=_scope)
def kafka_broker(request: pytest.FixtureRequest):
    """A running broker; ``.bootstrap_servers``, ``.create_topic()``, ``.restart()``."""
    with BrokerHandle(overrides=_overrides(request.config)) as handle:
        yield handle


@pytest.fixture
def clean_kafka_broker(kafka_broker):
    """The shared ``kafka_broker``, reset to empty before the test (milliseconds, not a new broker)."""
    kafka_broker.reset()
    return kafka_broker


@pytest.fixture
def fresh_kafka_broker(request: pytest.FixtureRequest):
    """A broker of the test's own, with an empty data directory."""
    with BrokerHandle(overrides=_overrides(request.config)) as handle:
        yield handle
