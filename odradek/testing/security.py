"""Secured test brokers with one argument: a throw-away CA, certificates and a SASL user.

    async with Broker(security="SASL_SSL") as b:
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, **b.client.kafka_python())

``make_security`` writes a certificate authority, a server certificate for
``localhost``/``127.0.0.1`` and a client certificate (made with ``trustme``,
the ``tls`` extra) into a directory, and returns the broker settings and a
``ClientSecurity`` holding what a client needs: the CA file, the client
certificate and key, the user and password, and ready-made settings for
kafka-python, aiokafka and confluent-kafka.
"""

from __future__ import annotations

import dataclasses
import secrets
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = ("PLAIN", *SCRAM)  # all enabled on a test broker's SASL listener, for every user


@dataclass
class ClientSecurity:
    """How a client reaches a secured test broker."""

    security_protocol: str = "PLAINTEXT"
    ca_file: str | None = None  # the throw-away CA: trust it to verify the broker
    cert_file: str | None = None  # a client certificate the CA signed (for ssl.client.auth)
    key_file: str | None = None
    client_principal: str | None = None  # what the broker makes of the client certificate
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    users: dict[str, str] = field(default_factory=dict)  # every PLAIN user the broker knows

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def ssl_context(self, client_certificate: bool = True) -> ssl.SSLContext | None:
        """A context that verifies the broker against the CA (and presents the client certificate)."""
        if not self.tls:
            return None
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if client_certificate and self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def wire(self) -> dict[str, Any]:
        """Keyword arguments for ``odradek.broker.wire_client.SyncClient`` / ``AsyncClient.connect``."""
        out: dict[str, Any] = {"ssl_context": self.ssl_context()}
        if self.sasl:  # the wire client speaks PLAIN, which a test broker enables for every user
            out["sasl_plain"] = (self.username, self.password)
        return out

    def using(self, mechanism: str) -> ClientSecurity:
        """The same user with another SASL mechanism (a test broker enables PLAIN and both SCRAMs)."""
        return dataclasses.replace(self, sasl_mechanism=mechanism)

    def kafka_python(self) -> dict[str, Any]:
        """Settings for kafka-python's KafkaProducer / KafkaConsumer / KafkaAdminClient."""
        out: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.tls:
            out.update(ssl_cafile=self.ca_file, ssl_check_hostname=True)
            if self.cert_file:
                out.update(ssl_certfile=self.cert_file, ssl_keyfile=self.key_file)
        if self.sasl:
            out.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        return out

    def aiokafka(self) -> dict[str, Any]:
        """Settings for aiokafka's AIOKafkaProducer / AIOKafkaConsumer."""
        out: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.tls:
            out["ssl_context"] = self.ssl_context()
        if self.sasl:
            out.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        return out

    def confluent(self) -> dict[str, Any]:
        """Settings for confluent-kafka (librdkafka names)."""
        out: dict[str, Any] = {"security.protocol": self.security_protocol}
        if self.tls:
            out["ssl.ca.location"] = self.ca_file
            if self.cert_file:
                out.update({"ssl.certificate.location": self.cert_file, "ssl.key.location": self.key_file})
        if self.sasl:
            out.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                        "sasl.password": self.password})
        return out


def _pkcs8(key_pem: bytes) -> bytes:
    """Kafka's PEM keystores want PKCS#8 keys; trustme writes the traditional form."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _subject_principal(cert_pem: bytes) -> str:
    from cryptography import x509

    return "User:" + x509.load_pem_x509_certificate(cert_pem).subject.rfc4514_string()


def make_security(protocol: str, directory: str | Path, *, client_auth: str = "none",
                  mechanism: str = "PLAIN", username: str = "alice", password: str | None = None,
                  users: dict[str, str] | None = None) -> tuple[dict[str, str], ClientSecurity]:
    """Broker settings (one listener of ``protocol`` on 127.0.0.1, port 0) and the client's side.

    ``client_auth`` (none/requested/required) asks TLS clients for a
    certificate; a SASL listener enables PLAIN, SCRAM-SHA-256 and
    SCRAM-SHA-512, the client uses ``mechanism``; ``username`` (and any further
    ``users``) are PLAIN users, and SCRAM users of both mechanisms once the
    test ``Broker`` starts (``ClientSecurity.users``).
    """
    protocol = protocol.upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security {protocol!r}: one of {', '.join(PROTOCOLS)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    listener = protocol.lower()
    overrides = {"listeners": f"{protocol}://127.0.0.1:0"}
    client = ClientSecurity(protocol)
    if protocol in ("SSL", "SASL_SSL"):
        try:
            import trustme
        except ImportError as exc:  # pragma: no cover - the message is the point
            raise ImportError("TLS test brokers need trustme and cryptography: pip install 'odradek[tls]'") from exc
        ca = trustme.CA()
        server = ca.issue_cert("localhost", "127.0.0.1")
        keystore = directory / "server.pem"
        keystore.write_bytes(_pkcs8(server.private_key_pem.bytes()) + b"".join(
            blob.bytes() for blob in server.cert_chain_pems))
        ca_file = directory / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        issued = ca.issue_cert("client.test", common_name="client")
        cert_file, key_file = directory / "client.pem", directory / "client.key"
        cert_file.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
        key_file.write_bytes(_pkcs8(issued.private_key_pem.bytes()))
        keystore.chmod(0o600)
        key_file.chmod(0o600)
        overrides.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
                          "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file)})
        # Kafka applies ssl.client.auth to SASL_SSL only when listener-prefixed
        key = "ssl.client.auth" if protocol == "SSL" else f"listener.name.{listener}.ssl.client.auth"
        overrides[key] = client_auth
        client.ca_file = str(ca_file)
        if client_auth != "none":
            client.cert_file, client.key_file = str(cert_file), str(key_file)
            client.client_principal = _subject_principal(issued.cert_chain_pems[0].bytes())
    if protocol.startswith("SASL_"):
        password = password or secrets.token_hex(8)
        all_users = {username: password, **(users or {})}
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism {mechanism!r}: one of {', '.join(MECHANISMS)}")
        overrides["sasl.enabled.mechanisms"] = ",".join(MECHANISMS)
        options = " ".join(f'user_{u}="{_quote(p)}"' for u, p in all_users.items())
        overrides[f"listener.name.{listener}.plain.sasl.jaas.config"] = f"{PLAIN_MODULE} required {options};"
        client.sasl_mechanism, client.username, client.password, client.users = (
            mechanism, username, password, all_users)
    return overrides, client


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
