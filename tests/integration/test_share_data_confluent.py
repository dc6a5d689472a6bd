"""confluent-kafka's ``ShareConsumer`` (librdkafka 2.16) on the share data path, over TCP.

What a team adopting share groups relies on: two consumers of one group split a topic's
records with none delivered to both; RELEASE and a lock timeout redeliver with the delivery
count incremented; REJECT archives; the delivery limit archives a poison record; a consumer
that closes hands its unacknowledged records to the other at once; DescribeShareGroupOffsets
shows the start offset and the lag.  Each test uses its own group, with
``share.auto.offset.reset=earliest`` set on it first (as confluent-kafka's own fixture does).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from odradek.testing import ThreadedBroker

from .share_wire import client, describe_offsets

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+)", allow_module_level=True)

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@pytest.fixture(scope="module")
def broker():
    with ThreadedBroker(overrides={"group.share.heartbeat.interval.ms": 500}) as b:
        yield b


def _setup(broker, partitions: int = 1, records: int = 10, **group_config) -> tuple[str, str]:
    """A fresh topic with ``records`` records and a fresh group reading it from the start."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(records):
        p.produce(topic, f"v{i}".encode(), partition=i % partitions)
    p.flush(10)
    overrides = {"share_auto_offset_reset": "earliest", **group_config}
    broker.call(lambda: broker.app.group_configs.set_overrides(group, overrides))
    return topic, group


def _consumer(broker, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                       "share.acknowledgement.mode": "explicit" if explicit else "implicit"})
    c.subscribe([topic])
    return c


def _poll_until(consumers: list[ShareConsumer], done: Callable[[list], bool], seconds: float = 30,
                on_message: Callable | None = None) -> list:
    """Poll every consumer in turn until ``done(messages)``; (consumer index, message) pairs."""
    got: list = []
    deadline = time.monotonic() + seconds
    while not done(got):
        assert time.monotonic() < deadline, f"only {[(i, m.offset()) for i, m in got]}"
        for i, c in enumerate(consumers):
            for m in c.poll(0.2) or []:
                if m.error() is None:
                    got.append((i, m))
                    if on_message is not None:
                        on_message(c, m)
    return got


def _ids(got) -> list[tuple[int, int]]:
    return [(m.partition(), m.offset()) for _i, m in got]


def test_two_consumers_split_the_records_and_none_gets_a_record_twice(broker):
    topic, group = _setup(broker, partitions=2, records=40)
    a, b = _consumer(broker, group, topic), _consumer(broker, group, topic)
    try:
        got = _poll_until([a, b], lambda g: len(g) >= 40)
        assert sorted(_ids(got)) == sorted({(i % 2, i // 2) for i in range(40)})
        assert all(m.delivery_count() == 1 for _i, m in got)
        a.poll(0.5)  # implicit mode: the next poll accepts them
        b.poll(0.5)
    finally:
        a.close()
        b.close()


def test_release_redelivers_with_the_delivery_count_incremented_and_reject_archives(broker):
    topic, group = _setup(broker, records=3)
    c = _consumer(broker, group, topic, explicit=True)
    try:
        first = _poll_until([c], lambda g: len(g) >= 3)
        kinds = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT, 2: AcknowledgeType.ACCEPT}
        for _i, m in first:
            c.acknowledge(m, kinds[m.offset()])
        c.commit_sync()
        again = _poll_until([c], lambda g: len(g) >= 1)
        assert [(m.offset(), m.delivery_count()) for _i, m in again] == [(0, 2)]
        c.acknowledge(again[0][1], AcknowledgeType.ACCEPT)
        c.commit_sync()
        time.sleep(1)
        assert [m for m in c.poll(1.0) or [] if m.error() is None] == []  # 1 (rejected) never comes back
    finally:
        c.close()
    with client(broker) as raw:
        row = describe_offsets(raw, group, topic).groups[0].topics[0].partitions[0]
        assert (row.start_offset, row.lag) == (3, 0)


def test_the_delivery_limit_archives_a_poison_record(broker):
    topic, group = _setup(broker, records=1, share_delivery_count_limit=3)
    c = _consumer(broker, group, topic, explicit=True)
    counts = []
    try:
        for _ in range(3):
            got = _poll_until([c], lambda g: len(g) >= 1)
            counts.append(got[0][1].delivery_count())
            c.acknowledge(got[0][1], AcknowledgeType.RELEASE)
            c.commit_sync()
        time.sleep(1)
        assert [m for m in c.poll(1.0) or [] if m.error() is None] == []
    finally:
        c.close()
    assert counts == [1, 2, 3]
    with client(broker) as raw:
        assert describe_offsets(raw, group, topic).groups[0].topics[0].partitions[0].start_offset == 1


def test_a_lock_timeout_redelivers_to_the_other_consumer(broker):
    topic, group = _setup(broker, records=5)
    a, b = _consumer(broker, group, topic, explicit=True), _consumer(broker, group, topic, explicit=True)
    try:
        held = _poll_until([a], lambda g: len(g) >= 5)
        assert {m.delivery_count() for _i, m in held} == {1}
        broker.control("advance_clock", ms=30_001, spare_active=True)  # a's locks expire, a stays a member
        again = _poll_until([b], lambda g: len(g) >= 5)
        assert sorted((m.offset(), m.delivery_count()) for _i, m in again) == [(o, 2) for o in range(5)]
        for _i, m in again:
            b.acknowledge(m)
        b.commit_sync()
    finally:
        a.close()
        b.close()


def test_a_closing_consumer_hands_its_records_to_the_other_at_once(broker):
    topic, group = _setup(broker, records=5)
    a = _consumer(broker, group, topic, explicit=True)
    b = _consumer(broker, group, topic, explicit=True)
    try:
        held = _poll_until([a], lambda g: len(g) >= 5)
        assert len(held) == 5
        a.close()
        started = time.monotonic()
        again = _poll_until([b], lambda g: len(g) >= 5, seconds=15)
        assert sorted((m.offset(), m.delivery_count()) for _i, m in again) == [(o, 2) for o in range(5)]
        assert time.monotonic() - started < 15  # released on close, not after the 30 s lock
    finally:
        b.close()


def _alter(raw, group: str, topic: str, start: int):
    return raw.request(91, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
        {"partition_index": 0, "start_offset": start}]}]})


def test_offsets_of_an_empty_group_can_be_altered_and_deleted_but_not_while_it_has_members(broker):
    topic, group = _setup(broker, records=4)
    c = _consumer(broker, group, topic)
    try:
        _poll_until([c], lambda g: len(g) >= 4)
        c.poll(1.0)  # implicit mode: this poll accepts what the last one returned
        with client(broker) as raw:
            assert _alter(raw, group, topic, 0).error_code == 68  # NON_EMPTY_GROUP
            assert raw.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]}).error_code == 68
    finally:
        c.close()
    with client(broker) as raw:
        listed = describe_offsets(raw, group).groups[0]  # Topics null: every initialized share-partition
        assert [(t.topic_name, [(p.partition_index, p.start_offset, p.lag) for p in t.partitions])
                for t in listed.topics] == [(topic, [(0, 4, 0)])]
        r = _alter(raw, group, topic, 1)
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0, r
        assert describe_offsets(raw, group, topic).groups[0].topics[0].partitions[0].start_offset == 1
    again = _consumer(broker, group, topic)
    try:
        got = _poll_until([again], lambda g: len(g) >= 3)
        assert sorted(m.offset() for _i, m in got) == [1, 2, 3]
    finally:
        again.close()
    with client(broker) as raw:
        r = raw.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic}, {"topic_name": "nope"}]})
        assert r.error_code == 0 and [(t.topic_name, t.error_code) for t in r.responses] == [(topic, 0), ("nope", 3)]
        row = describe_offsets(raw, group, topic).groups[0].topics[0].partitions[0]
        assert (row.start_offset, row.lag) == (-1, -1)
        assert raw.request(92, 0, {"group_id": "no-such-group", "topics": [{"topic_name": topic}]}).error_code == 69
