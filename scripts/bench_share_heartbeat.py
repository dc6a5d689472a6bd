#!/usr/bin/env python3
"""Steady-state ShareGroupHeartbeat beside steady-state ConsumerGroupHeartbeat, in one process.

Both coordinators' operations are driven sans-I/O (a ManualClock, a real log in a temporary
directory, the share coordinator's initialization answered at once): a group of N members on one
topic of 64 partitions is formed and reconciled, then every member heartbeats with its epoch only,
``--rounds`` times; the figure is the mean time per heartbeat, the two kinds alternating over
``--runs`` runs, and the ratio share / consumer (what a share group's member costs the coordinator
per heartbeat next to a KIP-848 member's; the network and codec are the same for both).  A third
column runs the share heartbeats with the steady-state shortcut (``share_heartbeat._quiet``) off:
what the general path costs.

    python scripts/bench_share_heartbeat.py [--members 50,200] [--rounds 50] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from odradek.broker.clock import ManualClock
from odradek.broker.coordinator import consumer_heartbeat, share_heartbeat
from odradek.broker.coordinator.config import CoordinatorConfig
from odradek.broker.coordinator.consumer_heartbeat import HeartbeatRequest
from odradek.broker.coordinator.service import Coordinator
from odradek.broker.coordinator.share_heartbeat import ShareHeartbeatRequest
from odradek.broker.runtime.promise import Promise
from odradek.protocol.errors import ErrorCode
from odradek.storage.log import Log

TOPIC = ("t", uuid.uuid5(uuid.NAMESPACE_DNS, "t"), 64)


class AtOnce:
    """The share coordinator's initialize, answered at once (only the group coordinator is timed)."""

    def initialize(self, ident, *, state_epoch: int, start_offset: int) -> Promise:
        return Promise.resolved(ErrorCode.NONE)

    def delete(self, ident) -> Promise:
        return Promise.resolved(ErrorCode.NONE)


def coordinator(directory: Path) -> Coordinator:
    c = Coordinator(ManualClock(), CoordinatorConfig(offsets_retention_check_interval_ms=10**12),
                    [Log.open(directory / "__consumer_offsets-0")])
    asyncio.run(c.shards[0].load())
    c.topics.lookup = lambda name: (TOPIC[1], TOPIC[2]) if name == TOPIC[0] else None
    c.topics.names = lambda: [TOPIC[0]]
    c.share_persister = AtOnce()
    return c


def share_general_run(n: int, rounds: int) -> float:
    quiet = share_heartbeat._quiet
    share_heartbeat._quiet = lambda _c, _r: None
    try:
        return share_run(n, rounds)
    finally:
        share_heartbeat._quiet = quiet


def share_run(n: int, rounds: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        c = coordinator(Path(d))

        def beat(m: str, epoch: int, topics=None):
            return share_heartbeat.share_heartbeat(c, ShareHeartbeatRequest(
                "sg", m, epoch, subscribed_topic_names=topics, client_id="c", client_host="/h")).result()
        epochs = {f"m{i}": beat(f"m{i}", 0, [TOPIC[0]]).member_epoch for i in range(n)}
        for _ in range(3):
            epochs = {m: beat(m, e).member_epoch for m, e in epochs.items()}
        started = time.perf_counter()
        for _ in range(rounds):
            for m, e in epochs.items():
                beat(m, e)
        took = (time.perf_counter() - started) / (rounds * n)
        share_heartbeat.unload_shard(c.shards[0])
        return took


def consumer_run(n: int, rounds: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        c = coordinator(Path(d))

        def beat(m: str, epoch: int, **kw):
            req = HeartbeatRequest(group_id="cg", member_id=m, member_epoch=epoch, client_id="c", client_host="/h",
                                   **kw)
            return consumer_heartbeat.consumer_heartbeat(c, c.topics, req).result()
        epochs = {f"m{i}": beat(f"m{i}", 0, subscribed_topic_names=[TOPIC[0]], owned={},
                                 rebalance_timeout_ms=30000).member_epoch for i in range(n)}
        group = c.shards[0].consumer_groups["cg"]
        for _ in range(6):
            epochs = {m: beat(m, e, owned=dict(group.members[m].assigned)).member_epoch for m, e in epochs.items()}
        started = time.perf_counter()
        for _ in range(rounds):
            for m, e in epochs.items():
                beat(m, e)
        took = (time.perf_counter() - started) / (rounds * n)
        consumer_heartbeat.unload_shard(c.shards[0])
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="50,200")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for n in (int(x) for x in args.members.split(",")):
        share, consumer, general = [], [], []
        for _ in range(args.runs):  # alternating, so all see the same machine
            share.append(share_run(n, args.rounds))
            consumer.append(consumer_run(n, args.rounds))
            general.append(share_general_run(n, args.rounds))
        s, c, g = (statistics.median(x) * 1e6 for x in (share, consumer, general))
        ratios = sorted(a / b for a, b in zip(share, consumer, strict=True))
        slow = sorted(a / b for a, b in zip(general, consumer, strict=True))
        print(f"{n} members: share {s:.1f} us/heartbeat, consumer {c:.1f}, share general path {g:.1f}; "
              f"share/consumer {ratios[0]:.2f}-{ratios[-1]:.2f} (median {statistics.median(ratios):.2f}), "
              f"general/consumer {slow[0]:.2f}-{slow[-1]:.2f}")


if __name__ == "__main__":
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # quiet: warnings and up
    main()
