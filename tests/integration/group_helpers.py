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


def group_state(broker, group_id: str) -> tuple[str, int, frozenset[str]] | None:
    """(state, generation, member ids) as the broker sees it, read on the broker's loop."""
    def read():
        coordinator = broker.app.coordinator
        group = coordinator.shard_for(group_id).groups.get(group_id)
        if group is None:
            return None
        return group.state.value, group.generation, frozenset(group.members)

    return broker.call(read) if hasattr(broker, "call") else read()
