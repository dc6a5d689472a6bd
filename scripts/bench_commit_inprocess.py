"""CPU per OffsetCommit inside the coordinator and runtime: no sockets, no server, no client.

``commit_offsets`` on a one-partition ``__consumer_offsets`` log (fsync
never), requests staged in turns of six and appended at each turn's end, as
the server does with pipelined clients.  Prints the best of five runs of
20,000 commits (process CPU time); ``--partitions N`` commits N partitions per
request (fewer requests, the same number of partition-offsets) and prints the
cost per partition-offset too.  For an A/B, run it from outside both
trees with ``PYTHONPATH`` set to each, alternately (see docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.clock import ManualClock  # noqa: E402
from odradek.broker.coordinator.config import CoordinatorConfig  # noqa: E402
from odradek.broker.coordinator.offsets import CommitRequest, commit_offsets  # noqa: E402
from odradek.broker.coordinator.service import Coordinator  # noqa: E402
from odradek.storage.config import FsyncMode, LogConfig  # noqa: E402
from odradek.storage.log import Log  # noqa: E402
from odradek.storage.log_manager import offsets_topic_config  # noqa: E402

COMMITS = 20_000
TURN = 6  # requests per event-loop turn


def every_topic_exists(_topic: str) -> int:
    return 1000


async def main() -> None:
    logging_setup.configure("text", "warning")
    clock = ManualClock()
    config = offsets_topic_config(LogConfig(fsync=FsyncMode.NEVER))
    log = Log.open(Path(tempfile.mkdtemp(prefix="bench-commit-")) / "__consumer_offsets-0", config,
                   clock=clock.now_ms)
    coordinator = Coordinator(clock, CoordinatorConfig(), [log])
    await coordinator.load()
    runtime = coordinator.runtime
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1)
    n = parser.parse_args().partitions
    commits = max(COMMITS // n, 20)
    requests = [CommitRequest(f"g{i}", -1, "", None, -1, 8) for i in range(16)]
    runs = []
    for _ in range(5):
        started = time.process_time()
        for i in range(commits):
            if i % TURN == 0:
                runtime.begin()
            partitions = [("t", p, i, 0, "", -1) for p in range(n)] if n > 1 else [("t", i % 16, i, 0, "", -1)]
            commit_offsets(coordinator, requests[i % 16], partitions, every_topic_exists)
            if i % TURN == TURN - 1:
                runtime.end()
        runtime.end()
        runs.append((time.process_time() - started) / commits * 1e6)
    per = f"; {min(runs) / n:.2f} us/partition-offset" if n > 1 else ""
    print(f"{min(runs):.2f} us/commit of {n} partition(s){per} (best of 5 x {commits:,}; "
          f"runs {', '.join(f'{r:.2f}' for r in runs)})")
    await coordinator.stop()
    await log.aclose()


if __name__ == "__main__":
    asyncio.run(main())
