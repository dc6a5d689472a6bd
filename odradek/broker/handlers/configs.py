"""DescribeConfigs (v0-v4), AlterConfigs (v0-v2), IncrementalAlterConfigs (v0-v1).

Resources: topics, this broker and the cluster default, client-metrics
subscriptions, groups' configs (GROUP, ``coordinator/group_configs.py``), and this
broker's loggers (BROKER_LOGGER, ``runtime_loggers``).

Topic configs: an override is DYNAMIC_TOPIC_CONFIG; otherwise the broker
setting it falls back to reports its own source (this node's dynamic value,
the cluster-wide dynamic default, the static setting, the built-in default).
Topics' overrides and the broker's dynamic ``log.*`` defaults can be changed
at runtime; changes are stored durably before they take effect on the live
logs.  Checks and error codes follow Kafka's ``ConfigAdminManager`` (broker
side) and ``ControllerConfigurationValidator``/``ConfigurationControlManager``
(controller side).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from ...protocol.errors import ErrorCode
from .. import runtime_loggers
from ..client_metrics_config import DEFAULT_INTERVAL_MS, ClientMetricsConfigError
from ..client_metrics_config import KEYS as CLIENT_METRICS_KEYS
from ..client_metrics_config import LIST_KEYS as CLIENT_METRICS_LISTS
from ..config import SETTINGS
from ..config_ops import (
    BROKER,
    BROKER_LOGGER,
    CLIENT_METRICS,
    GROUP,
    TOPIC,
    ConfigOpError,
    Op,
    apply_ops,
    check_shape,
    duplicate_resources,
    ops_of,
)
from ..coordinator import group_configs
from ..coordinator.group_configs import GroupConfigError
from ..dataplane import topic_configs
from ..dataplane.topic_configs import TOPIC_CONFIGS, ConfigEntry, ConfigSource, ConfigType
from ..dataplane.topics import INTERNAL_TOPICS, OFFSETS_TOPIC, TopicError
from ..dispatch import HandlerTable, RequestContext
from ..dynamic_config import DYNAMIC_SETTINGS, LIST_SETTINGS, DynamicConfigError, setting_string

if TYPE_CHECKING:
    from ...storage.config import LogConfig
    from ...storage.log_manager import LogManager
    from ..client_metrics import ClientMetricsManager
    from ..coordinator.group_configs import GroupConfigs
    from ..dataplane import TopicRegistry
    from ..dynamic_config import DynamicBrokerConfig


class ConfigServices(Protocol):
    """What these handlers use of the broker (``BrokerApp`` wires it): topic configs, the broker's
    static and dynamic settings."""

    node_id: int
    topics: TopicRegistry
    logs: LogManager
    log_config: LogConfig
    dynamic_config: DynamicBrokerConfig
    client_metrics: ClientMetricsManager
    group_configs: GroupConfigs

    def set_log_defaults(self, config: LogConfig) -> None: ...


log = structlog.get_logger("odradek.configs")

_SETTING_TYPES = {"int": ConfigType.INT, "boolean": ConfigType.BOOLEAN, "double": ConfigType.DOUBLE,
                  "optional int": ConfigType.LONG}


def register(table: HandlerTable, app: ConfigServices) -> None:
    table.register(32, partial(describe_configs, app))
    table.register(33, partial(alter_configs, app, incremental=False))
    table.register(44, partial(alter_configs, app, incremental=True))
    table.register(74, partial(list_config_resources, app))


# --- ListConfigResources ----------------------------------------------------------------

# ListConfigResourcesRequest.supportedResourceTypes: v0 client-metrics only, v1 every type
_LISTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


def list_config_resources(app: ConfigServices, ctx: RequestContext, req) -> dict:
    """``KafkaApis.handleListConfigResources``: the resources of the types asked for (none
    named: every type the version knows); a type it does not know is UNSUPPORTED_VERSION.
    Groups are listed when they have group configs."""
    supported = _LISTED[min(ctx.api_version, 1)]
    wanted = list(req.resource_types or []) if ctx.api_version >= 1 else []
    if any(t not in supported for t in wanted):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION, "config_resources": []}
    wanted = wanted or list(supported)
    found: list[tuple[str, int]] = []  # in Kafka's order: groups, client metrics, loggers, brokers, topics
    if GROUP in wanted:
        found += [(n, GROUP) for n in app.group_configs.groups()]
    if CLIENT_METRICS in wanted:
        found += [(n, CLIENT_METRICS) for n in sorted(app.client_metrics.subscriptions.resources)]
    found += [(str(app.node_id), t) for t in (BROKER_LOGGER, BROKER) if t in wanted]
    if TOPIC in wanted:
        names = set(app.topics.names()) | {n for n in INTERNAL_TOPICS if app.topics.partition_count(n)}
        found += [(n, TOPIC) for n in sorted(names)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "config_resources": [{"resource_name": n, "resource_type": t} for n, t in found]}


# --- DescribeConfigs -------------------------------------------------------------------

def describe_configs(app: ConfigServices, ctx: RequestContext, req) -> dict:
    results = []
    for r in req.resources:
        try:
            entries = _entries(app, r.resource_type, r.resource_name)
            error, message = ErrorCode.NONE, None
        except (TopicError, ConfigOpError) as exc:
            entries, error, message = [], exc.code, exc.message
        wanted = None if not r.configuration_keys else set(r.configuration_keys)
        configs = [_config(ctx.api_version, e, req, read_only=ro)
                   for e, ro in entries if wanted is None or e.name in wanted]
        results.append({"error_code": error, "error_message": message, "resource_type": r.resource_type,
                        "resource_name": r.resource_name, "configs": configs})
    return {"throttle_time_ms": 0, "results": results}


def _entries(app: ConfigServices, resource_type: int, name: str) -> list[tuple[ConfigEntry, bool]]:
    if resource_type == TOPIC:
        return [(e, False) for e in _topic_entries(app, name)]
    if resource_type == BROKER:
        if name == "":
            return _default_broker_entries(app)
        if name != str(app.node_id):
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"unexpected broker id {name!r}: this is broker {app.node_id}")
        return _broker_entries(app)
    if resource_type == CLIENT_METRICS:
        return [(e, False) for e in _client_metrics_entries(app, name)]
    if resource_type == BROKER_LOGGER:
        runtime_loggers.check_node(name, app.node_id, describe=True)
        return [(e, False) for e in runtime_loggers.entries()]
    if resource_type == GROUP:
        return [(e, False) for e in _group_entries(app, name)]
    raise TopicError(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported")


_CLIENT_METRICS_DOCS = {
    "metrics": "Metric-name prefixes the matching clients push (* for all).",
    "interval.ms": "How often the matching clients push, 100 to 3600000.",
    "match": "selector=regex entries a client must all match (client_instance_id, client_id, "
             "client_source_address); empty: every client.",
}


def _client_metrics_entries(app: ConfigServices, name: str) -> list[ConfigEntry]:
    """A client-metrics resource's configs (a resource never set has none set: its defaults)."""
    if name == "":
        raise TopicError(ErrorCode.INVALID_REQUEST, "Client metrics resource name must not be empty")
    configs = app.client_metrics.subscriptions.resources.get(name, {})
    defaults = {"metrics": "", "interval.ms": str(DEFAULT_INTERVAL_MS), "match": ""}
    out = []
    for key in CLIENT_METRICS_KEYS:
        value = configs.get(key)
        source = ConfigSource.DEFAULT_CONFIG if value is None else ConfigSource.CLIENT_METRICS_CONFIG
        value = defaults[key] if value is None else value
        kind = ConfigType.LIST if key in CLIENT_METRICS_LISTS else ConfigType.INT
        out.append(ConfigEntry(key, value, source, kind, _CLIENT_METRICS_DOCS[key], ((key, value, source),)))
    return out


def _group_entries(app: ConfigServices, name: str) -> list[ConfigEntry]:
    """``ConfigHelper.createGroupConfigEntry``: every group config, GROUP_CONFIG where this group
    sets it, else the broker's default (DEFAULT_CONFIG; the group need not exist)."""
    if not name:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    out = []
    for key, value, set_here in group_configs.describe(app.group_configs, name):
        source = ConfigSource.GROUP_CONFIG if set_here else ConfigSource.DEFAULT_CONFIG
        kind = ConfigType.INT if key.kind == "int" else ConfigType.STRING
        out.append(ConfigEntry(key.name, value, source, kind, key.doc, ((key.name, value, source),)))
    return out


def _topic_entries(app: ConfigServices, name: str) -> list[ConfigEntry]:
    app.topics.check_name(name)
    topic = app.topics.get(name)
    if topic is not None:
        overrides = topic.configs
    elif name == OFFSETS_TOPIC and app.topics.partition_count(name):
        cfg = app.logs.config_for(OFFSETS_TOPIC)
        overrides = {"cleanup.policy": "compact", "segment.bytes": str(cfg.segment_bytes)}
    else:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return topic_configs.describe(overrides, app.log_config, app.dynamic_config)


def _setting_type(name: str, type_name: str) -> ConfigType:
    return ConfigType.LIST if name in LIST_SETTINGS else _SETTING_TYPES.get(type_name, ConfigType.STRING)


def _broker_entries(app: ConfigServices) -> list[tuple[ConfigEntry, bool]]:
    """Every setting of this node, read-only unless it can change at runtime (Kafka's rule)."""
    dyn = app.dynamic_config
    out = []
    for s in SETTINGS:
        synonyms = dyn.synonyms(s.name)
        layers = dyn.layers(s.name)
        value = layers[0][0] if layers else setting_string(s.default)
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        entry = ConfigEntry(s.name, value, source, _setting_type(s.name, s.type_name), s.doc, tuple(synonyms))
        out.append((entry, s.name not in DYNAMIC_SETTINGS))
    return out


def _default_broker_entries(app: ConfigServices) -> list[tuple[ConfigEntry, bool]]:
    """Resource name "": only the cluster-wide dynamic defaults, as Kafka lists them."""
    by_name = {s.name: s for s in SETTINGS}
    out = []
    for name, value in sorted(app.dynamic_config.default.items()):
        s = by_name[name]
        src = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        out.append((ConfigEntry(name, value, src, _setting_type(name, s.type_name), s.doc,
                                ((name, value, src),)), False))
    return out


SENSITIVE = frozenset(s.name for s in SETTINGS if s.sensitive)


def _config(version: int, e: ConfigEntry, req, *, read_only: bool) -> dict:
    # a password or key is described without its value, as Kafka does (ConfigDef.Type.PASSWORD)
    sensitive = e.name in SENSITIVE
    synonyms = ([{"name": n, "value": None if sensitive else v, "source": src} for n, v, src in e.synonyms]
                if version >= 1 and req.include_synonyms else [])
    return {"name": e.name, "value": None if sensitive else e.value, "read_only": read_only,
            "is_default": e.source is ConfigSource.DEFAULT_CONFIG, "config_source": e.source,
            "is_sensitive": sensitive, "synonyms": synonyms, "config_type": e.type,
            "documentation": e.doc if version >= 3 and req.include_documentation else None}


# --- AlterConfigs / IncrementalAlterConfigs --------------------------------------------

async def alter_configs(app: ConfigServices, ctx: RequestContext, req, *, incremental: bool) -> dict:
    """Each resource is checked and changed on its own; one failing leaves the others' changes."""
    duplicates = duplicate_resources(req.resources)
    responses = []
    for r in req.resources:
        try:
            if (r.resource_type, r.resource_name) in duplicates:
                raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            ops = ops_of(r.configs, incremental)
            check_shape(ops)
            if r.resource_type == TOPIC:
                await _alter_topic(app, r.resource_name, ops, legacy=not incremental,
                                   validate_only=req.validate_only)
            elif r.resource_type == BROKER:
                await _alter_broker(app, r.resource_name, ops, legacy=not incremental,
                                    validate_only=req.validate_only)
            elif r.resource_type == CLIENT_METRICS:
                await _alter_client_metrics(app, r.resource_name, ops, legacy=not incremental,
                                            validate_only=req.validate_only)
            elif r.resource_type == GROUP:
                await _alter_group(app, r.resource_name, ops, legacy=not incremental,
                                   validate_only=req.validate_only)
            elif r.resource_type == BROKER_LOGGER and incremental:  # legacy AlterConfigs: unknown type
                runtime_loggers.check_node(r.resource_name, app.node_id, describe=False)
                runtime_loggers.alter(ops, validate_only=req.validate_only)
            else:
                raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")
            code, message = ErrorCode.NONE, None
        except (ConfigOpError, TopicError) as exc:
            code, message = exc.code, exc.message
            log.info("configs.alter_refused", resource_type=r.resource_type, resource=r.resource_name,
                     error=code.name, reason=message, client=ctx.client_id)
        responses.append({"error_code": code, "error_message": message, "resource_type": r.resource_type,
                          "resource_name": r.resource_name})
    return {"throttle_time_ms": 0, "responses": responses}


async def _alter_topic(app: ConfigServices, name: str, ops: list[Op], *, legacy: bool, validate_only: bool) -> None:
    if name == "":
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    app.topics.check_name(name)
    if name in INTERNAL_TOPICS:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST,
                            f"the configs of the internal topic {name} are fixed by the broker's settings")
    topic = app.topics.get(name)
    if topic is None:
        raise ConfigOpError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    unknown = [o.name for o in ops if o.name not in TOPIC_CONFIGS]
    if unknown:
        raise ConfigOpError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
    inherited = app.log_config.to_topic_config()
    overrides = apply_ops(topic.configs, ops, legacy=legacy,
                          is_list=lambda n: TOPIC_CONFIGS[n].type is ConfigType.LIST,
                          start=lambda n: inherited.get(n, TOPIC_CONFIGS[n].default),
                          not_list=ErrorCode.INVALID_CONFIG, dedupe=True)
    if validate_only:
        app.topics.check_configs(overrides)
        return
    await app.topics.alter_configs(name, overrides)


async def _alter_broker(app: ConfigServices, name: str, ops: list[Op], *, legacy: bool, validate_only: bool) -> None:
    if name != "":
        try:
            node = int(name)
        except ValueError:
            raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") \
                from None
        if node != app.node_id:
            raise ConfigOpError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {app.node_id}, but received {name}")
    defaults = {s.name: setting_string(s.default) for s in SETTINGS}

    def compute(current: dict[str, str]) -> dict[str, str]:
        return apply_ops(current, ops, legacy=legacy, is_list=lambda n: n in LIST_SETTINGS,
                         start=defaults.get, not_list=ErrorCode.INVALID_REQUEST, dedupe=False)

    try:
        config = await app.dynamic_config.change(name != "", compute, validate_only=validate_only)
    except DynamicConfigError as exc:  # KAFKA-13609: INVALID_REQUEST, even for a bad value
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    except OSError as exc:
        log.error("configs.store_failed", resource=name, error=str(exc))
        raise ConfigOpError(ErrorCode.KAFKA_STORAGE_ERROR, f"storing broker configs failed: {exc}") from None
    if not validate_only:
        app.set_log_defaults(config)
        log.info("configs.broker_changed", resource=name or "<cluster default>",
                 node=app.dynamic_config.node, default=app.dynamic_config.default)


async def _alter_client_metrics(app: ConfigServices, name: str, ops: list[Op], *, legacy: bool,
                                validate_only: bool) -> None:
    """A ``CLIENT_METRICS`` resource (KIP-714): clients matching it get its subscription on
    their next telemetry request."""
    if name == "":
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Client metrics resource name must not be empty")

    def compute(current: dict[str, str]) -> dict[str, str]:
        return apply_ops(current, ops, legacy=legacy, is_list=CLIENT_METRICS_LISTS.__contains__,
                         start=lambda _n: None, not_list=ErrorCode.INVALID_CONFIG, dedupe=True)

    try:
        await app.client_metrics.subscriptions.change(name, compute, validate_only=validate_only)
    except ClientMetricsConfigError as exc:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST if exc.invalid_request else ErrorCode.INVALID_CONFIG,
                            str(exc)) from None
    except OSError as exc:
        log.error("configs.store_failed", resource=name, error=str(exc))
        raise ConfigOpError(ErrorCode.KAFKA_STORAGE_ERROR, f"storing client metrics failed: {exc}") from None
    if not validate_only:
        log.info("configs.client_metrics_changed", resource=name,
                 configs=app.client_metrics.subscriptions.resources.get(name, {}))


async def _alter_group(app: ConfigServices, name: str, ops: list[Op], *, legacy: bool, validate_only: bool) -> None:
    """A GROUP resource (KIP-848's group configs): ``ControllerConfigurationValidator`` (no default
    resource, names and values as ``GroupConfig.validate``), stored before the coordinators read it."""
    if name == "":
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")

    def compute(current: dict[str, str]) -> dict[str, str]:
        return apply_ops(current, ops, legacy=legacy, is_list=lambda _n: False, start=lambda _n: None,
                         not_list=ErrorCode.INVALID_CONFIG, dedupe=True)

    try:
        await app.group_configs.change(name, compute, validate_only=validate_only)
    except GroupConfigError as exc:
        raise ConfigOpError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    except OSError as exc:
        log.error("configs.store_failed", resource=name, error=str(exc))
        raise ConfigOpError(ErrorCode.KAFKA_STORAGE_ERROR, f"storing group configs failed: {exc}") from None
    if not validate_only:
        log.info("configs.group_changed", group=name, configs=app.group_configs.raw(name))
