#!/usr/bin/env python3
"""CreateTopics: ``--topics`` one-partition topics in one request, beside the same number
created one request each, on fresh in-process brokers side by side in one run.

The durable part of a CreateTopics is one round for the whole request (one
``topics.json`` write, one metadata pass), so the one-request figure should
be well under the per-request one; the issue-27 target is 1,000 topics in one
request under 3 s.  Also the restart of the broker holding them.

    python scripts/bench_create_topics.py [--topics 1000] [--runs 3] [--fsync never|always]
"""

from __future__ import annotations

import argparse
import statistics
import time

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker


def _body(names: list[str]) -> dict:
    return {"topics": [{"name": n, "num_partitions": 1, "replication_factor": -1, "assignments": [],
                        "configs": []} for n in names], "timeout_ms": 120000, "validate_only": False}


def one_request(b: ThreadedBroker, names: list[str]) -> float:
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=300) as c:
        start = time.perf_counter()
        answers = c.request(19, 7, _body(names)).topics
        took = time.perf_counter() - start
    assert all(t.error_code == 0 for t in answers), [t for t in answers if t.error_code][:3]
    return took


def one_each(b: ThreadedBroker, names: list[str]) -> float:
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=300) as c:
        start = time.perf_counter()
        for n in names:
            assert c.request(19, 7, _body([n])).topics[0].error_code == 0
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--fsync", default="never", choices=["never", "always"])
    args = ap.parse_args()
    overrides = {"log.fsync.mode": args.fsync}
    names = [f"bench-{i:05d}" for i in range(args.topics)]
    bulk, each, restart = [], [], []
    for _ in range(args.runs):
        with ThreadedBroker(overrides=overrides) as b:
            bulk.append(one_request(b, names))
            start = time.perf_counter()
            b.restart()
            restart.append(time.perf_counter() - start)
        with ThreadedBroker(overrides=overrides) as b:
            each.append(one_each(b, names))
    m_bulk, m_each, m_restart = (statistics.median(x) for x in (bulk, each, restart))
    n = args.topics
    print(f"{n} topics, fsync {args.fsync}, median of {args.runs}")
    print(f"  one request:      {m_bulk * 1000:8.0f} ms  ({m_bulk / n * 1000:.2f} ms/topic)")
    print(f"  one request each: {m_each * 1000:8.0f} ms  ({m_each / n * 1000:.2f} ms/topic)")
    print(f"  ratio one request / one each: {m_bulk / m_each:.2f}")
    print(f"  restart holding them: {m_restart * 1000:.0f} ms")


if __name__ == "__main__":
    main()
