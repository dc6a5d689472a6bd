"""Log output: JSON or key=value, and levels per component."""

from __future__ import annotations

import io
import json

import pytest
import structlog

from odradek.broker import logging_setup as logs


@pytest.fixture(autouse=True)
def _restore():
    yield
    logs.configure("text", "info")


def test_component_levels_override_the_global_level():
    out = io.StringIO()
    logs.configure("json", "info", stream=out, levels="coordinator=debug,server=warning")
    structlog.get_logger("odradek.coordinator").debug("group.detail", group="g")
    structlog.get_logger("odradek.server").info("connection.open")
    structlog.get_logger("odradek.server").warning("request.refused")
    structlog.get_logger("odradek.storage").debug("hidden")
    structlog.get_logger("odradek.storage").info("log.opened")
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["logger"], e["event"]) for e in events] == [
        ("coordinator", "group.detail"), ("server", "request.refused"), ("storage", "log.opened")]
    assert all("timestamp" in e and "level" in e for e in events)


def test_text_format_is_key_value():
    out = io.StringIO()
    logs.configure("text", "info", stream=out)
    structlog.get_logger("odradek.broker").info("broker.started", node_id=1)
    line = out.getvalue().strip()
    assert "event='broker.started'" in line and "node_id=1" in line


def test_bad_component_level_is_rejected():
    with pytest.raises(ValueError, match="component=level"):
        logs.parse_levels("coordinator=loud")
