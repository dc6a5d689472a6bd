#!/usr/bin/env python3
"""What Fetch v0-3's down-conversion costs, side by side with a v12 Fetch of the same data.

Why: old consumers (Fetch v0-3) get stored magic-2 batches converted to
magic 0/1 on every read, as Kafka 3.x does; this measures how much slower
such a read is than a current one.  One in-process broker, one topic of
``--batches`` batches of 100 small records (uncompressed, or ``--codec``),
each version reads the whole partition in 1 MiB fetches; best wall time of
``--repeat`` rounds, all versions in the same run so the ratios compare.

    .venv/bin/python scripts/bench_downconvert.py [--batches 2000] [--codec none|gzip|lz4]
"""

from __future__ import annotations

import argparse
import struct
import time

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch
from odradek.testing import ThreadedBroker

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


def fetch_all(c: SyncClient, topic: str, version: int, end: int) -> int:
    offset, size = 0, 0
    while offset < end:
        r = c.request(1, version, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        records = bytes(r.responses[0].partitions[0].records)
        if not records:
            break
        size += len(records)
        offset = next_offset(records)
    return size


def next_offset(records: bytes) -> int:
    """One past the last whole entry's last offset, from the frame headers alone (any magic)."""
    pos, last = 0, -1
    while pos + 12 <= len(records):
        length = struct.unpack_from(">i", records, pos + 8)[0] + 12
        if pos + length > len(records):
            break
        (base,) = struct.unpack_from(">q", records, pos)
        last = base + struct.unpack_from(">i", records, pos + 23)[0] if records[pos + 16] == 2 else base
        pos += length
    return last + 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--codec", choices=CODECS, default="none")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with ThreadedBroker(overrides={"log.level": "warning"}) as b, \
            SyncClient("127.0.0.1", b.app.endpoint.port, timeout=60) as c:
        topic = "bench"
        c.request(19, 5, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": [], "configs": []}],
                          "timeout_ms": 5000, "validate_only": False})
        for i in range(args.batches):
            batch = encode_batch([(b"key-%d" % j, b"value-%06d-%d" % (j, i)) for j in range(100)],
                                 compression=CODECS[args.codec])
            c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        end = 100 * args.batches
        best: dict[int, float] = {}
        for _ in range(args.repeat):
            for version in (12, 3, 1):
                t0 = time.perf_counter()
                fetch_all(c, topic, version, end)
                best[version] = min(best.get(version, float("inf")), time.perf_counter() - t0)
    base = best[12]
    print(f"{args.batches} batches x 100 records, codec {args.codec}, best of {args.repeat}")
    for version, seconds in best.items():
        print(f"Fetch v{version:<2} {end / seconds / 1e3:8.0f} k records/s  {seconds / base:5.2f}x v12's time")


if __name__ == "__main__":
    main()
