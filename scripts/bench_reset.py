#!/usr/bin/env python3
"""Reset between tests: how long one ``reset()`` takes to empty a broker, beside the alternatives.

An in-process ``ThreadedBroker`` (what the pytest fixture runs) is filled with
``--topics`` one-partition topics (one CreateTopics request), a record in each,
and ``--groups`` simple groups with a committed offset each; then, side by side
in one run, each a median of ``--runs``:

1. ``reset()`` as the test calls it (wall time of the call, from the test's
   thread) -- and the part the broker reports itself;
2. DeleteTopics of every topic in one request (what a test would do without
   reset; groups and offsets stay);
3. a fresh broker instead: stop the filled one and remove its directory,
   start a new one on an empty directory (what ``fresh_kafka_broker`` costs
   per test, beside the startup of the empty broker).

    python scripts/bench_reset.py [--topics 1000] [--groups 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_pairs_batch
from odradek.testing import ThreadedBroker


def fill(b: ThreadedBroker, topics: int, groups: int) -> list[str]:
    names = [f"bench-{i:05d}" for i in range(topics)]
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=120) as c:
        body = {"topics": [{"name": n, "num_partitions": 1, "replication_factor": -1, "assignments": [],
                            "configs": []} for n in names], "timeout_ms": 120000, "validate_only": False}
        assert all(t.error_code == 0 for t in c.request(19, 5, body).topics)
        batch = encode_pairs_batch([(b"k", b"v")], base_offset=0, timestamp=int(time.time() * 1000))
        produce = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                   "topic_data": [{"name": n, "partition_data": [{"index": 0, "records": batch}]}
                                  for n in names]}
        c.request(0, 8, produce)
        for g in range(groups):
            c.request(8, 7, {"group_id": f"bench-group-{g}", "generation_id_or_member_epoch": -1,
                             "member_id": "", "group_instance_id": None, "retention_time_ms": -1,
                             "topics": [{"name": names[g % topics], "partitions": [
                                 {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                  "committed_metadata": ""}]}]})
    return names


def delete_all(b: ThreadedBroker, names: list[str]) -> None:
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=120) as c:
        resp = c.request(20, 4, {"topic_names": names, "timeout_ms": 120000})
        assert all(r.error_code == 0 for r in resp.responses)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    resets, inside, deletes, fresh, fills = [], [], [], [], []
    with ThreadedBroker() as b:
        for _ in range(args.runs):
            t = time.perf_counter()
            fill(b, args.topics, args.groups)
            fills.append(time.perf_counter() - t)
            t = time.perf_counter()
            gone = b.reset()
            resets.append(time.perf_counter() - t)
            inside.append(gone["ms"] / 1000)
            assert (gone["topics"], gone["groups"]) == (args.topics, args.groups), gone
        for _ in range(args.runs):
            names = fill(b, args.topics, args.groups)
            t = time.perf_counter()
            delete_all(b, names)
            deletes.append(time.perf_counter() - t)
            b.reset()
    for _ in range(args.runs):
        full = ThreadedBroker().start()
        fill(full, args.topics, args.groups)
        t = time.perf_counter()
        full.close()  # the used broker goes (its logs closed, its directory removed) ...
        ThreadedBroker().start().close()  # ... a new one starts on an empty directory
        fresh.append(time.perf_counter() - t)

    def ms(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 1000:8.1f} ms"

    print(f"{args.topics} topics (1 record each), {args.groups} groups; median of {args.runs}")
    print(f"  filling it (CreateTopics, Produce, OffsetCommit)  {ms(fills)}")
    print(f"  reset() from the test                             {ms(resets)}")
    print(f"    of which the broker's own work                  {ms(inside)}")
    print(f"  DeleteTopics of every topic (groups stay)         {ms(deletes)}")
    print(f"  a fresh broker instead (stop, rm, start empty)    {ms(fresh)}")


if __name__ == "__main__":
    main()
