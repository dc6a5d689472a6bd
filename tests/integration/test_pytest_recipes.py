"""What a test author reaches for, written in a stranger's project with only the installed package
and the documented fixtures (docs/test-control.md, docs/pytest.md): each recipe is a few lines, run by pytester."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration

pytest_plugins = ["pytester"]

RECIPES = '''
import asyncio
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata


def _names():
    u = uuid.uuid4().hex[:8]
    return f"topic-{u}", f"group-{u}"


def _commit(bootstrap, topic, group, offset):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})
    consumer.close()


def _committed(bootstrap, topic, group):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()


def test_two_commits_refused_then_one_succeeds(kafka_broker):
    topic, group = _names()
    kafka_broker.create_topic(topic)
    with kafka_broker.fault("OffsetCommit", error="NOT_COORDINATOR", times=2):
        _commit(kafka_broker.bootstrap_servers, topic, group, 42)
    answers = [c.error_names() for c in kafka_broker.captured("OffsetCommit", group_id=group)]
    assert answers == [{"NOT_COORDINATOR"}, {"NOT_COORDINATOR"}, set()]


def test_one_advance_evicts_the_hung_member_only(fresh_kafka_broker):
    from aiokafka import AIOKafkaConsumer
    broker = fresh_kafka_broker
    topic, group = _names()
    broker.create_topic(topic, partitions=3)

    def members():
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            return {m["member_id"] for m in admin.describe_groups([group])[group]["members"]}
        finally:
            admin.close()

    async def run():
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                      client_id=f"c{i}", heartbeat_interval_ms=100) for i in range(3)]
        for c in consumers:
            await c.start()
        try:
            while not all(c.assignment() for c in consumers):
                await asyncio.sleep(0.05)
            before = await asyncio.to_thread(members)
            with broker.fault("Heartbeat", client_id="c2", close="before"):  # c2 hangs
                await asyncio.sleep(1.5)
                broker.advance(seconds=24 * 3600, spare_active=1.0)
                after = await asyncio.to_thread(members)
            assert len(before) == 3 and len(after) == 2 and after < before
        finally:
            for c in consumers:
                await c.stop()

    asyncio.run(run())


def test_thirty_days_pass_at_once(fresh_kafka_broker):
    topic, group = _names()
    fresh_kafka_broker.create_topic(topic)
    _commit(fresh_kafka_broker.bootstrap_servers, topic, group, 7)
    started = time.perf_counter()
    fresh_kafka_broker.advance(seconds=30 * 24 * 3600)  # past the 7-day offset retention
    assert time.perf_counter() - started < 5
    assert _committed(fresh_kafka_broker.bootstrap_servers, topic, group) is None


@pytest.mark.kafka_broker_overrides({"offsets.retention.minutes": 1})
def test_a_broker_of_my_own_settings(fresh_kafka_broker):
    topic, group = _names()
    fresh_kafka_broker.create_topic(topic)
    _commit(fresh_kafka_broker.bootstrap_servers, topic, group, 7)
    fresh_kafka_broker.advance(seconds=11 * 60)  # past one minute of retention and a sweep
    assert _committed(fresh_kafka_broker.bootstrap_servers, topic, group) is None


def test_the_default_retention_keeps_them(fresh_kafka_broker):
    topic, group = _names()
    fresh_kafka_broker.create_topic(topic)
    _commit(fresh_kafka_broker.bootstrap_servers, topic, group, 7)
    fresh_kafka_broker.advance(seconds=11 * 60)
    assert _committed(fresh_kafka_broker.bootstrap_servers, topic, group) == 7
'''


def test_the_documented_recipes_run_in_a_strangers_project(pytester):
    pytester.makepyfile(test_recipes=RECIPES)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=5)


def test_a_marker_with_keywords_and_a_bad_marker(pytester):
    pytester.makepyfile(test_marker='''
import pytest

@pytest.mark.kafka_broker_overrides(num_partitions=4)
def test_keywords(fresh_kafka_broker):
    assert fresh_kafka_broker.call(lambda: fresh_kafka_broker.app.config["num.partitions"]) == 4

@pytest.mark.kafka_broker_overrides("num.partitions=4")
def test_not_a_dict(fresh_kafka_broker):
    pass
''')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*kafka_broker_overrides takes a dict of settings*"])
