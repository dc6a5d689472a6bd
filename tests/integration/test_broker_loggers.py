"""BROKER_LOGGER resources: this broker's log levels read with DescribeConfigs and changed at run
time with IncrementalAlterConfigs, as Kafka answers (``RuntimeLoggerManager``), over TCP with raw
frames at every version and with kafka-python's admin client."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import structlog

from odradek.broker import logging_setup as logs
from odradek.broker.wire_client import SyncClient

pytestmark = pytest.mark.integration

BROKER_LOGGER = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INVALID_CONFIG, INVALID_REQUEST = 40, 42


@pytest.fixture(autouse=True)
def _restore_levels():
    yield
    logs.configure("text", "info")


def describe(b, name: str, version: int = 4, keys=None):
    body = {"resources": [{"resource_type": BROKER_LOGGER, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": True, "include_documentation": True}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(32, version, body).results[0]


def alter(b, name: str, ops, version: int = 1, validate_only: bool = False):
    body = {"resources": [{"resource_type": BROKER_LOGGER, "resource_name": name,
                           "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
            "validate_only": validate_only}
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(44, version, body).responses[0]


@pytest.mark.parametrize("version", range(0, 5))
def test_describe_lists_every_logger_with_its_level(broker, version):
    res = describe(broker, str(broker.app.node_id), version)
    assert res.error_code == 0
    levels = {c.name: c for c in res.configs}
    assert {"root", "odradek.storage", "odradek.coordinator"} <= set(levels)
    assert levels["root"].value == "INFO"
    entry = levels["odradek.storage"]
    assert (entry.read_only, entry.is_sensitive) == (False, False)
    if version >= 1:
        assert entry.config_source == 6  # DYNAMIC_BROKER_LOGGER_CONFIG
        assert list(entry.synonyms) == []
    if version >= 3:
        assert entry.documentation is None


def test_describe_refuses_a_name_that_is_not_this_node(broker):
    for name, message in [("", "Broker id must not be empty"), ("x", "must be an integer"),
                          (str(broker.app.node_id + 1), "Unexpected broker id")]:
        res = describe(broker, name)
        assert (res.error_code, list(res.configs)) == (INVALID_REQUEST, []), name
        assert message in res.error_message


@pytest.mark.parametrize("version", [0, 1])
def test_set_then_delete_changes_the_live_level(broker, version):
    node = str(broker.app.node_id)
    out = io.StringIO()
    logs.configure("json", "info", stream=out)
    assert alter(broker, node, [("odradek.storage", SET, "DEBUG")], version).error_code == 0
    structlog.get_logger("odradek.storage").debug("probe.visible")
    structlog.get_logger("odradek.topics").debug("probe.hidden")
    assert {c.name: c.value for c in describe(broker, node).configs}["odradek.storage"] == "DEBUG"
    assert alter(broker, node, [("odradek.storage", DELETE, None)], version).error_code == 0
    structlog.get_logger("odradek.storage").debug("probe.gone")
    events = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert "probe.visible" in events and "probe.hidden" not in events and "probe.gone" not in events
    assert {c.name: c.value for c in describe(broker, node).configs}["odradek.storage"] == "INFO"


def test_root_level_and_trace(broker):
    node = str(broker.app.node_id)
    assert alter(broker, node, [("root", SET, "ERROR"), ("odradek.txn", SET, "TRACE")]).error_code == 0
    levels = {c.name: c.value for c in describe(broker, node).configs}
    assert (levels["root"], levels["odradek.storage"], levels["odradek.txn"]) == ("ERROR", "ERROR", "TRACE")


def test_validate_only_changes_nothing(broker):
    node = str(broker.app.node_id)
    assert alter(broker, node, [("root", SET, "WARN")], validate_only=True).error_code == 0
    assert {c.name: c.value for c in describe(broker, node).configs}["root"] == "INFO"


@pytest.mark.parametrize(("ops", "code", "message"), [
    ([("odradek.nope", SET, "DEBUG")], INVALID_CONFIG, "Logger odradek.nope does not exist!"),
    ([("odradek.storage", SET, "debug")], INVALID_CONFIG, "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
    ([("odradek.storage", SET, "ALL")], INVALID_CONFIG, "not a supported log level"),
    ([("root", DELETE, None)], INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
    ([("root", APPEND, "DEBUG")], INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER"),
    ([("root", SUBTRACT, "DEBUG")], INVALID_REQUEST, "SUBTRACT operation is not allowed"),
    ([("root", SET, None)], INVALID_REQUEST, "Null value not supported"),
    ([("root", 9, "DEBUG")], INVALID_REQUEST, "Unknown operation"),
    ([("root", SET, "DEBUG"), ("root", SET, "INFO")], INVALID_REQUEST, "duplicate config keys"),
])
def test_bad_changes_get_kafkas_errors_and_change_nothing(broker, ops, code, message):
    node = str(broker.app.node_id)
    res = alter(broker, node, [("odradek.server", SET, "DEBUG"), *ops])
    assert res.error_code == code and message in res.error_message
    assert {c.name: c.value for c in describe(broker, node).configs}["odradek.server"] == "INFO"


def test_alter_refuses_another_node_and_legacy_alter_configs(broker):
    res = alter(broker, "x", [("root", SET, "DEBUG")])
    assert res.error_code == INVALID_REQUEST and "Node id must be an integer" in res.error_message
    res = alter(broker, str(broker.app.node_id + 1), [("root", SET, "DEBUG")])
    assert res.error_code == INVALID_REQUEST and "Unexpected node id" in res.error_message
    body = {"resources": [{"resource_type": BROKER_LOGGER, "resource_name": str(broker.app.node_id),
                           "configs": [{"name": "root", "value": "DEBUG"}]}], "validate_only": False}
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        res = c.request(33, 2, body).responses[0]
    assert res.error_code == INVALID_REQUEST and "Unknown resource type 8" in res.error_message


def test_kafka_python_admin_reads_and_sets_levels(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        node = str(broker.app.node_id)
        res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, node)])
        assert "odradek.coordinator" in str(res)
        res = admin.alter_configs(
            [ConfigResource(ConfigResourceType.BROKER_LOGGER, node, configs={"odradek.coordinator": "DEBUG"})],
            incremental=True)
        assert logs.logger_level("odradek.coordinator") == 10, res
    finally:
        admin.close()


def test_every_component_the_package_logs_under_is_listed():
    src = Path(logs.__file__).parents[1]
    used = set()
    for path in src.rglob("*.py"):
        used |= set(re.findall(r'get_logger\("odradek\.(\w+)"\)', path.read_text()))
    used.add("authorizer")  # acls.AUDIT_COMPONENT
    assert used == set(logs.COMPONENTS)
