"""A shared broker under pytest-xdist: one broker per worker, reset between tests.

xdist runs each worker as its own process with its own pytest session, so
the session-scoped ``kafka_broker`` is one broker per worker: tests in
different workers never share a broker, and ``clean_kafka_broker`` resets
the worker's broker before each test, so tests in the same worker can reuse
topic and group names.  The sample project checks both from the inside.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

pytest_plugins = ["pytester"]

SAMPLE = '''
import json, os
import pytest

@pytest.mark.parametrize("n", range(6))
def test_same_names_in_every_test(clean_kafka_broker, n):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    b = clean_kafka_broker
    bs = b.bootstrap_servers
    consumer = KafkaConsumer(bootstrap_servers=bs, group_id="the-group", enable_auto_commit=False)
    tp = TopicPartition("the-topic", 0)
    assert consumer.topics() == set()           # nothing left by an earlier test of this worker
    assert consumer.committed(tp) is None
    b.create_topic("the-topic")                 # the same names in every test
    producer = KafkaProducer(bootstrap_servers=bs)
    assert producer.send("the-topic", b"x", partition=0).get(10).offset == 0
    producer.close(10)
    consumer.commit({tp: OffsetAndMetadata(1, "", -1)})
    consumer.close()
    with open(os.environ["RESULTS"], "a") as f:
        f.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                            "broker": bs}) + "\\n")
'''


def test_one_broker_per_worker_and_a_reset_between_tests(pytester, tmp_path, monkeypatch):
    pytest.importorskip("xdist")
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("RESULTS", str(results))
    pytester.makepyfile(test_sample=SAMPLE)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-n", "2", timeout=240)
    result.assert_outcomes(passed=6)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    brokers = {}
    for row in rows:
        brokers.setdefault(row["worker"], set()).add(row["broker"])
    assert len(brokers) == 2, brokers  # both workers ran tests
    assert all(len(b) == 1 for b in brokers.values()), brokers  # one broker for all of a worker's tests
    first, second = brokers.values()
    assert first.isdisjoint(second)  # and not the other worker's
