"""The versions Kafka 4.2 added to APIs Odradek already served, over raw frames: each new
version answers as a single-node Kafka 4.2 broker without tiered storage does, bad input
included (an unknown topic id is UNKNOWN_TOPIC_ID, never a crash)."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E

from .wire_helpers import create_topic, produce

pytestmark = pytest.mark.integration

METADATA = 3


def _client(b) -> SyncClient:
    return SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15)


def _topic(b, n: int = 0) -> str:
    name = f"v42-{uuid.uuid4().hex[:8]}"
    create_topic(b, name)
    if n:
        produce(b, name, n)
    return name


def _topic_id(b, name: str) -> uuid.UUID:
    with _client(b) as c:
        r = c.request(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    return r.topics[0].topic_id


# --- Metadata v13 (KIP-1102): a top-level error code, 0 from a broker ----------------------------

def test_metadata_v13_answers_with_a_top_level_error_code(broker):
    name = _topic(broker)
    with _client(broker) as c:
        r = c.request(METADATA, 13, {"topics": [{"name": name}, {"name": None, "topic_id": uuid.uuid4()}],
                                     "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    assert r.error_code == E.NONE
    assert [(t.name, t.error_code) for t in r.topics] == [(name, E.NONE), (None, E.UNKNOWN_TOPIC_ID)]
    assert [b.node_id for b in r.brokers] == [broker.app.node_id]
