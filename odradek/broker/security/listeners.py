"""Listeners with their security protocol, and what each advertises (Kafka's ``ListenerInfo``,
``KafkaConfig.effectiveListenerSecurityProtocolMap`` and ``listenerSecurityProtocolMap`` checks).

A listener is a name, an address and one of four security protocols; the
name is mapped to its protocol by ``listener.security.protocol.map`` (the
protocol names map to themselves by default).  A connection remembers the
listener it arrived on: Metadata and FindCoordinator answer with that
listener's advertised address, so a client that bootstrapped on the TLS port
only ever learns TLS addresses.
"""

from __future__ import annotations

from ...protocol.lean_dataclass import dataclass
from ..config import Config, ConfigError, Listener, parse_listeners

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


@dataclass(frozen=True)
class ListenerSpec:
    """One configured listener: where it binds, its protocol, and what it advertises (if set)."""

    name: str
    protocol: str
    host: str
    port: int
    advertised: Listener | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}; unknown protocols and duplicate names are errors."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, protocol = part.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(f"listener.security.protocol.map: {part!r} is not NAME:PROTOCOL")
        if protocol not in PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {part!r}: unknown security protocol "
                              f"{protocol!r} (one of {', '.join(PROTOCOLS)})")
        if name in out:
            raise ConfigError(f"listener.security.protocol.map: listener {name!r} is mapped twice")
        out[name] = protocol
    return out


def listener_specs(config: Config) -> list[ListenerSpec]:
    """Every listener with its protocol and advertised address; a ConfigError names what is wrong."""
    protocols = parse_protocol_map(config["listener.security.protocol.map"])
    listeners = config.listeners
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"listeners: each listener name must be unique: {config['listeners']!r}")
    ports = [(listener.host, listener.port) for listener in listeners if listener.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"listeners: each listener must have a different port: {config['listeners']!r}")
    advertised: dict[str, Listener] = {}
    if config["advertised.listeners"]:
        try:
            parsed = parse_listeners(config["advertised.listeners"])
        except ValueError as exc:
            raise ConfigError(f"advertised.listeners: {exc}") from None
        for item in parsed:
            if item.name not in names:
                raise ConfigError(f"advertised.listeners: {item.name!r} is not a listener in listeners "
                                  f"({', '.join(names)})")
            advertised[item.name] = item
    specs = []
    for listener in listeners:
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError(f"listeners: no security protocol for listener {listener.name!r}: add "
                              f"{listener.name}:<PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL> to "
                              f"listener.security.protocol.map")
        specs.append(ListenerSpec(listener.name, protocol, listener.host, listener.port,
                                  advertised.get(listener.name)))
    _check_inter_broker(config, specs)
    return specs


def _check_inter_broker(config: Config, specs: list[ListenerSpec]) -> None:
    """Kafka's checks of the inter-broker settings, kept only where a single node can fail them."""
    name, protocol = config["inter.broker.listener.name"], config["security.inter.broker.protocol"]
    if name and protocol:
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                          "should be set.")
    if name and name.upper() not in {s.name for s in specs}:
        raise ConfigError(f"inter.broker.listener.name: {name!r} is not a listener "
                          f"({', '.join(s.name for s in specs)})")
    if protocol and protocol.upper() not in PROTOCOLS:
        raise ConfigError(f"security.inter.broker.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")


@dataclass(frozen=True)
class Endpoint:
    """What clients are told: this node's id, host and port (one per listener)."""

    node_id: int
    host: str
    port: int
