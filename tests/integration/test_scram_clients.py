"""Real clients over TCP with SCRAM users made by the admin APIs and with OAUTHBEARER unsecured
tokens: users made with confluent-kafka's and kafka-python's admin clients log in (after a
restart) until deleted; kafka-python never gets in with a wrong SCRAM password or an unknown
user; kafka-python, aiokafka and confluent-kafka produce and consume with unsecured tokens.
(Produce/consume/commit with SCRAM over SASL_PLAINTEXT and SASL_SSL, and refusals for
aiokafka and confluent-kafka: ``test_security_clients.py``.)

Brokers come from the testing helper's one argument (``security={"protocol": ..., "mechanism": ...}``),
which also creates the SCRAM users, so these tests are what a user's suite would write.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
import uuid

import pytest

from odradek.testing.handle import BrokerHandle
from tests.integration.group_helpers import kafka_python_subscriber

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MESSAGES = 10


def _topic(b) -> str:
    name = f"scram-{uuid.uuid4().hex[:8]}"
    b.create_topic(name, partitions=1)
    return name


def _kafka_python_round_trip(bootstrap: str, settings: dict, topic: str) -> list[bytes]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **settings)
    for i in range(MESSAGES):
        producer.send(topic, f"k{i}".encode())
    producer.flush(timeout=30)
    producer.close(timeout=5)
    consumer = kafka_python_subscriber(topic, bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:6]}",
                                       auto_offset_reset="earliest", enable_auto_commit=False, **settings)
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < MESSAGES and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            seen += [r.value for r in records]
    consumer.commit()
    consumer.close()
    return seen


def _confluent_round_trip(settings: dict, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    producer = Producer(settings)
    for i in range(MESSAGES):
        producer.produce(topic, f"c{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < MESSAGES and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return seen


# --- refused credentials ------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["SCRAM-SHA-256", "SCRAM-SHA-512"])
def scram_plaintext(request):
    with BrokerHandle(security={"protocol": "SASL_PLAINTEXT", "mechanism": request.param}) as b:
        yield b


BAD = [("alice", "wrong"), ("mallory", "whatever")]  # a wrong password; an unknown user


@pytest.mark.parametrize("user, password", BAD)
def test_kafka_python_cannot_bootstrap_with_bad_credentials(scram_plaintext, user, password):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    bad = dataclasses.replace(scram_plaintext.client, username=user, password=password)
    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=scram_plaintext.bootstrap_servers, bootstrap_timeout_ms=2000,
                      **bad.kafka_python())


# --- users made with the admin API --------------------------------------------------------------

def test_users_created_with_the_admin_api_log_in_after_a_restart():
    """confluent-kafka's AdminClient (authenticated as the fixture's user) creates bob for both
    mechanisms; after a restart bob produces and consumes with each; deleting him locks him out."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    with BrokerHandle(security={"protocol": "SASL_PLAINTEXT", "mechanism": "SCRAM-SHA-512"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers, **b.client.confluent()})
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(mech, 8192), b"bob-secret")
            assert admin.alter_user_scram_credentials([upsert])["bob"].result(20) is None
        b.restart()
        topic = _topic(b)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            bob = dataclasses.replace(b.client.using(mechanism), username="bob", password="bob-secret")
            seen = _confluent_round_trip({"bootstrap.servers": b.bootstrap_servers, **bob.confluent()}, topic)
            assert len(seen) >= MESSAGES
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers, **b.client.confluent()})
        gone = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)
        assert admin.alter_user_scram_credentials([gone])["bob"].result(20) is None
        bob = dataclasses.replace(b.client.using("SCRAM-SHA-256"), username="bob", password="bob-secret")
        errors: list = []
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, **bob.confluent(), "error_cb": errors.append})
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION


def test_kafka_python_admin_creates_a_user_that_aiokafka_then_uses():
    from aiokafka import AIOKafkaProducer
    from kafka.admin import KafkaAdminClient, UserScramCredentialUpsertion

    with BrokerHandle(security={"protocol": "SASL_PLAINTEXT", "mechanism": "SCRAM-SHA-256"}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **b.client.kafka_python())
        try:
            assert admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion("carol", "SCRAM-SHA-256", "carol-secret")]) == {"carol": None}
        finally:
            admin.close()
        topic = _topic(b)
        carol = dataclasses.replace(b.client, username="carol", password="carol-secret")

        async def run() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers, **carol.aiokafka())
            await producer.start()
            try:
                await producer.send_and_wait(topic, b"from carol")
            finally:
                await producer.stop()

        asyncio.run(run())


# --- OAUTHBEARER, unsecured tokens (development only) ---------------------------------------------

OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def _oauth_broker(required_scope: str | None = None) -> BrokerHandle:
    """A SASL_PLAINTEXT test broker with OAUTHBEARER enabled besides PLAIN (which makes the topics)."""
    options = f' unsecuredValidatorRequiredScope="{required_scope}"' if required_scope else ""
    return BrokerHandle(security="SASL_PLAINTEXT", overrides={
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required{options};"})


def _confluent_oauth(b, config: str) -> dict:
    return {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": config}


def test_confluent_kafka_with_an_unsecured_token():
    with _oauth_broker(required_scope="requiredScope") as b:
        topic = _topic(b)
        seen = _confluent_round_trip(_confluent_oauth(b, "principal=admin scope=requiredScope"), topic)
        assert sorted(seen) == sorted(f"c{i}".encode() for i in range(MESSAGES))


def test_confluent_kafka_token_without_the_required_scope_is_refused():
    from confluent_kafka import KafkaError, Producer

    with _oauth_broker(required_scope="requiredScope") as b:
        errors: list = []
        producer = Producer({**_confluent_oauth(b, "principal=admin scope=other"), "error_cb": errors.append})
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION
        assert "insufficient_scope" in errors[0].str()


class UnsecuredToken:
    """A kafka-python / aiokafka token provider: an unsigned JWS for ``sub``, valid for an hour."""

    def __init__(self, sub: str) -> None:
        self.sub = sub

    def token(self) -> str:
        def part(obj) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
        now = int(time.time())  # whole seconds, as JWTs carry them: a fractional iat can lie in the
        # broker's current millisecond, which Kafka's check (1000 * iat > now ms) counts as the future
        return f"{part({'alg': 'none'})}.{part({'sub': self.sub, 'iat': now, 'exp': now + 3600})}."

    def extensions(self) -> dict:
        return {}


def test_kafka_python_and_aiokafka_with_an_unsecured_token():
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaPythonTokenProvider

    class KpToken(UnsecuredToken, KafkaPythonTokenProvider):
        pass

    class AkToken(UnsecuredToken, AbstractTokenProvider):
        async def token(self) -> str:
            return UnsecuredToken.token(self)

    with _oauth_broker() as b:
        topic = _topic(b)
        settings = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}
        seen = _kafka_python_round_trip(b.bootstrap_servers, {**settings,
                                                              "sasl_oauth_token_provider": KpToken("dev")}, topic)
        assert len(seen) == MESSAGES

        async def run() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers, sasl_oauth_token_provider=AkToken("dev"),
                                        **settings)
            await producer.start()
            try:
                await producer.send_and_wait(topic, b"from aiokafka")
            finally:
                await producer.stop()

        asyncio.run(run())


def test_a_token_expiring_past_java_long_range_is_answered_not_dropped():
    """An ``exp`` whose milliseconds pass a Java long (Kafka's ``Math.round`` saturates at
    Long.MAX_VALUE) authenticates with a lifetime that fits SaslAuthenticate's int64 field:
    the broker once failed to encode that answer and dropped the connection with a traceback."""
    from odradek.broker.wire_client import SyncClient

    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    with _oauth_broker() as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        # a double past range (1e400) and an integer past a double read as Infinity in Java: Long.MAX_VALUE
        for exp in ("1e17", "1e300", "1e400", "1" + "0" * 400):
            claims = base64.urlsafe_b64encode(b'{"sub": "dev", "exp": %s}' % exp.encode()).decode().rstrip("=")
            token = f"{part({'alg': 'none'})}.{claims}."
            with SyncClient(host, int(port)) as c:
                assert c.request(17, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
                answer = c.request(36, 2, {"auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()})
                assert answer.error_code == 0
                assert 0 < answer.session_lifetime_ms <= 2**63 - 1
                assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0


def test_nan_or_infinity_in_a_token_is_an_invalid_token_not_a_mechanism_failure():
    """NaN and Infinity are not JSON (Python's parser takes them, Kafka's refuses): the token is
    invalid -- the error challenge, then 58 once the client acknowledges it -- instead of an
    OverflowError/ValueError the broker logged as a mechanism bug."""
    from odradek.broker.wire_client import SyncClient

    header = base64.urlsafe_b64encode(b'{"alg": "none"}').decode().rstrip("=")
    with _oauth_broker() as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        for exp in (b"NaN", b"Infinity"):
            claims = base64.urlsafe_b64encode(b'{"sub": "dev", "exp": %s}' % exp).decode().rstrip("=")
            with SyncClient(host, int(port)) as c:
                assert c.request(17, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
                answer = c.request(36, 2, {"auth_bytes": f"n,,\x01auth=Bearer {header}.{claims}.\x01\x01".encode()})
                assert answer.error_code == 0 and answer.auth_bytes == b'{"status":"invalid_token"}'
                assert c.request(36, 2, {"auth_bytes": b"\x01"}).error_code == 58
