"""ListConfigResources (key 74) over TCP: which resources each version lists, as
``KafkaApis.handleListConfigResources`` answers, with raw frames and kafka-python's admin."""

from __future__ import annotations

import pytest

from odradek.broker.wire_client import SyncClient

pytestmark = pytest.mark.integration

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
UNSUPPORTED_VERSION = 35


def request(b, api_key: int, version: int, body: dict):
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        return c.request(api_key, version, body)


def setup_resources(b) -> None:
    assert request(b, 19, 7, {"topics": [{"name": "t1", "num_partitions": 1, "replication_factor": -1,
                                          "assignments": [], "configs": []}],
                              "timeout_ms": 5000, "validate_only": False}).topics[0].error_code == 0
    body = {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": name, "configs": [
        {"name": "metrics", "config_operation": 0, "value": "*"}]} for name in ("cm-b", "cm-a")],
        "validate_only": False}
    assert [r.error_code for r in request(b, 44, 1, body).responses] == [0, 0]


def listed(b, version: int, types: list[int] | None = None):
    res = request(b, 74, version, {"resource_types": types or []})
    return res.error_code, [(r.resource_name, r.resource_type) for r in res.config_resources]


def test_v0_lists_only_client_metrics_resources(broker):
    setup_resources(broker)
    assert listed(broker, 0) == (0, [("cm-a", CLIENT_METRICS), ("cm-b", CLIENT_METRICS)])


def test_v1_lists_every_type_in_kafkas_order(broker):
    setup_resources(broker)
    node = str(broker.app.node_id)
    code, found = listed(broker, 1)
    assert code == 0
    assert found[:4] == [("cm-a", CLIENT_METRICS), ("cm-b", CLIENT_METRICS), (node, BROKER_LOGGER), (node, BROKER)]
    assert ("t1", TOPIC) in found[4:] and all(t == TOPIC for _n, t in found[4:])


@pytest.mark.parametrize(("types", "expected"), [
    ([BROKER], "broker"), ([BROKER_LOGGER, BROKER], "both"), ([GROUP], "none"), ([TOPIC], "topic")])
def test_v1_filters_by_type(broker, types, expected):
    setup_resources(broker)
    node = str(broker.app.node_id)
    want = {"broker": [(node, BROKER)], "both": [(node, BROKER_LOGGER), (node, BROKER)], "none": [],
            "topic": [("t1", TOPIC)]}[expected]
    code, found = listed(broker, 1, types)
    assert (code, [r for r in found if not r[0].startswith("__")]) == (0, want)  # internal topics too


@pytest.mark.parametrize("types", [[1], [TOPIC, 64], [-1], [0]])
def test_a_type_the_version_does_not_know_is_unsupported_version(broker, types):
    assert listed(broker, 1, types) == (UNSUPPORTED_VERSION, [])


def test_kafka_python_admin_lists_resources(broker):
    from kafka.admin import KafkaAdminClient

    setup_resources(broker)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        out = admin.list_config_resources()
        text = repr(out)
        assert "cm-a" in text and "t1" in text, out
        only = repr(admin.list_config_resources(["CLIENT_METRICS"]))
        assert "cm-b" in only and "t1" not in only
    finally:
        admin.close()
