"""CPU per heartbeat through the server's request path, in process: classic Heartbeat v3 beside
ConsumerGroupHeartbeat v1 (KIP-848), no sockets on the measured path.

A started broker (fsync never); a classic group of ``--members`` raw members and a reconciled
consumer group of as many are formed over TCP (``bench_groups.py``'s helpers), then one
``server.Connection`` on a fake transport is handed pipelined pre-encoded heartbeats
(``data_received``, 16 frames a read, as a pipelining client's read would) and each loop turn
ends.  The two kinds' reads are interleaved one by one (who goes first alternating), so both see
the same background load from moment to moment; prints, per kind, the best of seven runs (process
CPU time per heartbeat), the rate ratio of each run (the ratio of the two kinds' sums) and their
median: what ``bench_groups.py --only consumer``'s heartbeats/s compares, without the machine's
noise (a busy shared machine swings whole runs by a third, which best-of-runs of one kind after
the other did not cancel).  ``--profile [KIND]`` prints where
the heartbeats of KIND (``consumer``, the default, or ``classic``) spent their time (cProfile, by
own time).

    PYTHONPATH=. python scripts/bench_heartbeat_path.py [--members 1000] [--profile [classic|consumer]]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_groups import (  # noqa: E402
    CG_TOPIC,
    CG_V,
    HEARTBEAT_V,
    ConsumerGroup_,
    Group,
    cg_body,
    connect,
    create_topic,
)
from benchkit import FakeTransport  # noqa: E402

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.server import Connection  # noqa: E402
from odradek.broker.wire_client import encode  # noqa: E402
from odradek.testing import Broker  # noqa: E402

READ = 16
ROUNDS = 4  # passes over every member per run


async def classic_frames(port: int, members: int) -> list[bytes]:
    clients = await connect(port, 33)
    try:
        group = Group("classic-hb", clients[1:], clients[0], members)
        await group.form()
        return [encode(12, HEARTBEAT_V, i, {"group_id": group.group_id, "generation_id": group.generation,
                                            "member_id": m, "group_instance_id": None})
                for i, m in enumerate(group.member_ids)]
    finally:
        for c in clients:
            await c.close()


async def consumer_frames(port: int, members: int) -> list[bytes]:
    await create_topic(port, CG_TOPIC, max(members // 10, 1))
    clients = await connect(port, 33)
    try:
        group = ConsumerGroup_("consumer-hb", clients[1:], clients[0], members)
        await group.reconcile(max(members // 10, 1))
        return [encode(68, CG_V, i, cg_body(group.group_id, m, e))
                for i, (m, e) in enumerate(zip(group.members, group.epochs, strict=True))]
    finally:
        for c in clients:
            await c.close()


async def one_read(conn: Connection, data: bytes) -> float:
    """CPU time of one read's heartbeats, through the end of its turn (the loop runs it next)."""
    t0 = time.process_time()
    conn.data_received(data)
    await asyncio.sleep(0)
    return time.process_time() - t0


async def one_run(conn: Connection, transport: FakeTransport, reads: dict[str, list[bytes]],
                  profile: Any = None, profiled: str | None = None) -> dict[str, float]:
    """Both kinds' reads interleaved one by one (which goes first alternating), so both see the same
    load from moment to moment: the ratio of their sums is what a busy machine cannot skew."""
    before = transport.written
    spent = dict.fromkeys(reads, 0.0)
    for i in range(len(reads["classic"])):
        for kind in KINDS if i % 2 == 0 else KINDS[::-1]:
            if profile is not None and kind == profiled:
                profile.enable()
            spent[kind] += await one_read(conn, reads[kind][i])
            if profile is not None:
                profile.disable()
    assert transport.written > before
    return spent


KINDS = ("classic", "consumer")
RUNS = 7


async def run(args: Any) -> tuple[dict[str, float], list[float]]:
    overrides = {"group.initial.rebalance.delay.ms": 2000, "odradek.control.capture.requests": 0}
    async with Broker(overrides=overrides) as b:
        await b.app.wait_loaded()
        port = b.app.endpoint.port
        frames = {"classic": await classic_frames(port, args.members),
                  "consumer": await consumer_frames(port, args.members)}
        reads = {k: [b"".join(f[i:i + READ]) for i in range(0, len(f), READ)] * ROUNDS for k, f in frames.items()}
        conn = Connection(b.app.server)
        transport = FakeTransport()
        conn.connection_made(transport)
        best = dict.fromkeys(reads, float("inf"))
        ratios = []
        profile = None
        if args.profile:
            import cProfile  # noqa: PLC0415

            profile = cProfile.Profile()
        for i in range(RUNS):
            spent = await one_run(conn, transport, reads, profile if i == RUNS - 1 else None, args.profile)
            ratios.append(spent["classic"] / spent["consumer"])
            for kind in KINDS:
                best[kind] = min(best[kind], spent[kind])
        if profile is not None:
            import pstats  # noqa: PLC0415

            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        conn.connection_lost(None)
    return {k: best[k] / (len(frames[k]) * ROUNDS) * 1e6 for k in best}, ratios


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--profile", nargs="?", const="consumer", choices=KINDS)
    args = parser.parse_args()
    logging_setup.configure("text", "warning")
    us, ratios = asyncio.run(run(args))
    ordered = sorted(ratios)
    print(f"CPU per heartbeat through Connection.data_received ({args.members} members, best of {RUNS}):")
    print(f"  classic Heartbeat v{HEARTBEAT_V}        {us['classic']:6.2f} us")
    print(f"  ConsumerGroupHeartbeat v{CG_V}    {us['consumer']:6.2f} us")
    print(f"  rate ratio consumer / classic per run (interleaved): {' '.join(f'{r:.2f}' for r in ratios)}")
    print(f"  rate ratio consumer / classic  {ordered[len(ordered) // 2]:6.2f} (median)")


if __name__ == "__main__":
    main()
