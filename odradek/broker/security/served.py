"""What each listener needs at run time: its TLS context, SASL settings and principal rules.

Built once at start-up from the configuration, so every mistake (a missing
key, a JKS store, a SASL listener without users) stops the broker with a
message naming the setting, before a port is opened.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ...protocol.lean_dataclass import dataclass
from ..config import Config, ConfigError
from .listeners import ListenerSpec, listener_specs
from .principal import parse_mapping_rules

if TYPE_CHECKING:
    import ssl

    from .authenticator import SaslListener

log = structlog.get_logger("odradek.security")

UNSERVED_MECHANISMS = {"GSSAPI": "Kerberos is not supported"}


@dataclass
class ServedListener:
    spec: ListenerSpec
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslListener | None = None
    principal_rules: list | None = None
    node_id: int = -1  # the node it serves (``cluster``: each node has its own listeners)

    @property
    def name(self) -> str:
        return self.spec.name


def build_listeners(config: Config, credentials: Any = None,
                    now_ms: Callable[[], int] | None = None) -> list[ServedListener]:
    out = []
    for spec in listener_specs(config):
        served = ServedListener(spec)
        if spec.tls:
            from .tls import server_context  # noqa: PLC0415 - TLS code only for a TLS listener

            served.ssl_context = server_context(config, spec.name, spec.protocol)
            try:
                served.principal_rules = parse_mapping_rules(
                    config.for_listener(spec.name, "ssl.principal.mapping.rules"))
            except ValueError as exc:
                raise ConfigError(f"ssl.principal.mapping.rules (listener {spec.name}): {exc}") from None
        if spec.sasl:
            served.sasl = _sasl_listener(config, spec.name, credentials, now_ms)
        out.append(served)
    return out


def _sasl_listener(config: Config, listener: str, credentials: Any,
                   now_ms: Callable[[], int] | None) -> SaslListener:
    # SASL code only for a SASL listener (a PLAINTEXT broker starts without it): importing a
    # mechanism's module registers it
    from . import oauthbearer, plain, scram  # noqa: F401, PLC0415
    from .authenticator import SaslListener  # noqa: PLC0415
    from .mechanism import MECHANISMS, SaslSettings  # noqa: PLC0415

    known = MECHANISMS
    enabled = [m.strip().upper() for m in config.for_listener(listener, "sasl.enabled.mechanisms").split(",")
               if m.strip()]
    mechanisms = []
    for mechanism in enabled:
        if mechanism in UNSERVED_MECHANISMS:
            log.warning("sasl.mechanism_not_served", listener=listener, mechanism=mechanism,
                        reason=UNSERVED_MECHANISMS[mechanism])
            continue
        if mechanism not in known:
            raise ConfigError(f"sasl.enabled.mechanisms (listener {listener}): {mechanism} is not served; "
                              f"served: {', '.join(sorted(known))}")
        mechanisms.append(mechanism)
    if not mechanisms:
        raise ConfigError(f"listener {listener} uses SASL: sasl.enabled.mechanisms "
                          f"({config.for_listener(listener, 'sasl.enabled.mechanisms')!r}) enables no served "
                          f"mechanism; set it (or listener.name.{listener.lower()}.sasl.enabled.mechanisms) to "
                          f"some of {', '.join(sorted(known))}")
    settings, reauth = {}, {}
    for mechanism in mechanisms:
        options = _jaas_options(config, listener, mechanism)
        if mechanism == "PLAIN" and not plain.has_users(options):
            raise ConfigError(
                f"listener {listener} enables PLAIN but no user is configured: set "
                f"listener.name.{listener.lower()}.plain.sasl.jaas.config (or sasl.jaas.config) to "
                f"'org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\";'")
        if mechanism == "OAUTHBEARER":  # its unsecuredValidator* options, checked now rather than at login
            try:
                oauthbearer.ValidatorOptions.from_jaas(options)
            except ValueError as exc:
                raise ConfigError(f"listener {listener}: listener.name.{listener.lower()}.oauthbearer."
                                  f"sasl.jaas.config: {exc}") from None
        settings[mechanism] = SaslSettings(listener, options, credentials, now_ms)
        reauth[mechanism] = config.for_mechanism(listener, mechanism, "connections.max.reauth.ms")
    return SaslListener(listener, mechanisms, settings, reauth,
                        max_receive_size=config.for_listener(listener, "sasl.server.max.receive.size"),
                        failed_delay_ms=config["connection.failed.authentication.delay.ms"])


def _jaas_options(config: Config, listener: str, mechanism: str) -> dict[str, str]:
    """The JAAS options for (listener, mechanism), in Kafka's order (``JaasContext.loadServerContext``):
    ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (here also the bare ``sasl.jaas.config``),
    else the JAAS file's ``<l>.KafkaServer`` section, else its ``KafkaServer`` section."""
    from .jaas import JaasError, options_for, parse_jaas, parse_jaas_file  # noqa: PLC0415 - SASL only

    text = config.for_mechanism(listener, mechanism, "sasl.jaas.config")
    if text:
        try:
            return options_for(parse_jaas(text), mechanism)
        except JaasError as exc:
            raise ConfigError(f"sasl.jaas.config for listener {listener}, mechanism {mechanism}: {exc}") from None
    path = config["java.security.auth.login.config"]
    if not path:
        return {}
    try:
        sections = parse_jaas_file(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"java.security.auth.login.config: {exc}") from None
    except JaasError as exc:
        raise ConfigError(f"java.security.auth.login.config ({path}): {exc}") from None
    modules = sections.get(f"{listener.lower()}.KafkaServer") or sections.get("KafkaServer")
    return options_for(modules, mechanism) if modules else {}
