"""Where an OffsetCommit's (and an OffsetFetch's) time goes, per partition, stage by stage, in one process.

One OffsetCommit v8 of ``--partitions`` partitions (default 100) of one topic,
taken apart as the broker runs it: the request body decoded by the generated
codec, the handler's partition tuples, the coordinator's commit (validation,
records, the runtime's staging and replay: ``commit_offsets``), the turn's
end (batch encoding and the append: ``runtime.end``), and the answer built
and encoded.  Each stage is timed alone (process CPU, best of 7 rounds of
``--requests``), so the figures add up to about what the request path costs
(``bench_request_path.py --partitions N``) without the server's framing.
Then an OffsetFetch v8 of 10,000 committed partitions (10 topics of 1,000), the
same way: decode, the handler (the coordinator's rows written by the answer's
row writer), the answer's encoding.
Made for A/Bs: run it from outside both trees with ``PYTHONPATH`` set to each,
alternately.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.clock import ManualClock  # noqa: E402
from odradek.broker.coordinator import offsets  # noqa: E402
from odradek.broker.coordinator.config import CoordinatorConfig  # noqa: E402
from odradek.broker.coordinator.offsets import CommitRequest  # noqa: E402
from odradek.broker.coordinator.service import Coordinator  # noqa: E402
from odradek.broker.dispatch import RequestContext  # noqa: E402
from odradek.broker.handlers import offsets as handlers  # noqa: E402
from odradek.protocol.messages import offset_fetch  # noqa: E402
from odradek.protocol.messages.offset_commit import REQUEST, RESPONSE  # noqa: E402
from odradek.storage.config import FsyncMode, LogConfig  # noqa: E402
from odradek.storage.log import Log  # noqa: E402
from odradek.storage.log_manager import offsets_topic_config  # noqa: E402

VERSION = 8


def best_us(fn, rounds: int = 7) -> float:
    """Best process CPU of ``fn()`` over ``rounds``, in microseconds."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    n, requests = args.partitions, args.requests
    logging_setup.configure("text", "warning")
    clock = ManualClock()
    log = Log.open(Path(tempfile.mkdtemp(prefix="bench-stages-")) / "__consumer_offsets-0",
                   offsets_topic_config(LogConfig(fsync=FsyncMode.NEVER)), clock=clock.now_ms)
    coordinator = Coordinator(clock, CoordinatorConfig(), [log])
    await coordinator.load()
    runtime = coordinator.runtime
    body = {"group_id": "bench", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": p,
                                                     "committed_leader_epoch": 0, "committed_metadata": ""}
                                                    for p in range(n)]}]}
    data = REQUEST.build(body, VERSION)
    read, write = REQUEST.codec(VERSION)[0], RESPONSE.codec(VERSION)[1]
    req = read(data, 0)[0]
    request = CommitRequest("bench", -1, "", None, -1, VERSION)
    if hasattr(handlers, "_COMMIT_ROW"):  # a topic's partitions as rows under it (commit_topic_offsets)
        row = handlers._COMMIT_ROW

        def make_tuples() -> list:
            return [(t["name"], list(map(row, t["partitions"]))) for t in req["topics"] if t["name"] is not None]
        commit = offsets.commit_topic_offsets
    else:  # an older tree: flat PartitionCommit tuples
        def make_tuples() -> list:
            return [(t["name"], p["partition_index"], p["committed_offset"], p["committed_leader_epoch"],
                     p["committed_metadata"], p["commit_timestamp"]) for t in req["topics"] for p in t["partitions"]]
        commit = offsets.commit_offsets
    tuples = make_tuples()
    errors = [0] * n

    def decode() -> None:
        for _ in range(requests):
            read(data, 0)

    def handler_tuples() -> None:  # what ``handlers.offsets.offset_commit`` makes of the request
        for _ in range(requests):
            make_tuples()

    def commit_and_end() -> tuple[float, float]:
        """(CPU of the commits, CPU of their turns' ends): one request per turn, as timed apart."""
        spent_commit = spent_end = 0.0
        clock_ = time.process_time
        for _ in range(requests):
            runtime.begin()
            t0 = clock_()
            commit(coordinator, request, tuples, lambda _topic: n)
            t1 = clock_()
            runtime.end()
            spent_end += clock_() - t1
            spent_commit += t1 - t0
        return spent_commit, spent_end

    # the answer's builder took no version before it wrote rows (an A/B against such a tree)
    version_arg = (VERSION,) if "version" in inspect.signature(handlers.commit_response).parameters else ()

    def answer() -> None:
        for _ in range(requests):
            write(handlers.commit_response(req, errors, *version_arg))

    stages = {"request decode": best_us(decode), "handler tuples": best_us(handler_tuples)}
    rounds = [commit_and_end() for _ in range(7)]
    stages["coordinator commit (records, staging, replay)"] = min(c for c, _ in rounds) * 1e6
    stages["turn's end (batch encoding, append)"] = min(e for _, e in rounds) * 1e6
    stages["answer build + encode"] = best_us(answer)
    total = sum(stages.values())
    print(f"OffsetCommit v{VERSION}, {n} partitions per request, us per partition "
          f"(process CPU, best of 7 x {requests} requests):")
    for name, us in stages.items():
        print(f"  {name:<48} {us / requests / n:6.3f}")
    print(f"  {'total':<48} {total / requests / n:6.3f}")
    fetch_stages(coordinator)
    await coordinator.stop()
    await log.aclose()


def fetch_stages(coordinator: Coordinator, topics: int = 10, per_topic: int = 1000) -> None:
    """OffsetFetch v8 of ``topics`` x ``per_topic`` committed partitions, stage by stage (ms)."""
    names = [f"fetched-{i}" for i in range(topics)]
    for name in names:
        coordinator.runtime.begin()
        offsets.commit_offsets(coordinator, CommitRequest("fetcher", -1, "", None, -1, VERSION),
                       [(name, p, p, 0, "", -1) for p in range(per_topic)], lambda _topic: per_topic)
        coordinator.runtime.end()
    version = 8
    data = offset_fetch.REQUEST.build({"groups": [{"group_id": "fetcher", "topics": [
        {"name": name, "partition_indexes": list(range(per_topic))} for name in names]}]}, version)
    read, write = offset_fetch.REQUEST.codec(version)[0], offset_fetch.RESPONSE.codec(version)[1]
    app = type("App", (), {"coordinator": coordinator})()
    ctx = RequestContext(9, version, 1, "bench", "127.0.0.1", 1)
    req = read(data, 0)[0]
    body = handlers.offset_fetch(app, ctx, req)
    stages = {"request decode": best_us(lambda: read(data, 0), 15),
              "handler (coordinator rows, row writer)": best_us(lambda: handlers.offset_fetch(app, ctx, req), 15),
              "answer encode": best_us(lambda: write(body), 15)}
    print(f"OffsetFetch v{version} of {topics * per_topic:,} committed partitions, ms (process CPU, best of 15):")
    for name, us in stages.items():
        print(f"  {name:<48} {us / 1000:6.2f}")
    print(f"  {'total':<48} {sum(stages.values()) / 1000:6.2f}")


if __name__ == "__main__":
    asyncio.run(main())
