"""aiokafka consumers: a group of three, join/leave rebalances, static restart, admin APIs."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.testing import Broker
from tests.conftest import BROKERS
from tests.integration.group_helpers import FAST_GROUPS, await_for, disjoint_cover, group_state

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

PARTITIONS = 6


@pytest.fixture
async def fbroker():
    async with Broker(overrides=FAST_GROUPS, brokers=BROKERS) as b:
        await b.app.wait_loaded()
        yield b


@pytest.fixture
async def topic(fbroker):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=fbroker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    finally:
        await admin.close()
    return name


async def start_consumer(bootstrap: str, group: str, topic: str, instance: str | None = None):
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         group_instance_id=instance, session_timeout_ms=3000,
                         heartbeat_interval_ms=200, auto_offset_reset="earliest")
    await c.start()
    return c


def assignment(c) -> frozenset:
    return frozenset((tp.topic, tp.partition) for tp in c.assignment())


def covered(consumers, topic) -> bool:
    return disjoint_cover([assignment(c) for c in consumers], topic, PARTITIONS)


async def test_group_of_three_rebalances_on_join_and_leave(fbroker, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [await start_consumer(fbroker.bootstrap_servers, group, topic) for _ in range(2)]
    try:
        await await_for(lambda: covered(consumers, topic), what="two-way cover")
        consumers.append(await start_consumer(fbroker.bootstrap_servers, group, topic))
        await await_for(lambda: covered(consumers, topic), what="three-way cover after a join")
        state, generation, ids = group_state(fbroker, group)
        assert state == "Stable" and len(ids) == 3
        await consumers.pop(1).stop()  # LeaveGroup
        await await_for(lambda: covered(consumers, topic), what="cover after a leave")
        assert group_state(fbroker, group)[1] > generation
    finally:
        await asyncio.gather(*(c.stop() for c in consumers))


async def test_static_member_restarts_without_a_rebalance(fbroker, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = await start_consumer(fbroker.bootstrap_servers, group, topic, instance="a")
    await await_for(lambda: covered([a], topic), what="a alone")
    b = await start_consumer(fbroker.bootstrap_servers, group, topic, instance="b")
    consumers = [a, b]
    try:
        await await_for(lambda: covered(consumers, topic), what="a and b")
        state, generation, ids = group_state(fbroker, group)
        held = assignment(b)
        await b.stop()  # a static member sends no LeaveGroup
        assert group_state(fbroker, group) == (state, generation, ids)
        b = await start_consumer(fbroker.bootstrap_servers, group, topic, instance="b")
        consumers = [a, b]
        await await_for(lambda: assignment(b) == held, what="b to get its partitions back")
        state_after, generation_after, ids_after = group_state(fbroker, group)
        assert (state_after, generation_after) == ("Stable", generation)  # no rebalance
        assert ids_after != ids and len(ids_after) == 2  # b came back with a new member id
        await asyncio.sleep(1)
        assert covered(consumers, topic) and group_state(fbroker, group)[1] == generation
    finally:
        await asyncio.gather(*(c.stop() for c in consumers))


async def test_admin_lists_and_describes_groups(fbroker, topic):
    from aiokafka.admin import AIOKafkaAdminClient

    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [await start_consumer(fbroker.bootstrap_servers, group, topic) for _ in range(2)]
    admin = AIOKafkaAdminClient(bootstrap_servers=fbroker.bootstrap_servers)
    await admin.start()
    try:
        await await_for(lambda: covered(consumers, topic), what="two-way cover")
        listed = await admin.list_consumer_groups()
        assert (group, "consumer") in listed
        [response] = await admin.describe_consumer_groups([group])
        [described] = response.groups
        error, group_id, state, protocol_type, protocol, members = described[:6]
        assert (error, group_id, state, protocol_type, protocol) == (0, group, "Stable", "consumer",
                                                                     "roundrobin")
        assert len(members) == 2
        [response] = await admin.describe_consumer_groups(["nobody-home"])
        assert response.groups[0][2] == "Dead"
    finally:
        await admin.close()
        await asyncio.gather(*(c.stop() for c in consumers))


async def test_group_survives_broker_restart(fbroker, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [await start_consumer(fbroker.bootstrap_servers, group, topic) for _ in range(3)]
    try:
        await await_for(lambda: covered(consumers, topic), what="three-way cover")
        before = group_state(fbroker, group)
        held = [assignment(c) for c in consumers]
        await fbroker.restart()
        await fbroker.app.wait_loaded()
        assert group_state(fbroker, group) == before
        await asyncio.sleep(4)  # beyond the session timeout: the members kept heartbeating
        assert group_state(fbroker, group) == before
        assert [assignment(c) for c in consumers] == held
    finally:
        await asyncio.gather(*(c.stop() for c in consumers))


async def test_consumers_started_together_are_assigned_without_a_heartbeat_round(fbroker, topic):
    """Three consumers started at once all get their partitions without any of them having to
    learn of a second round at a heartbeat: with a 15 s heartbeat interval, a member left in an
    earlier generation would wait 15 s; they are all assigned well before."""
    from aiokafka import AIOKafkaConsumer

    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [AIOKafkaConsumer(topic, bootstrap_servers=fbroker.bootstrap_servers, group_id=group,
                                  session_timeout_ms=45000, heartbeat_interval_ms=15000)
                 for _ in range(3)]
    try:
        await asyncio.gather(*(c.start() for c in consumers))
        await await_for(lambda: covered(consumers, topic), timeout=10, what="three-way cover")
        state, _generation, ids = group_state(fbroker, group)
        assert state == "Stable" and len(ids) == 3
    finally:
        await asyncio.gather(*(c.stop() for c in consumers))


async def test_first_generation_waits_for_a_consumer_whose_join_is_slow(fbroker, topic):
    """A consumer's first JoinGroup is handled (its member id handed out) but its answer is slow
    to arrive, so it rejoins long after the other consumer: the first generation waits for it
    rather than forming without it, which would leave the other to learn of the second round
    only at its next heartbeat (15 s here)."""
    from aiokafka import AIOKafkaConsumer

    group = f"g-{uuid.uuid4().hex[:8]}"
    fbroker.fault("JoinGroup", client_id="slow", delay_ms=500, times=1)

    def consumer(client_id: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic, bootstrap_servers=fbroker.bootstrap_servers, group_id=group,
                                client_id=client_id, session_timeout_ms=45000,
                                heartbeat_interval_ms=15000)

    slow, other = consumer("slow"), consumer("other")
    try:
        slow_start = asyncio.ensure_future(slow.start())
        shard = fbroker.app.coordinator.shard_for(group)
        await await_for(lambda: group in shard.groups and shard.groups[group].pending_members,
                        what="the slow consumer's member id handed out")
        await other.start()
        await slow_start
        await await_for(lambda: covered([slow, other], topic), timeout=10, what="two-way cover")
        assert group_state(fbroker, group)[1] == 1  # one generation: nobody had a second round
    finally:
        await asyncio.gather(slow.stop(), other.stop())
