"""The arithmetic of AlterConfigs / IncrementalAlterConfigs (Kafka's ConfigAdminManager and
ConfigurationControlManager rules), and the dynamic broker config store."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from odradek.broker.config import Config
from odradek.broker.config_ops import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    ConfigOpError,
    Op,
    apply_ops,
    check_shape,
    duplicate_resources,
)
from odradek.broker.dataplane.topic_configs import ConfigSource
from odradek.broker.dynamic_config import FILE, DynamicBrokerConfig, DynamicConfigError
from odradek.protocol.errors import ErrorCode as E


def topic_apply(current, ops, legacy=False):
    return apply_ops(current, ops, legacy=legacy, is_list=lambda n: n == "cleanup.policy",
                     start=lambda n: "delete", not_list=E.INVALID_CONFIG, dedupe=True)


def test_incremental_set_delete_append_subtract():
    cur = {"retention.ms": "1000", "segment.ms": "5"}
    assert topic_apply(cur, [Op("retention.ms", SET, "2000"), Op("segment.ms", DELETE, None)]) == {
        "retention.ms": "2000"}
    # APPEND starts from the inherited value and adds only what is missing
    assert topic_apply({}, [Op("cleanup.policy", APPEND, "compact,delete")]) == {"cleanup.policy": "delete,compact"}
    assert topic_apply({"cleanup.policy": "compact,delete"}, [Op("cleanup.policy", SUBTRACT, "delete")]) == {
        "cleanup.policy": "compact"}
    assert topic_apply(cur, [Op("nothing.here", DELETE, None)]) == cur  # deleting an absent key is fine
    assert cur == {"retention.ms": "1000", "segment.ms": "5"}  # never modified in place


def test_legacy_replaces_the_whole_set():
    assert topic_apply({"retention.ms": "1", "segment.ms": "2"}, [Op("segment.bytes", SET, "1024")],
                       legacy=True) == {"segment.bytes": "1024"}


def test_append_to_a_non_list_is_refused_with_the_side_specific_code():
    with pytest.raises(ConfigOpError) as exc:
        topic_apply({}, [Op("retention.ms", APPEND, "5")])
    assert exc.value.code == E.INVALID_CONFIG and "not LIST" in exc.value.message
    with pytest.raises(ConfigOpError) as exc:
        apply_ops({}, [Op("log.retention.ms", SUBTRACT, "5")], legacy=False, is_list=lambda n: False,
                  start=lambda n: None, not_list=E.INVALID_REQUEST, dedupe=False)
    assert exc.value.code == E.INVALID_REQUEST


@pytest.mark.parametrize("ops, message", [
    ([Op("a", SET, "1"), Op("a", SET, "2")], "duplicate config keys"),
    ([Op("a", SET, None)], "Null value not supported for : a"),
    ([Op("a", APPEND, None)], "Null value"),
    ([Op("a", 9, "1")], "Unknown operations type 9"),
])
def test_request_shape_errors_are_invalid_request(ops, message):
    with pytest.raises(ConfigOpError) as exc:
        check_shape(ops)
    assert exc.value.code == E.INVALID_REQUEST and message in exc.value.message


def test_null_value_is_fine_for_delete_and_duplicate_resources_are_found():
    check_shape([Op("a", DELETE, None)])
    rs = [SimpleNamespace(resource_type=2, resource_name=n) for n in ("t", "u", "t")]
    assert duplicate_resources(rs) == {(2, "t")}


def config(**overrides):
    return Config.load(None, overrides={k.replace("_", "."): v for k, v in overrides.items()}, environ={})


def test_dynamic_broker_layers_and_persistence(tmp_path):
    dyn = DynamicBrokerConfig(config(log_retention_hours="10"), tmp_path)
    assert dyn.log_defaults().retention_ms == 10 * 3600_000

    async def change():
        await dyn.change(False, lambda cur: {**cur, "log.retention.ms": "60000"})
        await dyn.change(True, lambda cur: {**cur, "log.segment.bytes": "4096"})
    asyncio.run(change())
    cfg = dyn.log_defaults()
    assert (cfg.retention_ms, cfg.segment_bytes) == (60000, 4096)
    assert dyn.synonyms("log.retention.ms") == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "10", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    data = json.loads((tmp_path / FILE).read_text())
    assert data["brokers"]["1"] == {"log.segment.bytes": "4096"} and data["default"] == {"log.retention.ms": "60000"}
    again = DynamicBrokerConfig(config(log_retention_hours="10"), tmp_path)
    again.load()
    assert (again.node, again.default) == (dyn.node, dyn.default)


@pytest.mark.parametrize("key, value", [("node.id", "3"), ("listeners", "PLAINTEXT://:1"),
                                        ("no.such.setting", "1"), ("log.retention.ms", "soon"),
                                        ("log.segment.bytes", "3"), ("log.cleanup.policy", "shred")])
def test_dynamic_broker_refusals_change_nothing(tmp_path, key, value):
    dyn = DynamicBrokerConfig(config(), tmp_path)
    with pytest.raises(DynamicConfigError):
        asyncio.run(dyn.change(True, lambda cur: {**cur, key: value}))
    assert dyn.node == {} and not (tmp_path / FILE).exists()


def test_validate_only_stores_nothing(tmp_path):
    dyn = DynamicBrokerConfig(config(), tmp_path)
    cfg = asyncio.run(dyn.change(True, lambda cur: {"log.retention.bytes": "77"}, validate_only=True))
    assert cfg.retention_bytes == 77 and dyn.node == {} and not (tmp_path / FILE).exists()
