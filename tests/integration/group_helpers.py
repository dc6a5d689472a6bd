"""Shared bits of the consumer-group integration tests: waiting, partition cover, topics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

# a broker that lets clients use short sessions, so expiry tests take seconds, not minutes
FAST_GROUPS = {"group.min.session.timeout.ms": 1000}

Assignment = frozenset[tuple[str, int]]


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, step: float = 0.05,
             what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


async def await_for(predicate: Callable[[], bool], timeout: float = 30.0, step: float = 0.05,
                    what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(step)


def disjoint_cover(assignments: Iterable[Assignment], topic: str, partitions: int) -> bool:
    """Every partition assigned exactly once, and every member has something."""
    assignments = list(assignments)
    if not assignments or any(not a for a in assignments):
        return False
    flat = [tp for a in assignments for tp in a]
    return len(flat) == len(set(flat)) and set(flat) == {(topic, p) for p in range(partitions)}


def create_topic_kafka_python(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def kafka_python_subscriber(topic: str, **config):
    """A kafka-python ``KafkaConsumer`` subscribed to ``topic`` that knows the topic's partitions
    before its first ``poll``.

    kafka-python 3.0.12 can lose a join: a group leader whose first assignment was
    made without the topic's metadata (its metadata request goes out ~100 ms after
    the subscription, a group forms in ~10 ms here) rejoins when the metadata
    arrives; if the ``poll`` that started that rejoin times out after the JoinGroup
    answer but before the SyncGroup one is handled, the next ``poll`` sees nothing
    left to do (the assignment snapshot already matches), so the assignment is never
    applied and heartbeats stay disabled: the member expires and ``poll`` returns
    nothing, for good.  Asking for the partitions first lets the first assignment
    cover them, so there is no second round (``test_kafka_python_rejoin.py``).
    """
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, **config)
    consumer.partitions_for_topic(topic)
    return consumer


def group_state(broker, group_id: str) -> tuple[str, int, frozenset[str]] | None:
    """(state, generation, member ids) as the broker sees it, read on the broker's loop."""
    def read():
        coordinator = broker.app.coordinator
        group = coordinator.shard_for(group_id).groups.get(group_id)
        if group is None:
            return None
        return group.state.value, group.generation, frozenset(group.members)

    return broker.call(read) if hasattr(broker, "call") else read()
