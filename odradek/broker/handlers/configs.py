"""DescribeConfigs (v0-v4): topic and broker settings in force, with where they come from.

Topic configs: an override is DYNAMIC_TOPIC_CONFIG; otherwise the broker
setting it falls back to is STATIC_BROKER_CONFIG when set explicitly
(server.properties, environment, --override) and DEFAULT_CONFIG otherwise.
Broker settings are read-only (there is no AlterConfigs); topic configs are
reported alterable, as Kafka does, since CreateTopics sets them.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..config import SETTINGS
from ..dataplane import topic_configs
from ..dataplane.topic_configs import ConfigEntry, ConfigSource, ConfigType
from ..dataplane.topics import OFFSETS_TOPIC, TopicError
from ..dispatch import HandlerTable, RequestContext
from .topics import broker_values

if TYPE_CHECKING:
    from ..app import BrokerApp

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8

_SETTING_TYPES = {"int": ConfigType.INT, "boolean": ConfigType.BOOLEAN, "double": ConfigType.DOUBLE,
                  "optional int": ConfigType.LONG}


def register(table: HandlerTable, app: BrokerApp) -> None:
    table.register(32, partial(describe_configs, app))


def describe_configs(app: BrokerApp, ctx: RequestContext, req) -> dict:
    results = []
    for r in req.resources:
        try:
            entries = _entries(app, r.resource_type, r.resource_name)
            error, message = ErrorCode.NONE, None
        except TopicError as exc:
            entries, error, message = [], exc.code, exc.message
        wanted = None if r.configuration_keys is None else set(r.configuration_keys)
        configs = [_config(ctx.api_version, e, req, read_only=r.resource_type == BROKER)
                   for e in entries if wanted is None or e.name in wanted]
        results.append({"error_code": error, "error_message": message, "resource_type": r.resource_type,
                        "resource_name": r.resource_name, "configs": configs})
    return {"throttle_time_ms": 0, "results": results}


def _entries(app: BrokerApp, resource_type: int, name: str) -> list[ConfigEntry]:
    if resource_type == TOPIC:
        return _topic_entries(app, name)
    if resource_type == BROKER:
        if name == "":
            return []  # cluster-wide dynamic defaults: there are none
        if name != str(app.node_id):
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"unexpected broker id {name!r}: this is broker {app.node_id}")
        return _broker_entries(app)
    raise TopicError(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported")


def _topic_entries(app: BrokerApp, name: str) -> list[ConfigEntry]:
    app.topics.check_name(name)
    topic = app.topics.get(name)
    if topic is not None:
        overrides = topic.configs
    elif name == OFFSETS_TOPIC and app.topics.partition_count(name):
        cfg = app.logs.config_for(OFFSETS_TOPIC)
        overrides = {"cleanup.policy": "compact", "segment.bytes": str(cfg.segment_bytes)}
    else:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return topic_configs.describe(overrides, app.log_config, broker_values(app))


def _broker_entries(app: BrokerApp) -> list[ConfigEntry]:
    values = broker_values(app)
    out = []
    for s in SETTINGS:
        value, explicit = values[s.name]
        source = ConfigSource.STATIC_BROKER_CONFIG if explicit else ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(s.name, value, source, _SETTING_TYPES.get(s.type_name, ConfigType.STRING),
                               s.doc, ((s.name, value, source),)))
    return out


def _config(version: int, e: ConfigEntry, req, *, read_only: bool) -> dict:
    synonyms = ([{"name": n, "value": v, "source": src} for n, v, src in e.synonyms]
                if version >= 1 and req.include_synonyms else [])
    return {"name": e.name, "value": e.value, "read_only": read_only,
            "is_default": e.source is ConfigSource.DEFAULT_CONFIG, "config_source": e.source,
            "is_sensitive": False, "synonyms": synonyms, "config_type": e.type,
            "documentation": e.doc if version >= 3 and req.include_documentation else None}
