"""Broker settings: one table, Kafka's property names, four sources.

Every setting the broker reads is declared once in ``SETTINGS`` (name, type,
default, Kafka's default where ours differs, meaning).  Values come from, in
rising priority: defaults, a ``server.properties`` file, ``KAFKA_*``
environment variables (the convention of the official Kafka images:
``KAFKA_OFFSETS_RETENTION_MINUTES`` -> ``offsets.retention.minutes``; ``__``
stands for ``_`` and ``___`` for ``-``), and ``--override key=value``.
Invalid values stop start-up with a message naming the setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..protocol.lean_dataclass import dataclass
from ..storage.config import COMPRESSION_TYPES, GZIP_LEVELS, LZ4_LEVELS, PRODUCER, ZSTD_LEVELS

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})  # listen on every interface


class ConfigError(ValueError):
    """A setting has an invalid value; the message names the setting."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(text: str) -> list[Listener]:
    """``PLAINTEXT://host:port[,NAME://host:port]``; an empty host means all interfaces."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "://" not in part:
            raise ValueError(f"{part!r} is not NAME://host:port")
        name, rest = part.split("://", 1)
        split = urlsplit("//" + rest)
        if split.port is None:
            raise ValueError(f"{part!r} has no port")
        out.append(Listener(name.upper(), split.hostname or "", split.port))
    if not out:
        raise ValueError("no listener given")
    return out


def _listener_text(listener: Listener) -> str:
    host = f"[{listener.host}]" if ":" in listener.host else listener.host
    return f"{listener.name}://{host}:{listener.port}"


def port_overrides(config: Config, port: int) -> dict[str, str]:
    """``odradek serve --port N``: the first listener on port N, and its advertised entry (if
    any) too, so clients are told the port they bootstrapped on; hosts and names are kept (the
    container image's ``0.0.0.0`` listener advertised as ``localhost``)."""
    first, *rest = config.listeners
    out = {"listeners": ",".join(_listener_text(li) for li in [Listener(first.name, first.host, port), *rest])}
    if config["advertised.listeners"]:
        advertised = parse_listeners(config["advertised.listeners"])
        out["advertised.listeners"] = ",".join(
            _listener_text(Listener(a.name, a.host, port) if a.name == first.name else a) for a in advertised)
    return out


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean")


def _int(text: str) -> int:
    return int(text.strip().replace("_", ""), 0)


def _float(text: str) -> float:
    return float(text.strip())


def _str(text: str) -> str:
    return text.strip()


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise ValueError(f"{text!r} is not one of {', '.join(options)}")
        return value
    parse.__name__ = "one of " + "|".join(options)
    return parse


def _level(levels: tuple[int, int, int]) -> Callable[[str], int]:
    """A compression level in Kafka's range (``lowest..highest``), or its default (gzip's -1)."""
    low, high, default = levels

    def parse(text: str) -> int:
        value = _int(text)
        if not low <= value <= high and value != default:
            raise ValueError(f"{value} is outside {low}..{high}")
        return value
    parse.__name__ = f"int {low}..{high}" + ("" if low <= default <= high else f" or {default}")
    return parse


def _kafka_release(text: str) -> str:
    """A release in the generated table (``odradek/protocol/kafka_releases.py``), or "" for none."""
    from ..protocol.kafka_releases import RELEASES

    value = text.strip()
    if value and value not in RELEASES:
        raise ValueError(f"{text!r} is not an emulated Kafka release (one of {', '.join(RELEASES)})")
    return value


def _rebalance_protocols(text: str) -> str:
    """``group.coordinator.rebalance.protocols``: classic (always) and consumer (KIP-848)."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("classic", "consumer")]
    if unknown:
        raise ValueError(f"unknown rebalance protocol(s) {', '.join(unknown)} (classic, consumer)")
    if "classic" not in names:
        raise ValueError("the classic protocol cannot be disabled")
    return ",".join(dict.fromkeys(names))


def _consumer_assignors(text: str) -> str:
    """``group.consumer.assignors``: server assignors by name or Kafka class name; the first is the default."""
    from .coordinator.assignors import ASSIGNORS, CLASS_NAMES

    names = [CLASS_NAMES.get(n.strip(), n.strip().lower()) for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown or not names:
        raise ValueError(f"unknown assignor(s) {', '.join(unknown) or '(none)'} (uniform, range)")
    return ",".join(dict.fromkeys(names))


def _opt(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An optional setting: unset (None) by default, else parsed."""
    def parse_opt(text: str) -> Any:
        return None if text.strip() in ("", "null", "none") else parse(text)
    parse_opt.__name__ = f"optional {parse.__name__.lstrip('_')}"
    return parse_opt


def _log_levels(text: str) -> str:
    from .logging_setup import parse_levels

    parse_levels(text)
    return text.strip()


def _feature_levels(text: str) -> str:
    from .features import parse_levels

    parse_levels(text)
    return text.strip()


def _listeners(text: str) -> str:
    parse_listeners(text)
    return text.strip()


CONSOLE_DEFAULT = "http://127.0.0.1:8080"


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``host:port`` or just ``port`` (then ``default_host``): where the control endpoint listens."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = default_host, text
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT or PORT")
    return host.strip("[]") or default_host, int(port)


def _control_address(text: str) -> str:
    if text.strip():
        parse_address(text)
    return text.strip()


def parse_http_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``http://host:port``, ``host:port`` or ``port``: where an HTTP surface (the console) listens."""
    text = text.strip()
    scheme, sep, rest = text.partition("://")
    if sep and scheme.lower() != "http":
        raise ValueError(f"{text!r}: only http:// is served")
    return parse_address((rest if sep else text).rstrip("/"), default_host)


def registry_address(text: str) -> tuple[str, int] | None:
    """``odradek.schema.registry.listener``: ``http://HOST:PORT``, ``HOST:PORT`` or ``PORT``; empty: off."""
    return parse_http_address(text) if text.strip() else None


def _registry_listener(text: str) -> str:
    registry_address(text)
    return text.strip()


def _basic_auth_users(text: str) -> str:
    basic_auth_users(text)
    return text.strip()


def basic_auth_users(text: str) -> dict[str, str]:
    """``name:password,name2:password2``: the users HTTP basic auth lets in."""
    users = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, password = item.partition(":")
        if not sep or not name:
            raise ValueError(f"{item!r} is not NAME:PASSWORD")
        users[name] = password
    return users


# Kafka's authorizer class names: KRaft's, the ZooKeeper-era one, and the pre-2.0 one
AUTHORIZER_CLASSES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
})


def _authorizer(text: str) -> str:
    """authorizer.class.name: one of Kafka's names for the ACL authorizer (``security/authorizer.py``), or empty."""
    value = text.strip()
    if value and value not in AUTHORIZER_CLASSES:
        raise ValueError(f"{value!r} is not an authorizer this broker implements; use "
                         "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or "
                         "kafka.security.authorizer.AclAuthorizer) for Kafka's ACLs, or leave it "
                         "empty for none")
    return value


def _super_users(text: str) -> str:
    parse_super_users(text)
    return text.strip()


def parse_super_users(text: str) -> list[str]:
    """``super.users``: ``;``-separated principals, each ``Type:name`` (trimmed)."""
    out = []
    for item in filter(None, (s.strip() for s in text.split(";"))):
        kind, sep, name = item.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"{item!r} is not a principal of the form Type:name")
        out.append(item)
    return out


def _paths(text: str) -> str:
    if not any(p.strip() for p in text.split(",")):
        raise ValueError("no directory given")
    return text.strip()


def _default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "odradek")


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    kafka_default: Any = None  # set where our default deliberately differs from Kafka's
    low: float | None = None
    high: float | None = None
    sensitive: bool = False  # a password or key: never logged, printed or described (Kafka's PASSWORD type)
    scope: str = ""  # "listener": may be set per listener as listener.name.<l>.<name>; "mechanism": per
    #                 listener and SASL mechanism, listener.name.<l>.<mechanism>.<name> (Kafka's prefixes)

    @property
    def type_name(self) -> str:
        return {_int: "int", _bool: "boolean", _float: "double", _str: "string",
                _listeners: "listeners", _paths: "paths", _kafka_release: "Kafka release",
                _feature_levels: "feature=level list",
                _log_levels: "component=level list",
                _rebalance_protocols: "list", _consumer_assignors: "list",
                _control_address: "host:port or port", _registry_listener: "http://host:port, host:port or port",
                _basic_auth_users: "name:password list"}.get(self.parse, self.parse.__name__)

    def convert(self, raw: Any) -> Any:
        value = raw if not isinstance(raw, str) else self.parse(raw)
        if value is None:
            return None
        if self.low is not None and value < self.low:
            raise ValueError(f"{value} is below the minimum {self.low:g}")
        if self.high is not None and value > self.high:
            raise ValueError(f"{value} is above the maximum {self.high:g}")
        return value


INT32_MAX = 2**31 - 1
# the broker settings of the codec batches are stored in, beside the log.* ones (LogConfig)
_CODEC_SETTINGS = ("compression.type", "compression.gzip.level", "compression.lz4.level",
                   "compression.zstd.level")

DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


def _listener_setting(name: str, parse: Callable[[str], Any], default: Any, doc: str, **kw: Any) -> Setting:
    return Setting(name, parse, default, doc + " May be set per listener: listener.name.<listener>." + name + ".",
                   scope="listener", **kw)


# listeners and security (``odradek/broker/security/``); every name is Kafka's
SECURITY_SETTINGS: list[Setting] = [
    Setting("listener.security.protocol.map", _str, DEFAULT_PROTOCOL_MAP,
            "NAME:PROTOCOL pairs giving each listener name its security protocol (PLAINTEXT, SSL, "
            "SASL_PLAINTEXT, SASL_SSL); needed for names that are not protocol names."),
    Setting("inter.broker.listener.name", _opt(_str), None,
            "Accepted for compatibility (a single node has no peers); must name a listener when set."),
    Setting("security.inter.broker.protocol", _opt(_str), None,
            "Accepted for compatibility; must be the protocol of a listener when set.",
            kafka_default="PLAINTEXT"),
    Setting("controller.listener.names", _opt(_str), None,
            "Accepted for compatibility: a listener named here is served like any other."),
    Setting("sasl.mechanism.inter.broker.protocol", _opt(_str), None,
            "Accepted for compatibility (no inter-broker traffic).", kafka_default="GSSAPI"),
    _listener_setting("sasl.enabled.mechanisms", _str, "GSSAPI",
                      "SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
                      "OAUTHBEARER. GSSAPI (Kerberos, Kafka's default) is not served: it is dropped from the "
                      "list with a warning, and a SASL listener left with none stops start-up."),
    Setting("sasl.jaas.config", _str, "",
            "JAAS configuration of a mechanism, e.g. org.apache.kafka.common.security.plain.PlainLoginModule "
            "required user_alice=\"alice-secret\"; (PLAIN users are the user_<name> options). Kafka reads "
            "it only per listener and mechanism, listener.name.<listener>.<mechanism>.sasl.jaas.config; "
            "the bare name applies to every listener and mechanism here.",
            sensitive=True, scope="mechanism"),
    Setting("java.security.auth.login.config", _str, "",
            "A JAAS file (Kafka's -Djava.security.auth.login.config, also read from KAFKA_OPTS): its "
            "<listener>.KafkaServer section, else KafkaServer, holds the login modules of listeners "
            "without a sasl.jaas.config."),
    Setting("connections.max.reauth.ms", _int, 0,
            "KIP-368: a SASL session lasts at most this long; the client must re-authenticate on the "
            "same connection, or its next request after the deadline closes it. 0: sessions never "
            "expire. May be set per listener and mechanism.", low=0, scope="mechanism"),
    Setting("connection.failed.authentication.delay.ms", _int, 100,
            "Delay before an authentication failure is answered and the connection closed.", low=0),
    _listener_setting("sasl.server.max.receive.size", _int, 524288,
                      "Largest frame accepted before authentication completes.", low=1, high=INT32_MAX),
    _listener_setting("ssl.keystore.type", _str, "JKS",
                      "Only PEM is supported (JKS and PKCS12 stop start-up, naming the PEM settings)."),
    _listener_setting("ssl.keystore.location", _str, "",
                      "PEM file holding the private key (PKCS#8, optionally encrypted with "
                      "ssl.key.password) and the certificate chain."),
    _listener_setting("ssl.keystore.key", _str, "", "The private key as PEM text (instead of a file).",
                      sensitive=True),
    _listener_setting("ssl.keystore.certificate.chain", _str, "",
                      "The certificate chain as PEM text (with ssl.keystore.key)."),
    _listener_setting("ssl.key.password", _str, "", "Password of an encrypted private key.", sensitive=True),
    _listener_setting("ssl.keystore.password", _str, "",
                      "Password of a JKS/PKCS12 keystore; not allowed with PEM (as in Kafka).", sensitive=True),
    _listener_setting("ssl.truststore.type", _str, "JKS",
                      "Only PEM is supported for the certificates client certificates are checked against."),
    _listener_setting("ssl.truststore.location", _str, "", "PEM file of trusted (CA) certificates."),
    _listener_setting("ssl.truststore.certificates", _str, "", "Trusted certificates as PEM text."),
    _listener_setting("ssl.truststore.password", _str, "",
                      "Password of a JKS/PKCS12 truststore; not allowed with PEM.", sensitive=True),
    _listener_setting("ssl.client.auth", _choice("none", "requested", "required"), "none",
                      "Client certificates on SSL listeners: none, requested or required. On SASL_SSL "
                      "only the listener-prefixed setting applies (as in Kafka)."),
    _listener_setting("ssl.enabled.protocols", _str, "TLSv1.2,TLSv1.3",
                      "TLS versions accepted (TLSv1, TLSv1.1, TLSv1.2, TLSv1.3)."),
    _listener_setting("ssl.protocol", _str, "TLSv1.3", "Accepted for compatibility (see ssl.enabled.protocols)."),
    _listener_setting("ssl.cipher.suites", _str, "",
                      "Accepted but not applied (Java and OpenSSL name cipher suites differently): "
                      "OpenSSL's defaults are used."),
    _listener_setting("ssl.principal.mapping.rules", _str, "DEFAULT",
                      "How a client certificate's subject becomes the principal: DEFAULT (the DN) or "
                      "RULE:<regex>/<replacement>/[LU] entries, first match wins."),
    _listener_setting("ssl.endpoint.identification.algorithm", _str, "https",
                      "Accepted for compatibility (the broker is never a TLS client)."),
]

SETTINGS: list[Setting] = [
    # network
    Setting("listeners", _listeners, "PLAINTEXT://127.0.0.1:9092",
            "Where to listen. Port 0 picks a free port (reported in the log and used in Metadata).",
            kafka_default="PLAINTEXT://:9092"),
    Setting("advertised.listeners", _str, "",
            "Address clients are told to connect to (Metadata, FindCoordinator). Empty: the "
            "bound listener; a wildcard host is replaced by this machine's host name."),
    Setting("node.id", _int, 1, "This broker's node id (also the controller id).", low=0,
            high=INT32_MAX, kafka_default=-1),
    Setting("odradek.brokers", _int, 1,
            "Brokers emulated in this one process (a cluster: docs/CLUSTER.md), node ids node.id "
            "onwards; broker k listens on the first broker's listeners with every port plus k unless "
            "odradek.cluster.listeners says otherwise. They share one store; each answers only for the "
            "partitions it leads and the groups it coordinates.", low=1, high=64),
    Setting("odradek.cluster.listeners", _str, "",
            "Listeners of the second and further brokers, one broker's list after another separated by "
            "'|' (same listener names as listeners); an empty entry: the first broker's ports plus k."),
    Setting("odradek.cluster.advertised.listeners", _str, "",
            "Advertised listeners of the second and further brokers, as odradek.cluster.listeners; an "
            "empty entry: the first broker's advertised ports plus k."),
    Setting("socket.request.max.bytes", _int, 104857600,
            "Largest request frame accepted; a bigger one closes the connection.", low=1,
            high=INT32_MAX),
    Setting("connections.max.idle.ms", _int, 600000,
            "Close a connection that sent nothing (not even the rest of a frame) for this long; -1 never.",
            low=-1),
    Setting("fetch.max.bytes", _int, 57671680,
            "Most record bytes one Fetch answer carries (besides one whole first batch, KIP-74).",
            low=1024, high=INT32_MAX),
    Setting("max.incremental.fetch.session.cache.slots", _int, 1000,
            "Most incremental fetch sessions (KIP-227) kept, split over 8 shards as Kafka's cache is.",
            low=0),
    Setting("quota.window.num", _int, 11,
            "Samples a client quota's rate is measured over (Kafka's quota.window.num).", low=1),
    Setting("quota.window.size.seconds", _int, 1,
            "Length of each quota sample on the broker clock (Kafka's quota.window.size.seconds).", low=1),
    *SECURITY_SETTINGS,
    # storage
    Setting("log.dirs", _paths, _default_data_dir(),
            "Comma-separated data directories; the first also holds meta.properties.",
            kafka_default="/tmp/kafka-logs"),
    # storage: broker-wide log defaults (topics may override with the topic-level names)
    Setting("log.segment.bytes", _int, 1073741824, "Roll a segment at this size.", low=14,
            high=INT32_MAX),
    Setting("log.roll.hours", _int, 168, "Roll a segment this old.", low=1),
    Setting("log.roll.ms", _opt(_int), None, "Overrides log.roll.hours when set."),
    Setting("log.retention.hours", _int, 168, "Delete closed segments older than this."),
    Setting("log.retention.minutes", _opt(_int), None, "Overrides log.retention.hours when set."),
    Setting("log.retention.ms", _opt(_int), None,
            "Overrides log.retention.minutes/hours when set; -1 keeps data forever."),
    Setting("log.retention.bytes", _int, -1, "Delete oldest segments above this size; -1 unlimited."),
    Setting("log.retention.check.interval.ms", _int, 300000, "How often retention runs.", low=1),
    Setting("log.cleanup.policy", _str, "delete", "delete, compact, or both (comma-separated)."),
    Setting("log.cleaner.delete.retention.ms", _int, 86400000,
            "How long compaction keeps tombstones.", low=0),
    Setting("log.cleaner.min.cleanable.ratio", _float, 0.5,
            "Compact a log once this share of it is dirty.", low=0, high=1),
    Setting("log.cleaner.min.compaction.lag.ms", _int, 0,
            "Records younger than this are never compacted.", low=0),
    Setting("log.cleaner.backoff.ms", _int, 15000, "How often the cleaner looks for work.", low=1),
    Setting("log.flush.interval.messages", _int, 2**63 - 1,
            "fsync after this many messages (Kafka's name).", low=1),
    Setting("log.flush.interval.ms", _opt(_int), None, "fsync at least this often (Kafka's name)."),
    Setting("log.fsync.mode", _choice("never", "interval", "always"), "never",
            "Odradek's simple durability switch: never (page cache), interval (every "
            "log.flush.interval.ms, default 1 s) or always (acknowledge after fsync, group commit)."),
    Setting("log.message.timestamp.type", _choice("createtime", "logappendtime"), "createtime",
            "CreateTime or LogAppendTime (case-insensitive)."),
    Setting("log.index.interval.bytes", _int, 4096, "Bytes between offset-index entries.", low=0),
    Setting("message.max.bytes", _int, 1048588, "Largest record batch accepted.", low=0,
            high=INT32_MAX),
    Setting("compression.type", _choice(*COMPRESSION_TYPES), PRODUCER,
            "Codec batches are stored in (recompressed on append when it differs from the "
            "batch's), or producer: as the producer sent them."),
    Setting("compression.gzip.level", _level(GZIP_LEVELS), GZIP_LEVELS[2],
            "Level of batches the broker recompresses into gzip: 1..9, or -1 (zlib's default, 6)."),
    Setting("compression.lz4.level", _level(LZ4_LEVELS), LZ4_LEVELS[2],
            "Level of batches the broker recompresses into lz4: 1..17; accepted, every level "
            "compresses as the default 9 (lz4's fast compressor: cramjam has no high-compression one)."),
    Setting("compression.zstd.level", _level(ZSTD_LEVELS), ZSTD_LEVELS[2],
            "Level of batches the broker recompresses into zstd: -131072..22."),
    Setting("odradek.emulate.kafka.version", _kafka_release, "",
            "Serve only the request versions this Kafka release served (ApiVersions and every "
            "version check), and write the __consumer_offsets value versions it wrote; "
            "empty: every version implemented. One of 2.0, 2.8, 3.0, 3.5, 3.9, 4.0, 4.1, 4.2, 4.3."),
    Setting("odradek.initial.features", _feature_levels, "",
            "Finalized feature levels of a fresh data dir, as kafka-storage format --feature sets them "
            "(transaction.version=1,group.version=0); unset features take the release's default. "
            "UpdateFeatures changes them later; its levels are kept in the data dir."),
    # topics
    Setting("auto.create.topics.enable", _bool, True,
            "Create unknown topics on Metadata/Produce requests that allow it."),
    Setting("num.partitions", _int, 1, "Partitions of auto-created topics.", low=1),
    Setting("default.replication.factor", _int, 1,
            "Replicas of auto-created topics and of CreateTopics without one; at most odradek.brokers.",
            low=1, high=64),
    Setting("delete.topic.enable", _bool, True, "Allow DeleteTopics."),
    # authorization (ACLs)
    Setting("authorizer.class.name", _authorizer, "",
            "Kafka's StandardAuthorizer (org.apache.kafka.metadata.authorizer.StandardAuthorizer) or "
            "AclAuthorizer (kafka.security.authorizer.AclAuthorizer) name turns on ACLs; empty: every "
            "request is allowed and the ACL APIs answer SECURITY_DISABLED."),
    Setting("super.users", _super_users, "",
            "Principals allowed everything whatever the ACLs, ';'-separated (User:admin;User:ops)."),
    Setting("allow.everyone.if.no.acl.found", _bool, False,
            "With ACLs on: allow a request on a resource no ACL names (else it is denied)."),
    # group coordinator and committed offsets
    Setting("group.min.session.timeout.ms", _int, 6000, "Smallest session timeout a member may ask for."),
    Setting("group.max.session.timeout.ms", _int, 1800000, "Largest session timeout a member may ask for."),
    Setting("group.initial.rebalance.delay.ms", _int, 10,
            "How long a new group waits for more members before its first generation (each "
            "member joining meanwhile extends it, as in Kafka). The default gathers consumers "
            "started together into one first generation; 0 forms it with whoever came first, "
            "and a member arriving just after starts a second round the first ones learn of "
            "only at their next heartbeat.",
            kafka_default=3000, low=0),
    Setting("group.max.size", _int, INT32_MAX, "Most members a group may have.", low=1,
            high=INT32_MAX),
    Setting("group.coordinator.rebalance.protocols", _rebalance_protocols, "classic,consumer",
            "Group protocols served: classic always, consumer (KIP-848, ConsumerGroupHeartbeat) "
            "when listed (Kafka 4's default lists both)."),
    Setting("group.consumer.heartbeat.interval.ms", _int, 5000,
            "Heartbeat interval given to consumer-protocol members.", low=1, high=INT32_MAX),
    Setting("group.consumer.session.timeout.ms", _int, 45000,
            "Session timeout of consumer-protocol members (chosen by the broker, not the client).",
            low=1, high=INT32_MAX),
    # bounds of the per-group consumer.* configs (GROUP resources, Kafka's GroupConfig.validate)
    Setting("group.consumer.min.session.timeout.ms", _int, 45000,
            "Smallest consumer.session.timeout.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.consumer.max.session.timeout.ms", _int, 60000,
            "Largest consumer.session.timeout.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.consumer.min.heartbeat.interval.ms", _int, 5000,
            "Smallest consumer.heartbeat.interval.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.consumer.max.heartbeat.interval.ms", _int, 15000,
            "Largest consumer.heartbeat.interval.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.consumer.assignors", _consumer_assignors, "uniform,range",
            "Server assignors of consumer groups (uniform, range, or Kafka's class names); the first "
            "is the default."),
    Setting("group.consumer.max.size", _int, INT32_MAX, "Most members a consumer group may have.", low=1,
            high=INT32_MAX),
    Setting("group.consumer.migration.policy", _choice("bidirectional", "upgrade", "downgrade", "disabled"),
            "bidirectional", "Online migration of non-empty groups between the protocols: upgrade (a "
            "consumer-protocol member joining a classic group converts it, its classic members kept), "
            "downgrade (the last consumer-protocol member leaving converts it back), both, or "
            "disabled; an empty group converts whatever it says."),
    # KIP-932 share groups: the broker defaults of the share.* group configs (Kafka's names)
    Setting("group.share.session.timeout.ms", _int, 45000,
            "Session timeout of share-group members.", low=1, high=INT32_MAX),
    Setting("group.share.heartbeat.interval.ms", _int, 5000,
            "Heartbeat interval given to share-group members.", low=1, high=INT32_MAX),
    Setting("group.share.record.lock.duration.ms", _int, 30000,
            "Acquisition lock of a share-group record (AcquisitionLockTimeoutMs).", low=1000, high=3600000),
    Setting("group.share.delivery.count.limit", _int, 5,
            "Deliveries of a record before a share group archives it.", low=2, high=10),
    Setting("group.share.partition.max.record.locks", _int, 2000,
            "Most records in flight (acquired) per share-partition.", low=100, high=10000),
    Setting("group.share.max.size", _int, 200, "Most members a share group may have.", low=1, high=1000),
    Setting("group.share.enable", _bool, False,
            "Serve share groups even when the finalized share.version is 0 (Kafka's legacy switch; "
            "share groups are on when either says so)."),
    Setting("group.share.initialize.retry.interval.ms", _int, 30000,
            "A share-partition still initializing after this long is initialized again.", low=1,
            high=INT32_MAX),
    Setting("group.share.max.share.sessions", _int, 2000,
            "Most share sessions (one per share-group member fetching here) this broker keeps.",
            low=1, high=INT32_MAX),
    # share coordinator (__share_group_state)
    Setting("share.coordinator.state.topic.num.partitions", _int, 1,
            "Partitions of __share_group_state (the share coordinator's shards); fixed once created.",
            kafka_default=50, low=1, high=10000),
    Setting("share.coordinator.state.topic.segment.bytes", _int, 104857600, "Segment size of __share_group_state.",
            low=14, high=INT32_MAX),
    Setting("share.coordinator.snapshot.update.records.per.snapshot", _int, 500,
            "ShareUpdate records per share-partition before the next write is a whole ShareSnapshot.",
            low=0, high=500),
    # bounds of the per-group share.* configs (GROUP resources, Kafka's GroupConfig.validate)
    Setting("group.share.min.session.timeout.ms", _int, 45000,
            "Smallest share.session.timeout.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.share.max.session.timeout.ms", _int, 60000,
            "Largest share.session.timeout.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.share.min.heartbeat.interval.ms", _int, 5000,
            "Smallest share.heartbeat.interval.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.share.max.heartbeat.interval.ms", _int, 15000,
            "Largest share.heartbeat.interval.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.share.min.record.lock.duration.ms", _int, 15000,
            "Smallest share.record.lock.duration.ms a group config may set.", low=1000, high=30000),
    Setting("group.share.max.record.lock.duration.ms", _int, 60000,
            "Largest share.record.lock.duration.ms a group config may set.", low=30000, high=3600000),
    # KIP-1071 streams groups are not served; their group configs are stored and checked (Kafka's
    # GroupConfig names) so admin tools that set them work
    Setting("group.streams.session.timeout.ms", _int, 45000,
            "Default of the streams.session.timeout.ms group config.", low=1, high=INT32_MAX),
    Setting("group.streams.min.session.timeout.ms", _int, 45000,
            "Smallest streams.session.timeout.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.streams.max.session.timeout.ms", _int, 60000,
            "Largest streams.session.timeout.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.streams.heartbeat.interval.ms", _int, 5000,
            "Default of the streams.heartbeat.interval.ms group config.", low=1, high=INT32_MAX),
    Setting("group.streams.min.heartbeat.interval.ms", _int, 5000,
            "Smallest streams.heartbeat.interval.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.streams.max.heartbeat.interval.ms", _int, 15000,
            "Largest streams.heartbeat.interval.ms a group config may set.", low=1, high=INT32_MAX),
    Setting("group.streams.num.standby.replicas", _int, 0,
            "Default of the streams.num.standby.replicas group config.", low=0, high=INT32_MAX),
    Setting("group.streams.max.standby.replicas", _int, 2,
            "Largest streams.num.standby.replicas a group config may set.", low=0, high=INT32_MAX),
    Setting("group.streams.initial.rebalance.delay.ms", _int, 3000,
            "Default of the streams.initial.rebalance.delay.ms group config.", low=0, high=INT32_MAX),
    Setting("offsets.topic.num.partitions", _int, 1,
            "Partitions of __consumer_offsets (the coordinator's shards); fixed once created.",
            kafka_default=50, low=1, high=10000),
    Setting("offsets.topic.segment.bytes", _int, 104857600, "Segment size of __consumer_offsets.",
            low=14, high=INT32_MAX),
    Setting("offsets.retention.minutes", _int, 10080,
            "KIP-211: how long offsets outlive their group's last member (or their commit).", low=1),
    Setting("offsets.retention.check.interval.ms", _int, 600000, "Period of the offset expiry sweep.",
            low=1),
    Setting("offset.metadata.max.bytes", _int, 4096, "Longest commit metadata string accepted.",
            low=0),
    # transaction coordinator (__transaction_state)
    Setting("transaction.state.log.num.partitions", _int, 1,
            "Partitions of __transaction_state (the transaction coordinator's shards); fixed once created.",
            kafka_default=50, low=1, high=10000),
    Setting("transaction.state.log.segment.bytes", _int, 104857600, "Segment size of __transaction_state.",
            low=14, high=INT32_MAX),
    Setting("transaction.max.timeout.ms", _int, 900000,
            "Largest transaction.timeout.ms a producer may ask for (else INVALID_TRANSACTION_TIMEOUT).",
            low=1, high=INT32_MAX),
    Setting("transactional.id.expiration.ms", _int, 604800000,
            "Idle time after which a finished transactional id is forgotten.", low=1, high=INT32_MAX),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", _int, 10000,
            "Period of the sweep that aborts (and fences) transactions past their timeout.", low=1),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", _int, 3600000,
            "Period of the sweep that removes expired transactional ids.", low=1),
    # client telemetry (KIP-714, docs/telemetry.md)
    Setting("client.telemetry.enable", _bool, False,
            "Serve GetTelemetrySubscriptions and PushTelemetry (advertised in ApiVersions), as a Kafka "
            "broker does with a client-telemetry metrics reporter. Implied by client.metrics.default.metrics."),
    Setting("client.metrics.default.metrics", _str, "",
            "Metric-name prefixes every client is asked to push (comma-separated; * for all), like a "
            "client-metrics resource's metrics with an empty match. Empty: none (clients push nothing)."),
    Setting("client.metrics.default.interval.ms", _int, 300000,
            "How often clients push (the client-metrics resource's interval.ms).", low=100, high=3600000),
    Setting("telemetry.max.bytes", _int, 1048576,
            "Largest PushTelemetry metrics payload accepted (TELEMETRY_TOO_LARGE above).", low=1,
            high=INT32_MAX),
    # logging and metrics
    Setting("log.format", _choice("auto", "json", "text"), "auto",
            "Log line format: text (key=value) on a terminal and JSON otherwise when auto."),
    Setting("log.level", _choice("debug", "info", "warning", "error"), "info",
            "Minimum level of log events. The in-process test brokers (odradek.testing, the pytest "
            "fixtures) default to warning and log to Python's logging (docs/pytest.md)."),
    Setting("log.levels", _log_levels, "",
            "Levels per component on top of log.level, e.g. coordinator=debug,storage=warning "
            "(components: broker, server, coordinator, storage, topics, produce, producers, cli)."),
    Setting("metrics.port", _opt(_int), None,
            "Serve Prometheus metrics over HTTP on this port (0 picks one); unset: no endpoint.",
            low=0, high=65535),
    Setting("metrics.host", _str, "127.0.0.1", "Interface of the metrics endpoint."),
    # test control (fault injection, request capture): a testing tool, never for production
    Setting("odradek.control.listener", _control_address, "",
            "Serve the test control endpoint (faults, capture; `odradek control`) on HOST:PORT, or on "
            "odradek.control.host:PORT if only a port is given; empty: off. A testing tool with no "
            "authentication: never enable it on a production broker."),
    Setting("odradek.control.host", _str, "127.0.0.1",
            "Interface of the control endpoint when odradek.control.listener gives only a port. The "
            "container image sets 0.0.0.0: loopback inside a container is unreachable through a "
            "published port (-p)."),
    # the web console (web/console/): on by default, on loopback
    Setting("odradek.console.listener", _registry_listener, CONSOLE_DEFAULT,
            "Serve the web console (topics, messages, groups, lag, the offsets timeline, test control) "
            "on http://HOST:PORT (or HOST:PORT, or PORT on 127.0.0.1); empty: off. Started once the Kafka "
            "listeners answer; a port in use is logged and the broker runs on without it. The in-process "
            "test brokers leave it off unless asked (console=True). It has no authentication: bind it "
            "beyond loopback only where everyone who can reach it may see and change the broker's data."),
    Setting("odradek.console.read.only", _bool, False,
            "The console only shows: every page that changes something (create, delete, produce, "
            "reset offsets, fault control) is refused with 403 and its forms are hidden."),
    Setting("odradek.console.principal", _str, "User:ANONYMOUS",
            "The principal the console's actions run as: with an authorizer on, they pass the same ACL "
            "checks as a Kafka client's requests by this principal."),
    # the schema registry (Confluent's REST API; docs/SCHEMA_REGISTRY.md)
    Setting("odradek.schema.registry.listener", _registry_listener, "http://127.0.0.1:8081",
            "Serve the schema registry (Confluent Schema Registry's REST API) at http://HOST:PORT "
            "(HOST:PORT or a port work too); empty: off. The in-process test brokers turn it off "
            "unless asked (schema_registry=True). Started once the Kafka listeners answer; a port "
            "that cannot be bound is logged and the broker serves Kafka without it."),
    Setting("odradek.schema.registry.basic.auth.users", _basic_auth_users, "",
            "NAME:PASSWORD,...: the schema registry asks for HTTP basic auth with one of these "
            "users; empty: no authentication.", sensitive=True),
    Setting("kafkastore.topic", _str, "_schemas",
            "The compacted one-partition topic the schema registry keeps its state in, in "
            "Confluent's JSON (Confluent's setting of the same name)."),
    Setting("schema.compatibility.level", _choice("none", "backward", "backward_transitive", "forward",
                                                  "forward_transitive", "full", "full_transitive"),
            "backward", "The schema registry's compatibility level where neither the subject nor "
            "the global config sets one (Confluent's setting of the same name)."),
    Setting("odradek.control.capture.requests", _int, 0,
            "Keep the last N requests received, decoded, for tests to query (`captured`); 0: off. "
            "The in-process test brokers keep 1000.", low=0, high=10_000_000),
]

SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def env_to_name(var: str) -> str | None:
    """``KAFKA_LOG_DIRS`` -> ``log.dirs`` (official-image convention), else None."""
    if not var.startswith("KAFKA_"):
        return None
    body = var[len("KAFKA_"):].lower()
    return body.replace("___", "\0").replace("__", "\1").replace("_", ".").replace(
        "\0", "-").replace("\1", "_")


def read_properties(path: str | os.PathLike) -> dict[str, str]:
    """Java-style ``key=value`` (or ``key: value``) lines; ``#``/``!`` comments.

    A path that cannot be a config file -- a directory (the data dir given where the config goes),
    a binary file, text without a single ``key=value`` line -- is a ConfigError saying so, rather
    than a config of defaults that reads some other directory."""
    out: dict[str, str] = {}
    if Path(path).is_dir():
        raise ConfigError(f"{path} is a directory, not a config file (server.properties); "
                          "a data directory is given with --data-dir")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a config file (server.properties): it is not text") from None
    lines = iter(text.splitlines())
    separators = 0
    for line in lines:
        line = line.strip()
        while line.endswith("\\"):
            line = line[:-1] + next(lines, "").strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            out[line] = ""
        else:
            separators += 1
            out[line[:sep].strip()] = line[sep + 1:].strip()
    if out and not separators:
        raise ConfigError(f"{path} is not a config file (server.properties): no line is key=value")
    return out


LISTENER_PREFIX = "listener.name."


def scoped_setting(name: str) -> Setting | None:
    """The setting a ``listener.name.<l>.<key>`` or ``listener.name.<l>.<mechanism>.<key>`` name overrides.

    Kafka lower-cases the listener in these prefixes (``ListenerName.configPrefix``)
    and the mechanism too (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``).
    """
    if not name.startswith(LISTENER_PREFIX):
        return None
    parts = name[len(LISTENER_PREFIX):].split(".", 2)
    if len(parts) < 2:
        return None
    rest = ".".join(parts[1:])
    setting = SETTINGS_BY_NAME.get(rest)
    if setting is not None and setting.scope == "listener":
        return setting
    if len(parts) == 3:
        setting = SETTINGS_BY_NAME.get(parts[2])
        if setting is not None and setting.scope == "mechanism":
            return setting
    return None


class Config:
    """Effective settings with the source each value came from."""

    def __init__(self, values: dict[str, Any], sources: dict[str, str], unknown: dict[str, str],
                 scoped: dict[str, Any] | None = None):
        self._values = values
        self.sources = sources
        self.unknown = unknown
        # listener- and mechanism-prefixed overrides (``listener.name.<l>.<key>``), by full name
        self.scoped: dict[str, Any] = scoped or {}

    def for_listener(self, listener: str, name: str) -> Any:
        """``name`` as it applies to ``listener``: its ``listener.name.<l>.`` override, else the bare value."""
        key = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
        return self.scoped[key] if key in self.scoped else self._values[name]

    def listener_override(self, listener: str, name: str) -> bool:
        return f"{LISTENER_PREFIX}{listener.lower()}.{name}" in self.scoped

    def for_mechanism(self, listener: str, mechanism: str, name: str) -> Any:
        """``listener.name.<l>.<mechanism>.<name>``, else ``listener.name.<l>.<name>``, else ``name``."""
        key = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.{name}"
        return self.scoped[key] if key in self.scoped else self.for_listener(listener, name)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name, default)

    def items(self) -> Iterable[tuple[str, Any]]:
        return ((s.name, self._values[s.name]) for s in SETTINGS)

    def log_defaults(self) -> dict[str, Any]:
        """The broker-wide ``log.*`` settings that are set, for storage's LogConfig."""
        names = [s.name for s in SETTINGS if s.name.startswith("log.") or s.name in ("message.max.bytes",
                                                                                   *_CODEC_SETTINGS)]
        out = {n: self._values[n] for n in names if self._values[n] is not None}
        out["log.message.timestamp.type"] = {"createtime": "CreateTime",
                                             "logappendtime": "LogAppendTime"}[
            self._values["log.message.timestamp.type"]]
        return out

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self["listeners"])

    @property
    def data_dirs(self) -> list[Path]:
        return [Path(p.strip()).expanduser() for p in self["log.dirs"].split(",") if p.strip()]

    @classmethod
    def load(cls, properties_file: str | os.PathLike | None = None,
             overrides: Mapping[str, Any] | Iterable[str] = (),
             environ: Mapping[str, str] | None = None) -> Config:
        environ = os.environ if environ is None else environ
        layers: list[tuple[str, Mapping[str, Any]]] = []
        if properties_file is not None:
            layers.append((f"file:{properties_file}", read_properties(properties_file)))
        env_layer = {}
        for var, raw in environ.items():
            name = env_to_name(var)
            if name in SETTINGS_BY_NAME or (name is not None and scoped_setting(name) is not None):
                env_layer[name] = raw
        jaas_file = _jaas_file_from_opts(environ.get("KAFKA_OPTS", ""))
        if jaas_file and "java.security.auth.login.config" not in env_layer:
            env_layer["java.security.auth.login.config"] = jaas_file
        layers.append(("env", env_layer))
        layers.append(("override", _override_map(overrides)))

        values = {s.name: s.default for s in SETTINGS}
        sources = {s.name: "default" for s in SETTINGS}
        unknown: dict[str, str] = {}
        scoped: dict[str, Any] = {}
        for source, layer in layers:
            for name, raw in layer.items():
                setting = SETTINGS_BY_NAME.get(name)
                scoped_to = None
                if setting is None:
                    setting = scoped_to = scoped_setting(name.lower() if name.lower().startswith(
                        LISTENER_PREFIX) else name)
                    if setting is None:
                        unknown[name] = source
                        continue
                try:
                    value = setting.convert(raw)
                except (ValueError, TypeError) as exc:
                    shown = "[hidden]" if setting.sensitive else repr(raw)
                    raise ConfigError(f"invalid value {shown} for setting {name!r} "
                                      f"(from {source}): {exc}") from None
                if scoped_to is not None:
                    scoped[name.lower()] = value
                    sources[name.lower()] = source
                    continue
                values[name] = value
                sources[name] = source
        return cls(values, sources, unknown, scoped)


def _jaas_file_from_opts(opts: str) -> str | None:
    """``-Djava.security.auth.login.config=/etc/kafka/jaas.conf`` in KAFKA_OPTS (how Kafka's images
    are given a JAAS file)."""
    for word in opts.split():
        if word.startswith("-Djava.security.auth.login.config="):
            return word.split("=", 1)[1].strip("\"'")
    return None


def closest_setting(name: str) -> str | None:
    """The known setting an unknown name most likely meant (``num.partition`` -> ``num.partitions``).

    Like Kafka, an unknown name only warns (it may be meant for another tool reading the same
    file); the suggestion turns a silent typo into an obvious one."""
    import difflib  # noqa: PLC0415 - only for a typo's message; not a start's import

    matches = difflib.get_close_matches(name, SETTINGS_BY_NAME, n=1, cutoff=0.75)
    return matches[0] if matches else None


def _override_map(overrides: Mapping[str, Any] | Iterable[str]) -> dict[str, Any]:
    if isinstance(overrides, Mapping):
        return dict(overrides)
    out = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--override {item!r} is not key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out
