"""TLS for SSL and SASL_SSL listeners, configured with Kafka's ``ssl.*`` names (``DefaultSslEngineFactory``).

Only PEM key and trust stores exist here (Python's ``ssl`` reads PEM): a
JKS or PKCS12 store stops start-up with a message naming the PEM settings.
The key and chain come from one file (``ssl.keystore.location``) or inline
(``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``); inline text is
written to a private temporary file for OpenSSL to read, then removed.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from pathlib import Path

import structlog

from ..config import Config, ConfigError

log = structlog.get_logger("odradek.security")

_VERSIONS = {"TLSV1": ssl.TLSVersion.TLSv1, "TLSV1.1": ssl.TLSVersion.TLSv1_1,
             "TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_PEM_HINT = ("use PEM: ssl.keystore.type=PEM with ssl.keystore.location (private key and certificate "
             "chain in one PEM file; ssl.key.password if the key is encrypted) or ssl.keystore.key + "
             "ssl.keystore.certificate.chain, and ssl.truststore.type=PEM with ssl.truststore.location or "
             "ssl.truststore.certificates")


def server_context(config: Config, listener: str, protocol: str) -> ssl.SSLContext:
    """The listener's server-side ``SSLContext``; a ConfigError names the setting at fault."""
    def get(name: str):
        return config.for_listener(listener, name)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_key(ctx, listener, get)
    _versions(ctx, listener, get("ssl.enabled.protocols"))
    client_auth = get("ssl.client.auth")
    if protocol == "SASL_SSL" and not config.listener_override(listener, "ssl.client.auth"):
        # Kafka: on SASL_SSL only the listener-prefixed setting asks for client certificates
        if client_auth != "none":
            log.warning("tls.client_auth_ignored", listener=listener,
                        note="ssl.client.auth applies to SASL_SSL only as listener.name.<listener>.ssl.client.auth")
        client_auth = "none"
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}[client_auth]
    if client_auth != "none":
        _load_trust(ctx, listener, get)
    if get("ssl.cipher.suites"):
        log.warning("tls.cipher_suites_ignored", listener=listener,
                    note="Java cipher suite names are not applied; OpenSSL's defaults are used")
    return ctx


def _setting(listener: str, name: str) -> str:
    return f"{name} (listener {listener})"


def _check_type(listener: str, name: str, value: str, location: str) -> None:
    kind = value.strip().upper()
    if kind == "PEM":
        return
    if name == "ssl.keystore.type" and kind == "JKS" and location and _looks_pem(location):
        return  # the type left at Kafka's default but the file is PEM: read it as what it is
    if name == "ssl.truststore.type" and kind == "JKS" and location and _looks_pem(location):
        return
    raise ConfigError(f"{_setting(listener, name)} is {value!r}: {kind} stores are not supported; {_PEM_HINT}")


def _looks_pem(path: str) -> bool:
    try:
        return b"-----BEGIN " in Path(path).read_bytes()[:65536]
    except OSError:
        return False


def _load_key(ctx: ssl.SSLContext, listener: str, get) -> None:
    location, key, chain = get("ssl.keystore.location"), get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    password = get("ssl.key.password") or None
    if not (location or key or chain):
        raise ConfigError(f"listener {listener} uses TLS but has no key: set ssl.keystore.location "
                          f"(or listener.name.{listener.lower()}.ssl.keystore.location); {_PEM_HINT}")
    _check_type(listener, "ssl.keystore.type", get("ssl.keystore.type"), location)
    if get("ssl.keystore.password") and get("ssl.keystore.type").strip().upper() == "PEM":
        raise ConfigError(f"{_setting(listener, 'ssl.keystore.password')} is not allowed with PEM keystores "
                          f"(use ssl.key.password for an encrypted key), as in Kafka")
    try:
        if location:
            if key or chain:
                raise ConfigError(f"listener {listener}: set either ssl.keystore.location or "
                                  f"ssl.keystore.key + ssl.keystore.certificate.chain, not both")
            ctx.load_cert_chain(location, password=password)
            return
        if not (key and chain):
            raise ConfigError(f"listener {listener}: ssl.keystore.key and ssl.keystore.certificate.chain "
                              f"go together")
        with _private_file(_pem_text(key) + "\n" + _pem_text(chain)) as path:
            ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ConfigError(f"listener {listener}: cannot load the key and certificate chain "
                          f"({'ssl.keystore.location ' + location if location else 'ssl.keystore.key'}): "
                          f"{exc.reason or exc} (a wrong or missing ssl.key.password?)") from None
    except OSError as exc:
        raise ConfigError(f"{_setting(listener, 'ssl.keystore.location')}: {exc}") from None


def _load_trust(ctx: ssl.SSLContext, listener: str, get) -> None:
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if not (location or inline):
        raise ConfigError(f"listener {listener}: ssl.client.auth asks for client certificates but no "
                          f"truststore is set: ssl.truststore.type=PEM with ssl.truststore.location or "
                          f"ssl.truststore.certificates")
    _check_type(listener, "ssl.truststore.type", get("ssl.truststore.type"), location)
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        else:
            ctx.load_verify_locations(cadata=_pem_text(inline))
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"listener {listener}: cannot load the truststore: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{_setting(listener, 'ssl.truststore.location')}: {exc}") from None


def _versions(ctx: ssl.SSLContext, listener: str, text: str) -> None:
    wanted = [v.strip().upper() for v in text.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in _VERSIONS]
    if unknown or not wanted:
        raise ConfigError(f"{_setting(listener, 'ssl.enabled.protocols')}: {text!r}: use TLSv1.2, TLSv1.3 "
                          f"(or TLSv1, TLSv1.1)")
    versions = sorted(_VERSIONS[v] for v in wanted)
    try:
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    except (ValueError, ssl.SSLError) as exc:
        raise ConfigError(f"{_setting(listener, 'ssl.enabled.protocols')}: {exc}") from None


def _pem_text(text: str) -> str:
    """PEM pasted into one property line: Kafka tolerates the line breaks being spaces."""
    if "\n" in text.strip():
        return text
    blocks = re.findall(r"(-----BEGIN [A-Z ]+-----)(.*?)(-----END [A-Z ]+-----)", text, re.S)
    out = []
    for begin, body, end in blocks:
        flat = "".join(body.split())
        out.append("\n".join([begin, *(flat[i:i + 64] for i in range(0, len(flat), 64)), end]))
    return "\n".join(out) or text


class _private_file:
    """A file only this user can read, removed on exit: OpenSSL loads keys from files."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.dir: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> str:
        self.dir = tempfile.TemporaryDirectory(prefix="odradek-tls-")
        path = os.path.join(self.dir.name, "key.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.text)
        return path

    def __exit__(self, *exc) -> None:
        self.dir.cleanup()
