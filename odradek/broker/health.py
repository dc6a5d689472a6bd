"""``odradek health``: a real ApiVersions round trip, for container health checks."""

from __future__ import annotations

import ssl

from .config import WILDCARD_HOSTS, Config
from .datadir import read_bound
from .wire_client import SyncClient


def local_bootstrap(config: Config) -> str:
    """The first listener the running broker bound, as reachable from this machine (a wildcard
    means loopback). The broker records what it bound in its data dir, so a listener moved by a
    command-line override (which a container's HEALTHCHECK never sees) is still found; without
    that record, the first configured listener."""
    bound = read_bound(config.data_dirs[0]) if config.data_dirs else []
    if bound:
        host, port = bound[0]
    else:
        host, port = config.listeners[0].host, config.listeners[0].port
    host = "127.0.0.1" if host in WILDCARD_HOSTS else host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _split(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def first_listener_tls(config: Config) -> bool:
    """Whether the listener ``local_bootstrap`` probes speaks TLS (SSL, SASL_SSL).  ApiVersions is
    answered before SASL authentication, so a SASL listener needs no credentials."""
    from .security.listeners import listener_specs

    return listener_specs(config)[0].tls


def _unverified_tls() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # a liveness probe of our own broker, not a client trusting it
    return ctx


def check(bootstrap: str, timeout: float = 5.0, tls: bool = False) -> tuple[bool, str]:
    """(healthy, message): healthy when ApiVersions v0 answers with error 0."""
    host, port = _split(bootstrap)
    try:
        with SyncClient(host, port, timeout=timeout, ssl_context=_unverified_tls() if tls else None) as client:
            response = client.request(18, 0, {})
    except (OSError, ValueError) as exc:
        return False, f"unhealthy: {bootstrap}: {exc}"
    if response.error_code != 0:
        return False, f"unhealthy: {bootstrap}: ApiVersions error {response.error_code}"
    return True, f"healthy: {bootstrap} serves {len(response.api_keys)} APIs"
