#!/usr/bin/env python3
"""Transactions: what read_committed costs a Fetch (and, with the coordinator, what a transaction costs).

Fetch part (``--part fetch``): a topic of one partition holding transactions
of ``--txn-batches`` batches each (10 records of 100 bytes per batch), from 8
producers in turn, one in ten aborted (so 10 % of the data batches are
aborted), each followed by its marker.  The data is written by an in-process
broker (markers through ``DataPlane.write_txn_marker``, the coordinator's
path); then ``odradek serve`` runs on that data dir in its own process and
raw Fetch v12 requests read the whole partition from offset 0, 1 MiB per
request, one connection, alternately read_uncommitted and read_committed,
``--runs`` rounds of each.  MB/s counts record-batch bytes (both isolation
levels return the same bytes: clients drop aborted batches themselves); the
ratio is read_committed / read_uncommitted, per round side by side.

Target: read_committed >= 0.8 x read_uncommitted.

    python scripts/bench_transactions.py [--part fetch] [--runs 5] [--txns 5000] [--txn-batches 4]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.txn_contracts import TxnMarker  # noqa: E402
from odradek.broker.wire_client import SyncClient, decode, encode  # noqa: E402
from odradek.protocol.errors import ErrorCode  # noqa: E402
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.testing import ThreadedBroker  # noqa: E402
from odradek.testing.process import SERVE, free_port, serve_args, stop, wait_until_serving  # noqa: E402

_SIZE = struct.Struct(">i")
_BASE_LEN = struct.Struct(">qi")
TOPIC = "rc"
PRODUCERS = 8


class _Verified:
    """Every partition is in every transaction (the data is built without a coordinator)."""

    def verify_partition(self, *_args) -> ErrorCode:
        return ErrorCode.NONE


def build_fetch_topic(data_dir: Path, txns: int, txn_batches: int) -> tuple[int, int]:
    """Write the transactions; returns (log end offset, aborted transactions)."""
    aborted = 0
    logging_setup.configure(level="warning")  # the in-process builder's request log is noise here
    with ThreadedBroker(data_dir=data_dir, overrides={"log.fsync.mode": "never"}) as b:
        b.app.txn_coordinator = _Verified()
        records = [(None, b"x" * 100)] * 10
        with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
            body = {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": -1, "assignments": [],
                                "configs": []}], "timeout_ms": 5000, "validate_only": False}
            assert c.request(19, 5, body).topics[0].error_code == 0
            seqs = [0] * PRODUCERS
            for t in range(txns):
                pid = t % PRODUCERS
                for _ in range(txn_batches):
                    batch = encode_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seqs[pid],
                                         transactional=True)
                    seqs[pid] += len(records)
                    r = c.request(0, 9, {"transactional_id": f"bench-{pid}", "acks": 1, "timeout_ms": 5000,
                                         "topic_data": [{"name": TOPIC, "partition_data": [
                                             {"index": 0, "records": batch}]}]})
                    assert r.responses[0].partition_responses[0].error_code == 0
                commit = t % 10 != 9
                aborted += not commit
                code = b._call(b.app.dataplane.write_txn_marker(TOPIC, 0, TxnMarker(pid, 0, 0, commit)))
                assert code == ErrorCode.NONE
        end = b.app.topics.log(TOPIC, 0).log_end_offset
    return end, aborted


def fetch_frame(offset: int, isolation: int, max_bytes: int = 1 << 20) -> bytes:
    return encode(1, 12, 1, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": max_bytes}]}]})


def _next_offset(records: bytes) -> int:
    pos = nxt = 0
    while len(records) - pos >= 61:
        base, length = _BASE_LEN.unpack_from(records, pos)
        nxt = base + _SIZE.unpack_from(records, pos + 23)[0] + 1
        pos += length + 12
    return nxt


async def read_all(port: int, end: int, isolation: int) -> tuple[float, int, int]:
    """(seconds, record bytes, aborted-transaction entries) to read [0, end) with raw Fetch v12."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    offset = total = listed = 0
    t0 = time.perf_counter()
    try:
        while offset < end:
            writer.write(fetch_frame(offset, isolation))
            size = _SIZE.unpack(await reader.readexactly(4))[0]
            _cid, body = decode(1, 12, await reader.readexactly(size))
            p = body.responses[0].partitions[0]
            if p.error_code or not p.records:
                raise RuntimeError(f"Fetch at {offset}: error {p.error_code}, {len(p.records)} bytes")
            total += len(p.records)
            listed += len(p.aborted_transactions or ())
            offset = _next_offset(p.records)
    finally:
        writer.close()
    return time.perf_counter() - t0, total, listed


def fetch_part(args) -> None:
    data = Path(tempfile.mkdtemp(prefix="bench-txn-"))
    try:
        t0 = time.perf_counter()
        end, aborted = build_fetch_topic(data, args.txns, args.txn_batches)
        print(f"built {end} offsets ({args.txns} transactions of {args.txn_batches} batches, {aborted} aborted) "
              f"in {time.perf_counter() - t0:.1f} s")
        port = free_port()
        settings = [f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}", "log.fsync.mode=never",
                    "log.level=warning", "log.format=json"]
        proc = subprocess.Popen([*SERVE, *serve_args(settings)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_until_serving(proc, port)
            asyncio.run(read_all(port, end, 1))  # warm: producer state loaded, page cache filled
            rates: dict[int, list[float]] = {0: [], 1: []}
            ratios = []
            for _ in range(args.runs):
                round_rate = {}
                for isolation in (0, 1):
                    seconds, nbytes, listed = asyncio.run(read_all(port, end, isolation))
                    round_rate[isolation] = nbytes / seconds / 1e6
                    rates[isolation].append(round_rate[isolation])
                ratios.append(round_rate[1] / round_rate[0])
            print(f"aborted-transaction entries listed per read_committed pass: {listed}")
            for isolation, name in ((0, "read_uncommitted"), (1, "read_committed")):
                r = rates[isolation]
                print(f"{name:17s} {statistics.median(r):7.1f} MB/s  [{min(r):.1f}-{max(r):.1f}]")
            print(f"ratio committed/uncommitted: median {statistics.median(ratios):.2f} "
                  f"[{min(ratios):.2f}-{max(ratios):.2f}] (target >= 0.8)")
        finally:
            stop(proc)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=["fetch"], default="fetch")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--txns", type=int, default=5000)
    ap.add_argument("--txn-batches", type=int, default=4)
    args = ap.parse_args()
    if args.part == "fetch":
        fetch_part(args)


if __name__ == "__main__":
    main()
