"""One clock, really: fault rules' ``seconds`` and ``broker_down`` run on the broker's clock, an
advance of any length costs milliseconds, and a sparing advance expires only what is silent.

The sparing rule (``odradek/broker/control/clock_ops.py``, docs/test-control.md): whatever the broker
heard from within the last ``spare_active`` seconds of real time -- a group member's heartbeat,
join, sync or commit, a connection's bytes -- keeps the time it had left; a rebalance the advance
starts waits its timeouts from the end of the advance.  Real clients judge it.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient

from .group_helpers import await_for, group_state

pytestmark = pytest.mark.integration

DAY = 24 * 3600
METADATA = 3


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(broker, name: str, partitions: int) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1,
                        "assignments": [], "configs": []}], "timeout_ms": 5000, "validate_only": False}
    with SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=10) as c:
        assert c.request(19, 5, body).topics[0].error_code == 0


def _metadata_error(broker) -> int:
    with SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=10) as c:
        return c.request(METADATA, 1, {"topics": [{"name": "nope"}]}).topics[0].error_code


def test_a_fault_for_seconds_ends_when_the_clock_is_advanced_past_them(broker):
    fault = broker.fault("Metadata", error="LEADER_NOT_AVAILABLE", seconds=3600)
    assert _metadata_error(broker) == 5
    assert broker.faults()[0]["seconds_left"] == pytest.approx(3600, abs=5)
    broker.advance(seconds=3601)
    assert broker.faults() == []  # gone at its deadline, not at the next request
    assert not fault.remove()
    assert _metadata_error(broker) != 5


def test_a_frozen_clock_holds_a_fault_for_seconds(broker):
    broker.freeze_clock()
    broker.fault("Metadata", error="LEADER_NOT_AVAILABLE", seconds=0.1)
    time.sleep(0.3)
    assert _metadata_error(broker) == 5  # frozen: its 0.1 s have not passed
    assert broker.faults()[0]["seconds_left"] == pytest.approx(0.1)
    broker.advance(ms=100)
    assert broker.faults() == [] and _metadata_error(broker) != 5


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_broker_down_ends_with_an_advance_and_lasts_while_frozen(broker):
    port = broker.app.endpoint.port
    broker.freeze_clock()
    broker.broker_down(seconds=0.1)
    time.sleep(0.3)
    assert _refused(port)  # frozen: still down after its 0.1 s of real time
    broker.unfreeze_clock()
    broker.broker_down(seconds=3600)
    assert _refused(port)
    broker.advance(seconds=3600)
    deadline = time.monotonic() + 10
    while _refused(port):
        assert time.monotonic() < deadline, "the broker did not come up after the advance"
        time.sleep(0.02)


def test_an_advance_of_thirty_days_takes_milliseconds_whatever_the_periodic_checks(broker):
    """Offset expiry every 10 minutes, transaction timeouts every 10 s, idle connections every
    30 s: 30 days were ~260,000 timer runs; each check now runs once per advance."""
    started = time.perf_counter()
    broker.advance(seconds=30 * DAY)
    assert time.perf_counter() - started < 5  # a hang guard; the figure is in docs/BENCHMARKS.md
    assert broker.app.clock.pending() < 10


async def _consumers(broker, topic: str, group: str, n: int):
    from aiokafka import AIOKafkaConsumer

    consumers = [AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                  client_id=f"c{i}", session_timeout_ms=10000, heartbeat_interval_ms=100,
                                  enable_auto_commit=False)
                 for i in range(n)]
    for c in consumers:
        await c.start()
    return consumers


async def test_a_sparing_advance_evicts_the_hung_member_and_nobody_else(broker):
    topic, group = _name("spare"), _name("spare-g")
    _create(broker, topic, 6)
    consumers = await _consumers(broker, topic, group, 3)
    try:
        await await_for(lambda: (s := group_state(broker, group)) is not None and s[0] == "Stable"
                        and len(s[2]) == 3 and all(c.assignment() for c in consumers),
                        what="three members, each assigned")
        before = group_state(broker, group)[2]
        hung = consumers[2]._coordinator.member_id
        with broker.fault("Heartbeat", client_id="c2", close="before"):  # c2 hangs
            await asyncio.sleep(1.2)  # silent for longer than the window, the others not
            broker.advance(seconds=DAY, spare_active=1.0)  # past every session and idle limit
            state = group_state(broker, group)
            assert hung not in state[2]
            assert state[2] == before - {hung}  # the healthy two keep their member ids
            await await_for(lambda: group_state(broker, group)[0] == "Stable"
                            and len(consumers[0].assignment()) + len(consumers[1].assignment()) == 6,
                            what="the two healthy members share every partition")
            assert group_state(broker, group)[2] == before - {hung}
    finally:
        for c in consumers:
            await c.stop()


async def test_without_sparing_the_same_advance_expires_every_member(broker):
    topic, group = _name("nospare"), _name("nospare-g")
    consumers = await _consumers(broker, topic, group, 2)
    try:
        await await_for(lambda: (s := group_state(broker, group)) is not None and s[0] == "Stable"
                        and len(s[2]) == 2, what="two members")
        before = group_state(broker, group)[2]
        broker.advance(seconds=DAY)
        after = group_state(broker, group)  # every member expired: the empty group died
        assert before and (after is None or not after[2] & before)
    finally:
        for c in consumers:
            await c.stop()


def _modern_join(c: SyncClient, kind: str, group: str, member: str, topic: str) -> None:
    """Join a consumer (KIP-848, key 68) or share (KIP-932, key 76) group in raw frames."""
    if kind == "consumer":
        r = c.request(68, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None,
                              "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic],
                              "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    else:
        r = c.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                              "subscribed_topic_names": [topic]})
    assert r.error_code == 0, r


def _modern_members(c: SyncClient, kind: str, group: str) -> set[str]:
    r = c.request(69 if kind == "consumer" else 77, 1, {"group_ids": [group], "include_authorized_operations": False})
    return {m.member_id for g in r.groups if g.error_code == 0 for m in g.members}


@pytest.mark.parametrize("kind", ["consumer", "share"])
def test_a_sparing_advance_spares_the_consumer_and_share_group_members_heard_from(broker, kind):
    """The rule is the same for every kind of group: the member that heartbeated within the window
    keeps its session, the silent one expires."""
    topic, group = _name(kind), _name(f"{kind}-g")
    _create(broker, topic, 2)
    broker.wait_loaded()
    with SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=10) as c:
        _modern_join(c, kind, group, "quiet", topic)
        time.sleep(1.2)  # silent for longer than the window
        _modern_join(c, kind, group, "busy", topic)
        assert _modern_members(c, kind, group) == {"quiet", "busy"}
        broker.advance(seconds=DAY, spare_active=1.0)  # past every session timeout
        assert _modern_members(c, kind, group) == {"busy"}
