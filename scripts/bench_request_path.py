"""CPU per OffsetCommit through the server's request path, in process: no sockets, no client.

A started broker (fsync never) and one ``server.Connection`` on a fake
transport; each loop turn hands it six pipelined OffsetCommit v8 frames
(``data_received``), as a pipelining client's read would, and lets the turn
end (the runtime appends, the answers are "written").  Prints the best of
five runs of 20,000 commits (process CPU time).  Made for A/Bs of the request
path (the fault-rule check, issue 21): run it from outside both trees with
``PYTHONPATH`` set to each, alternately.

    PYTHONPATH=. python scripts/bench_request_path.py [--rule]

``--rule`` adds a fault rule for another API (Heartbeat), so the path pays
the rule lookup but no rule fires; ``--capture`` turns request capture on;
``--partitions N`` commits N partitions per request (the same number of
partition-offsets in fewer requests) and prints the cost per partition-offset;
``--profile`` prints where one run's time went (cProfile, by own time).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchkit import FakeTransport  # noqa: E402

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.server import Connection  # noqa: E402
from odradek.broker.wire_client import encode  # noqa: E402
from odradek.testing import Broker  # noqa: E402

COMMITS = 20_000
TURN = 6


def frames(n: int, partitions: int = 1) -> list[bytes]:
    body = {"group_id": "bench", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": "bench", "partitions": [{"partition_index": p, "committed_offset": 1,
                                                         "committed_metadata": ""} for p in range(partitions)]}]}
    one = [encode(8, 8, i, body) for i in range(TURN)]
    return [b"".join(one)] * max(n // (TURN * partitions), 4)


async def run(args) -> float:
    overrides = {"odradek.control.capture.requests": 1000 if args.capture else 0}
    async with Broker(overrides=overrides) as b:
        await b.app.wait_loaded()
        if args.rule:
            b.fault("Heartbeat", error="NOT_COORDINATOR")
        conn = Connection(b.app.server)
        transport = FakeTransport()
        conn.connection_made(transport)
        conn.data_received(encode(19, 5, 0, {"topics": [{"name": "bench", "num_partitions": args.partitions,
                                                         "replication_factor": -1, "assignments": [],
                                                         "configs": []}], "timeout_ms": 10000}))
        while not transport.written:
            await asyncio.sleep(0.01)  # the topic exists: commits are appended, not refused
        reads = frames(COMMITS, args.partitions)
        best = float("inf")
        profile = None
        if args.profile:
            import cProfile  # noqa: PLC0415

            profile = cProfile.Profile()
        for i in range(5):
            if profile is not None and i == 4:
                profile.enable()
            t0 = time.process_time()
            for data in reads:
                conn.data_received(data)
                await asyncio.sleep(0)  # the turn ends: append, send the held answers
            best = min(best, time.process_time() - t0)
        if profile is not None:
            profile.disable()
            import pstats  # noqa: PLC0415

            pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        conn.connection_lost(None)
    return best / (len(reads) * TURN) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rule", action="store_true")
    parser.add_argument("--capture", action="store_true")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    logging_setup.configure("text", "warning")
    with tempfile.TemporaryDirectory():
        us = asyncio.run(run(args))
    n = args.partitions
    per = f"; {us / n:.3f} us per partition-offset" if n > 1 else ""
    print(f"{us:.2f} us CPU per OffsetCommit of {n} partition(s) through Connection.data_received "
          f"(best of 5 x {max(COMMITS // n, 4 * TURN):,}){per}")


if __name__ == "__main__":
    main()
