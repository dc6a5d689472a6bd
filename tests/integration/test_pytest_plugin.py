"""The pytest plugin as a user meets it: a sample project run by pytester."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration

pytest_plugins = ["pytester"]

SAMPLE = '''
import asyncio
import uuid

def _names():
    u = uuid.uuid4().hex[:8]
    return f"topic-{u}", f"group-{u}"

def test_kafka_python(kafka_broker):
    from kafka import KafkaConsumer, KafkaProducer
    topic, group = _names()
    kafka_broker.create_topic(topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    for i in range(10):
        producer.send(topic, b"m%d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_broker.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    consumer.partitions_for_topic(topic)  # before the first poll: kafka-python 3.0.12 can lose a rejoin
    assert sorted(m.value for m in consumer) == sorted(b"m%d" % i for i in range(10))
    consumer.close()

def test_confluent_kafka(kafka_broker):
    from confluent_kafka import Consumer, Producer
    topic, group = _names()
    kafka_broker.create_topic(topic)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(5):
        producer.produce(topic, b"c%d" % i)
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    for _ in range(60):
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
        if len(got) == 5:
            break
    consumer.close()
    assert sorted(got) == [b"c%d" % i for i in range(5)]

def test_aiokafka(kafka_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    topic, group = _names()
    kafka_broker.create_topic(topic)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
        await producer.start()
        await producer.send_and_wait(topic, b"a")
        await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                                    group_id=group, auto_offset_reset="earliest")
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 20)
            return msg.value
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == b"a"

def test_restart_keeps_data(fresh_kafka_broker):
    from kafka import KafkaAdminClient
    fresh_kafka_broker.create_topic("kept", partitions=3)
    fresh_kafka_broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=fresh_kafka_broker.bootstrap_servers)
    assert "kept" in admin.list_topics()
    admin.close()
'''


def test_sample_project_with_all_three_clients(pytester):
    pytester.makepyfile(test_sample=SAMPLE)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=4)


def test_scope_and_overrides_are_configurable(pytester):
    pytester.makeini("""
        [pytest]
        kafka_broker_scope = function
        kafka_broker_overrides =
            num.partitions=4
    """)
    pytester.makepyfile(test_scope='''
        ports = []

        def test_one(kafka_broker):
            ports.append(kafka_broker.bootstrap_servers)

        def test_two(kafka_broker):
            ports.append(kafka_broker.bootstrap_servers)
            assert ports[0] != ports[1]  # a broker per test

        def test_overrides_reach_the_broker(kafka_broker):
            from kafka import KafkaProducer
            producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
            assert len(producer.partitions_for("auto-created")) == 4
            producer.close()
    ''')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=3)


SECURE_SAMPLE = '''
import pytest

def _roundtrip(broker, topic):
    from kafka import KafkaConsumer, KafkaProducer
    broker.create_topic(topic)
    settings = broker.client.kafka_python()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **settings)
    producer.send(topic, b"secret").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, **settings)
    assert [m.value for m in consumer] == [b"secret"]
    consumer.close()

def test_session_broker_is_sasl_ssl(kafka_broker):
    assert kafka_broker.client.security_protocol == "SASL_SSL"
    _roundtrip(kafka_broker, "secure-session")

@pytest.mark.parametrize("fresh_kafka_broker", [{"protocol": "SSL", "client_auth": "required"}], indirect=True)
def test_one_test_asks_for_client_certificates(fresh_kafka_broker):
    assert fresh_kafka_broker.client.cert_file
    _roundtrip(fresh_kafka_broker, "secure-fresh")
'''


def test_fixtures_serve_tls_and_sasl_with_one_option(pytester):
    pytester.makepyfile(test_secure=SECURE_SAMPLE)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--kafka-broker-security=SASL_SSL",
                                           timeout=120)
    result.assert_outcomes(passed=2)


LOGGING_SAMPLE = '''
import logging

def test_produce_then_fail(kafka_broker):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    producer.send("quiet", b"x").get(timeout=30)
    producer.close()
    assert False, "show me the output"

def test_broker_warnings_reach_caplog(caplog):
    from odradek.testing import ThreadedBroker
    with caplog.at_level(logging.WARNING), ThreadedBroker(overrides={"odradek.control.listener": "0"}):
        pass
    assert any(r.name == "odradek.control" and "control.listening" in r.getMessage() for r in caplog.records)
'''


def test_a_fixture_broker_is_quiet_unless_log_level_says_otherwise(pytester):
    """Its events go to Python's logging (pytest shows them with a failing test, ``caplog`` sees
    them) at warning and above unless log.level/log.levels say otherwise; never a line per request."""
    pytester.makepyfile(test_logs=LOGGING_SAMPLE)
    quiet = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    quiet.assert_outcomes(passed=1, failed=1)
    text = quiet.stdout.str()
    assert "show me the output" in text
    assert "broker.started" not in text and "request" not in text.replace("test_produce", ""), text
    pytester.makeini("""
        [pytest]
        kafka_broker_overrides =
            log.level=info
            log.levels=server=debug
    """)
    loud = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    loud.assert_outcomes(passed=1, failed=1)
    assert "broker.started" in loud.stdout.str()


def test_a_host_applications_structlog_configuration_is_kept(pytester):
    pytester.makeconftest('''
        import structlog
        MINE = [structlog.processors.KeyValueRenderer()]
        structlog.configure(processors=MINE)
    ''')
    pytester.makepyfile(test_host='''
        import structlog
        from conftest import MINE

        def test_kept(kafka_broker):
            assert structlog.get_config()["processors"] is MINE
    ''')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)


def test_the_fixture_port_option_fixes_the_port(pytester):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pytester.makepyfile(test_port=f'''
        def test_port(kafka_broker):
            assert kafka_broker.bootstrap_servers == "127.0.0.1:{port}"
    ''')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", f"--kafka-broker-port={port}",
                                           timeout=120)
    result.assert_outcomes(passed=1)


def test_the_group_protocol_option(pytester):
    """--kafka-group-protocol: the fixture broker offers KIP-848 groups (the default) or only classic
    ones; ``group_protocol`` says what a consumer should set."""
    pytester.makepyfile(test_protocol='''
        def test_protocol(kafka_broker, request):
            wanted = request.config.getoption("--kafka-group-protocol") or "consumer"
            assert kafka_broker.group_protocol == wanted
    ''')
    pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120).assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--kafka-group-protocol=classic",
                                           timeout=120)
    result.assert_outcomes(passed=1)


REGISTRY_SAMPLE = '''
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient


def test_the_registry_is_beside_the_broker(kafka_broker):
    registry = SchemaRegistryClient({"url": kafka_broker.schema_registry_url})
    assert registry.register_schema("users-value", Schema('"string"', "AVRO")) == 1
'''


def test_one_option_serves_the_schema_registry_beside_the_fixture_broker(pytester):
    pytester.makepyfile(test_registry=REGISTRY_SAMPLE)
    off = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    off.assert_outcomes(failed=1)
    assert "schema_registry=True" in off.stdout.str()
    on = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--kafka-broker-schema-registry",
                                       timeout=120)
    on.assert_outcomes(passed=1)


CONSOLE_SAMPLE = '''
import urllib.request


def test_the_console_is_beside_the_broker(kafka_broker):
    assert kafka_broker.console_url is not None
    assert urllib.request.urlopen(kafka_broker.console_url + "topics").status == 200
'''


def test_one_option_serves_the_console_beside_the_fixture_broker(pytester):
    pytester.makepyfile(test_console=CONSOLE_SAMPLE)
    off = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    off.assert_outcomes(failed=1)
    on = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "--kafka-broker-console", timeout=120)
    on.assert_outcomes(passed=1)
