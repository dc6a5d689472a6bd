"""Transactional producers of real clients against the transaction coordinator, over TCP.

kafka-python and confluent-kafka (librdkafka) each find the coordinator,
initialise a transactional id and end transactions; a second producer with
the same id fences the first.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient

pytestmark = pytest.mark.integration


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def describe(broker, tid: str):
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as c:
        return c.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0]


def test_kafka_python_initialises_and_reinitialises_a_transactional_id(broker):
    from kafka import KafkaProducer

    tid = _id("kp")
    first = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.commit_transaction()  # nothing sent: the client ends it without asking
        state = describe(broker, tid)
        assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Empty", 0)
        pid = state.producer_id
    finally:
        first.close(5)
    second = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=tid)
    try:
        second.init_transactions()
        state = describe(broker, tid)
        assert (state.producer_id, state.producer_epoch) == (pid, 1)
    finally:
        second.close(5)


def test_confluent_kafka_initialises_and_a_second_producer_bumps_the_epoch(broker):
    from confluent_kafka import Producer

    tid = _id("ck")
    conf = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid}
    first = Producer(conf)
    first.init_transactions(10)
    first.begin_transaction()
    first.abort_transaction(10)
    pid = describe(broker, tid).producer_id
    second = Producer(conf)
    second.init_transactions(10)
    state = describe(broker, tid)
    assert (state.producer_id, state.producer_epoch, state.transaction_state) == (pid, 1, "Empty")
    first.flush(1)
    second.flush(1)
