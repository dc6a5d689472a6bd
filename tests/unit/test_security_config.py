"""Listener and security settings as Kafka names them: protocol map, per-listener overrides,
TLS key and trust stores, SASL users (JAAS), principals; secrets never shown."""

from __future__ import annotations

import subprocess
import sys

import pytest

from odradek.broker.config import Config, ConfigError
from odradek.broker.security.jaas import JaasError, options_for, parse_jaas, parse_jaas_file
from odradek.broker.security.listeners import listener_specs
from odradek.broker.security.mechanism import SaslAuthenticationError, SaslSettings
from odradek.broker.security.plain import PlainSaslServer
from odradek.broker.security.principal import (
    PrincipalMappingError,
    parse_mapping_rules,
    ssl_principal,
    subject_dn,
)
from odradek.broker.security.served import build_listeners
from odradek.testing.security import make_security

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def _config(**settings) -> Config:
    return Config.load(None, overrides={k.replace("_", "."): v for k, v in settings.items()}, environ={})


def _load(settings: dict, environ: dict | None = None) -> Config:
    return Config.load(None, overrides=settings, environ=environ or {})


# --- listeners ----------------------------------------------------------------------------------

def test_default_protocol_map_names_each_protocol_after_itself():
    config = _load({"listeners": "PLAINTEXT://:9092,SSL://:9093,SASL_PLAINTEXT://:9094,SASL_SSL://:9095"})
    assert [(s.name, s.protocol) for s in listener_specs(config)] == [
        ("PLAINTEXT", "PLAINTEXT"), ("SSL", "SSL"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT"), ("SASL_SSL", "SASL_SSL")]


def test_custom_listener_names_need_the_map():
    config = _load({"listeners": "INTERNAL://:9092,EXTERNAL://:9093"})
    with pytest.raises(ConfigError, match="no security protocol for listener 'INTERNAL'"):
        listener_specs(config)
    config = _load({"listeners": "INTERNAL://:9092,EXTERNAL://:9093",
                    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL"})
    assert [s.protocol for s in listener_specs(config)] == ["PLAINTEXT", "SASL_SSL"]


@pytest.mark.parametrize("settings, message", [
    ({"listener.security.protocol.map": "A:TLS"}, "unknown security protocol"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "unique"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "different port"),
    ({"advertised.listeners": "SSL://h:1"}, "not a listener"),
    ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of"),
])
def test_bad_listener_settings_name_the_setting(settings, message):
    with pytest.raises(ConfigError, match=message):
        listener_specs(_load(settings))


def test_advertised_listener_belongs_to_its_listener():
    config = _load({"listeners": "PLAINTEXT://:9092,SSL://:9093",
                    "advertised.listeners": "SSL://broker.example:19093"})
    specs = {s.name: s for s in listener_specs(config)}
    assert specs["PLAINTEXT"].advertised is None
    assert (specs["SSL"].advertised.host, specs["SSL"].advertised.port) == ("broker.example", 19093)


def test_listener_prefixed_settings_win_for_their_listener_only():
    config = _load({"sasl.enabled.mechanisms": "PLAIN",
                    "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                    "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS})
    assert config.for_listener("SASL_SSL", "sasl.enabled.mechanisms") == "SCRAM-SHA-512"
    assert config.for_listener("SASL_PLAINTEXT", "sasl.enabled.mechanisms") == "PLAIN"
    assert config.for_mechanism("SASL_SSL", "PLAIN", "sasl.jaas.config") == PLAIN_JAAS
    assert config.for_mechanism("SASL_PLAINTEXT", "PLAIN", "sasl.jaas.config") == ""
    assert config.unknown == {}


def test_kafka_image_environment_variables_reach_listener_prefixed_settings():
    environ = {"KAFKA_LISTENERS": "SASL_SSL://:9094",
               "KAFKA_LISTENER_NAME_SASL__SSL_PLAIN_SASL_JAAS_CONFIG": PLAIN_JAAS,
               "KAFKA_LISTENER_NAME_SASL__SSL_SSL_CLIENT_AUTH": "required",
               "KAFKA_SASL_ENABLED_MECHANISMS": "PLAIN",
               "KAFKA_SSL_KEYSTORE_TYPE": "PEM"}
    config = Config.load(None, environ=environ)
    assert config.for_mechanism("SASL_SSL", "PLAIN", "sasl.jaas.config") == PLAIN_JAAS
    assert config.for_listener("SASL_SSL", "ssl.client.auth") == "required"
    assert config["ssl.keystore.type"] == "PEM"


def test_unknown_listener_prefixed_name_is_reported_unknown():
    config = _load({"listener.name.ssl.no.such.setting": "1"})
    assert "listener.name.ssl.no.such.setting" in config.unknown


# --- TLS ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    settings, client = make_security("SSL", tmp_path_factory.mktemp("tls"), client_auth="required")
    return settings, client


def _ssl_settings(tls_files, **extra) -> dict:
    settings, _client = tls_files
    return {**settings, "listeners": "SSL://127.0.0.1:0", **extra}


def test_tls_listener_without_a_key_refuses_to_start():
    """The defect of issue 23: an SSL listener started and served plaintext."""
    with pytest.raises(ConfigError, match="has no key: set ssl.keystore.location"):
        build_listeners(_load({"listeners": "SSL://127.0.0.1:0"}))


@pytest.mark.parametrize("store", ["JKS", "PKCS12"])
def test_jks_and_pkcs12_keystores_are_refused_naming_the_pem_settings(tls_files, tmp_path, store):
    jks = tmp_path / "server.keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed binary")
    settings = _ssl_settings(tls_files, **{"ssl.keystore.type": store, "ssl.keystore.location": str(jks),
                                           "ssl.keystore.password": "foobar"})
    with pytest.raises(ConfigError, match="ssl.keystore.type=PEM with ssl.keystore.location"):
        build_listeners(_load(settings))


def test_jks_default_type_with_a_pem_file_is_read_as_pem(tls_files):
    settings = _ssl_settings(tls_files)
    del settings["ssl.keystore.type"], settings["ssl.truststore.type"]
    assert build_listeners(_load(settings))[0].ssl_context is not None


def test_inline_pem_key_and_chain(tls_files, tmp_path):
    settings, _ = tls_files
    text = open(settings["ssl.keystore.location"]).read()
    key = text[:text.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")]
    chain = text[len(key):]
    inline = _ssl_settings(tls_files, **{"ssl.keystore.location": "", "ssl.keystore.key": " ".join(key.split("\n")),
                                         "ssl.keystore.certificate.chain": chain,
                                         "ssl.truststore.location": "",
                                         "ssl.truststore.certificates": open(settings["ssl.truststore.location"]).read()})
    assert build_listeners(_load(inline))[0].ssl_context is not None


def test_encrypted_key_needs_ssl_key_password(tls_files, tmp_path):
    from cryptography.hazmat.primitives import serialization

    settings, _ = tls_files
    text = open(settings["ssl.keystore.location"], "rb").read()
    end = text.index(b"-----END PRIVATE KEY-----") + len(b"-----END PRIVATE KEY-----")
    key = serialization.load_pem_private_key(text[:end], None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"s3cret"))
    store = tmp_path / "enc.pem"
    store.write_bytes(encrypted + text[end:])
    base = _ssl_settings(tls_files, **{"ssl.keystore.location": str(store)})
    assert build_listeners(_load({**base, "ssl.key.password": "s3cret"}))[0].ssl_context is not None
    with pytest.raises(ConfigError) as info:
        build_listeners(_load({**base, "ssl.key.password": "badpass123"}))
    assert "s3cret" not in str(info.value) and "badpass123" not in str(info.value)


def test_keystore_password_with_pem_is_refused(tls_files):
    with pytest.raises(ConfigError, match="not allowed with PEM"):
        build_listeners(_load(_ssl_settings(tls_files, **{"ssl.keystore.password": "x"})))


def test_client_auth_without_truststore_is_refused(tls_files):
    settings = _ssl_settings(tls_files, **{"ssl.truststore.location": ""})
    with pytest.raises(ConfigError, match="no truststore"):
        build_listeners(_load(settings))


def test_ssl_client_auth_applies_to_sasl_ssl_only_listener_prefixed(tls_files):
    import ssl

    settings, _ = tls_files
    base = {**settings, "listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS, "ssl.client.auth": "required"}
    assert build_listeners(_load(base))[0].ssl_context.verify_mode == ssl.CERT_NONE
    prefixed = {**base, "listener.name.sasl_ssl.ssl.client.auth": "required"}
    assert build_listeners(_load(prefixed))[0].ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_enabled_protocols(tls_files):
    import ssl

    ctx = build_listeners(_load(_ssl_settings(tls_files, **{"ssl.enabled.protocols": "TLSv1.3"})))[0].ssl_context
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match="ssl.enabled.protocols"):
        build_listeners(_load(_ssl_settings(tls_files, **{"ssl.enabled.protocols": "SSLv3"})))


# --- SASL set-up ------------------------------------------------------------------------------------

def test_sasl_listener_with_only_gssapi_refuses_to_start():
    with pytest.raises(ConfigError, match="sasl.enabled.mechanisms"):
        build_listeners(_load({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}))


def test_gssapi_is_dropped_from_the_enabled_list():
    served = build_listeners(_load({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                    "sasl.enabled.mechanisms": "GSSAPI,PLAIN", "sasl.jaas.config": PLAIN_JAAS}))
    assert served[0].sasl.mechanisms == ["PLAIN"]


def test_plain_without_users_refuses_to_start():
    with pytest.raises(ConfigError, match="no user is configured"):
        build_listeners(_load({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}))


def test_unserved_mechanism_refuses_to_start():
    with pytest.raises(ConfigError, match="is not served"):
        build_listeners(_load({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "NTLM"}))


def test_reauth_ms_per_mechanism():
    served = build_listeners(_load({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "connections.max.reauth.ms": "1000",
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000"}))
    assert served[0].sasl.reauth_ms == {"PLAIN": 5000}


# --- JAAS ----------------------------------------------------------------------------------------------

def test_jaas_options_with_quotes_escapes_and_comments():
    modules = parse_jaas('// users\norg.apache.kafka.common.security.plain.PlainLoginModule required\n'
                         '  user_alice="a\\"b;c" /* inline */ user_bob=bare-word;')
    assert modules[0].flag == "required"
    assert modules[0].options == {"user_alice": 'a"b;c', "user_bob": "bare-word"}
    assert "a\"b" not in repr(modules[0])  # passwords stay out of reprs


@pytest.mark.parametrize("text", ["", "Module required user_a=", "Module maybe;", "Module required a=\"x\"",
                                  "Module required =x;"])
def test_bad_jaas_is_refused_without_quoting_values(text):
    with pytest.raises(JaasError) as info:
        parse_jaas(text)
    assert "x\"" not in str(info.value)


def test_jaas_file_sections_and_options_for_a_mechanism():
    sections = parse_jaas_file(
        "KafkaServer {\n  org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
        f"  {PLAIN_JAAS}\n}};\nClient {{ x required; }};")
    assert set(sections) == {"KafkaServer", "Client"}
    assert options_for(sections["KafkaServer"], "PLAIN")["user_alice"] == "alice-secret"
    assert options_for(sections["KafkaServer"], "SCRAM-SHA-256") == {}


# --- PLAIN -----------------------------------------------------------------------------------------------

def _plain_server() -> PlainSaslServer:
    return PlainSaslServer(SaslSettings("SASL_SSL", options_for(parse_jaas(PLAIN_JAAS), "PLAIN")))


@pytest.mark.parametrize("authzid", ["", "alice"])
def test_plain_accepts_an_empty_or_matching_authzid(authzid):
    server = _plain_server()
    assert server.evaluate(f"{authzid}\0alice\0alice-secret".encode()) == b""
    assert server.is_complete() and server.principal() == "User:alice"
    assert server.session_lifetime_ms() is None


def test_plain_username_password_options_are_not_a_user_by_themselves():
    server = PlainSaslServer(SaslSettings("L", {"username": "admin", "password": "admin-secret"}))
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        server.evaluate(b"\0admin\0admin-secret")


def test_plain_second_message_is_refused():
    server = _plain_server()
    server.evaluate(b"\0alice\0alice-secret")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"\0alice\0alice-secret")


# --- principals ----------------------------------------------------------------------------------------

def test_subject_dn_matches_rfc2253_as_java_prints_it():
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                      x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Org, Inc."),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "#Eng"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "client+1")])
    # getpeercert()'s shape: RDNs in certificate order, OpenSSL's long names
    subject = ((("countryName", "US"),), (("stateOrProvinceName", "CA"),),
               (("organizationName", "Org, Inc."),), (("organizationalUnitName", "#Eng"),),
               (("commonName", "client+1"),))
    assert subject_dn(subject) == name.rfc4514_string() == "CN=client\\+1,OU=\\#Eng,O=Org\\, Inc.,ST=CA,C=US"


def test_subject_dn_writes_attributes_without_a_keyword_as_oid_and_der_hex():
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    name = x509.Name([x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    subject = ((("emailAddress", "a@b.c"),), (("commonName", "x"),))
    assert subject_dn(subject) == "CN=x,1.2.840.113549.1.9.1=#16056140622e63"
    assert name.rfc4514_string().startswith("CN=x,")


def test_principal_mapping_rules():
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*),.*$/$1/,DEFAULT")
    assert ssl_principal("CN=Kafka,OU=ServiceUsers,O=Org", rules) == "User:kafka"
    assert ssl_principal("CN=other,O=Org", rules) == "User:other"
    assert ssl_principal("O=Org", rules) == "User:O=Org"
    with pytest.raises(PrincipalMappingError):
        ssl_principal("O=Org", parse_mapping_rules("RULE:^CN=(.*)$/$1/U"))
    with pytest.raises(ValueError):
        parse_mapping_rules("RULE:broken")


# --- secrets stay secret ---------------------------------------------------------------------------------

def test_print_config_hides_passwords_and_jaas(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(f"sasl.jaas.config={PLAIN_JAAS}\nlistener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}\n"
                     "ssl.key.password=hunter2\nssl.keystore.key=-----BEGIN PRIVATE KEY----- abc\n")
    out = subprocess.run([sys.executable, "-m", "odradek.broker.cli", "serve", str(props), "--print-config"],
                         capture_output=True, text=True, check=True, env={"PATH": "/usr/bin"}).stdout
    assert "alice-secret" not in out and "hunter2" not in out and "abc" not in out
    assert "listener.name.sasl_ssl.plain.sasl.jaas.config" in out and "[hidden]" in out


def test_the_secrets_are_marked_sensitive():
    from odradek.broker.config import SETTINGS

    assert {s.name for s in SETTINGS if s.sensitive} >= {
        "sasl.jaas.config", "ssl.key.password", "ssl.keystore.password", "ssl.keystore.key",
        "ssl.truststore.password"}


def test_describe_configs_reports_secrets_sensitive_without_a_value():
    from odradek.broker.wire_client import SyncClient
    from odradek.testing import ThreadedBroker

    with ThreadedBroker(overrides={"sasl.jaas.config": PLAIN_JAAS}) as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        with SyncClient(host, int(port)) as c:
            answer = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                      "configuration_keys": ["sasl.jaas.config", "num.partitions"]}],
                                       "include_synonyms": True, "include_documentation": False})
    configs = {e.name: e for e in answer.results[0].configs}
    assert configs["sasl.jaas.config"].is_sensitive and configs["sasl.jaas.config"].value is None
    assert all(s.value is None for s in configs["sasl.jaas.config"].synonyms)
    assert not configs["num.partitions"].is_sensitive and configs["num.partitions"].value == "1"


def test_jaas_file_from_kafka_opts_listener_section_first(tmp_path):
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(
        'sasl_ssl.KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  user_ssl_user="s";\n};\n'
        'KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="admin-secret" user_admin="admin-secret";\n};\n')
    environ = {"KAFKA_OPTS": f"-Xmx1G -Djava.security.auth.login.config={jaas} -Dfoo=bar",
               "KAFKA_LISTENERS": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
               "KAFKA_SASL_ENABLED_MECHANISMS": "PLAIN"}
    config = Config.load(None, environ=environ)
    assert config["java.security.auth.login.config"] == str(jaas)
    # the SASL_SSL listener needs a key to be built: look at the SASL side alone
    from odradek.broker.security.served import _sasl_listener

    assert _sasl_listener(config, "SASL_SSL", None, None).settings["PLAIN"].jaas_options == {"user_ssl_user": "s"}
    plaintext = _sasl_listener(config, "SASL_PLAINTEXT", None, None).settings["PLAIN"].jaas_options
    assert plaintext["user_admin"] == "admin-secret"


def test_sasl_jaas_config_wins_over_the_jaas_file(tmp_path):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text('KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required user_x="y"; };')
    config = _load({"java.security.auth.login.config": str(jaas), "sasl.enabled.mechanisms": "PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    from odradek.broker.security.served import _sasl_listener

    assert "user_x" not in _sasl_listener(config, "SASL_PLAINTEXT", None, None).settings["PLAIN"].jaas_options
