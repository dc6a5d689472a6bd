"""Settings: Kafka names, four sources in priority order, errors that name the setting."""

from __future__ import annotations

import pytest

from odradek.broker.config import SETTINGS, Config, ConfigError, env_to_name, parse_listeners


def test_defaults_are_a_local_dev_broker():
    c = Config.load(None, environ={})
    assert [str(x) for x in c.listeners] == ["PLAINTEXT://127.0.0.1:9092"]
    assert c["node.id"] == 1
    assert c["socket.request.max.bytes"] == 104857600
    assert all(src == "default" for src in c.sources.values())


def test_env_names_follow_the_official_image_convention():
    assert env_to_name("KAFKA_OFFSETS_RETENTION_MINUTES") == "offsets.retention.minutes"
    assert env_to_name("KAFKA_LOG_DIRS") == "log.dirs"
    assert env_to_name("KAFKA_SOME__UNDERSCORE") == "some_underscore"
    assert env_to_name("KAFKA_SOME___DASH") == "some-dash"
    assert env_to_name("PATH") is None


def test_priority_file_then_env_then_override(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# comment\nnode.id=5\nlog.dirs = /tmp/a\nsocket.request.max.bytes: 1000\n"
                     "zookeeper.connect=localhost:2181\n")
    c = Config.load(props, overrides=["log.dirs=/tmp/c"],
                    environ={"KAFKA_NODE_ID": "6", "KAFKA_LOG_DIRS": "/tmp/b", "KAFKA_HEAP_OPTS": "x"})
    assert c["node.id"] == 6 and c.sources["node.id"] == "env"
    assert c["log.dirs"] == "/tmp/c" and c.sources["log.dirs"] == "override"
    assert c["socket.request.max.bytes"] == 1000 and c.sources["socket.request.max.bytes"].startswith("file:")
    assert c.unknown == {"zookeeper.connect": f"file:{props}"}


@pytest.mark.parametrize("name, value", [
    ("node.id", "abc"), ("node.id", "-3"), ("socket.request.max.bytes", "0"),
    ("listeners", "127.0.0.1:9092"), ("listeners", "PLAINTEXT://host"), ("log.format", "xml"),
    ("log.dirs", " , "),
])
def test_invalid_values_name_the_setting(name, value):
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        Config.load(None, overrides={name: value}, environ={})


def test_override_must_be_key_value():
    with pytest.raises(ConfigError, match="key=value"):
        Config.load(None, overrides=["nonsense"], environ={})


def test_listener_parsing():
    ls = parse_listeners("PLAINTEXT://:9092,internal://[::1]:9093")
    assert [(x.name, x.host, x.port) for x in ls] == [("PLAINTEXT", "", 9092), ("INTERNAL", "::1", 9093)]


def test_every_setting_documents_itself():
    for s in SETTINGS:
        assert s.doc and s.type_name
        assert s.convert(s.default) == s.default
