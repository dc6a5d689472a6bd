#!/usr/bin/env python3
"""Transactions: what a committed transaction costs, and what read_committed costs a Fetch.

Transactions part (``--part txn``): ``odradek serve`` in its own process
(fsync mode ``never``, then ``always``); ``--producers`` raw-frame producers,
each on its own connection with its own transactional id, run transactions
back to back for ``--seconds``: InitProducerId once, then per transaction
AddPartitionsToTxn v3, one Produce v9 (acks=-1) and EndTxn v3 (commit) —
what the Java/kafka-python client sends, without its batching delays.  Two
shapes: one partition, one record; ten partitions (one record each) plus
AddOffsetsToTxn and TxnOffsetCommit v3 for one partition of a consumer
group (consume-transform-produce).  Reported: committed transactions/s (all
producers), and EndTxn's latency p50/p99 (request sent -> answer).  Each shape
runs twice side by side: the classic protocol above, and transactions v2 as a
Kafka 4 producer runs it (KIP-890: no AddPartitionsToTxn/AddOffsetsToTxn,
Produce v12 and TxnOffsetCommit v5 add the partitions, EndTxn v5 bumps the
epoch the next transaction uses); the ratio is v2 / classic.

Target: >= 2,000 small transactions/s with fsync never.

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
ratio is read_committed / read_uncommitted, per round side by side.  Then,
end to end, a fresh aiokafka consumer reads the partition under each
isolation level (it filters the aborted batches and markers itself).

Target: read_committed >= 0.8 x read_uncommitted.

    python scripts/bench_transactions.py [--part all|txn|fetch] [--seconds 5] [--producers 8]
                                         [--runs 5] [--txns 5000] [--txn-batches 4]
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
from odradek.broker.wire_client import AsyncClient, SyncClient, decode, encode  # noqa: E402
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
        b.app.txn_coordinator.verify_partition = _Verified().verify_partition
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


async def aiokafka_read_all(port: int, end: int, isolation: str) -> tuple[float, int]:
    """(seconds, records delivered) for a fresh aiokafka consumer reading the partition to its end."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", isolation_level=isolation,
                         enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        got = 0
        t0 = time.perf_counter()
        while await c.position(tp) < end:
            for msgs in (await c.getmany(timeout_ms=1000, max_records=100_000)).values():
                got += len(msgs)
        return time.perf_counter() - t0, got
    finally:
        await c.stop()


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
            e2e: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
            delivered = {}
            for _ in range(max(args.runs // 2, 1)):
                for isolation in e2e:
                    seconds, got = asyncio.run(aiokafka_read_all(port, end, isolation))
                    e2e[isolation].append(seconds)
                    delivered[isolation] = got
            for isolation, times in e2e.items():
                print(f"aiokafka {isolation:17s} {min(times):6.2f} s for the partition, "
                      f"{delivered[isolation]} records delivered")
            print(f"aiokafka time ratio uncommitted/committed (best of each): "
                  f"{min(e2e['read_uncommitted']) / min(e2e['read_committed']):.2f}")
        finally:
            stop(proc)
    finally:
        shutil.rmtree(data, ignore_errors=True)


# --- transactions/s ----------------------------------------------------------------------------

GROUP = "bench-group"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


RETRIES = {"CONCURRENT_TRANSACTIONS": 0}


async def _ok(client: AsyncClient, api: int, version: int, body: dict, what: str, backoff_s: float = 0.001):
    """Send until answered without errors; CONCURRENT_TRANSACTIONS (the previous transaction's
    markers still being written) is retried after ``backoff_s``, as clients do."""
    while True:
        r = await client.request(api, version, body)
        codes = set(_codes(r)) - {0}
        if codes == {ErrorCode.CONCURRENT_TRANSACTIONS}:
            RETRIES["CONCURRENT_TRANSACTIONS"] += 1
            await asyncio.sleep(backoff_s)
            continue
        if codes:
            raise RuntimeError(f"{what}: errors {sorted(codes)}")
        return r


def _codes(r) -> list[int]:
    """Every error code of an answer (top level and per partition)."""
    out = []
    if hasattr(r, "error_code"):
        out.append(r.error_code)
    for t in getattr(r, "results_by_topic_v3_and_below", None) or getattr(r, "topics", None) or ():
        for p in getattr(t, "results_by_partition", None) or getattr(t, "partitions", ()):
            out.append(getattr(p, "partition_error_code", getattr(p, "error_code", 0)))
    for t in getattr(r, "responses", None) or ():
        out.extend(p.error_code for p in t.partition_responses)
    return out


async def producer_loop(port: int, txn_id: str, topic: str, partitions: int, offsets: bool, stop_at: float,
                        end_latencies: list[float], backoff_s: float, tv2: bool = False) -> int:
    """Commit transactions back to back until ``stop_at``; returns how many."""
    client = await AsyncClient.connect("127.0.0.1", port)
    try:
        r = await _ok(client, 22, 5 if tv2 else 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60000,
                                                    "producer_id": -1, "producer_epoch": -1}, "InitProducerId")
        pid, epoch = r.producer_id, r.producer_epoch
        ids = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch}
        add = {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
               "v3_and_below_producer_epoch": epoch,
               "v3_and_below_topics": [{"name": topic, "partitions": list(range(partitions))}]}
        seq = [0] * partitions
        done = 0
        while time.perf_counter() < stop_at:
            if not tv2:
                await _ok(client, 24, 3, add, "AddPartitionsToTxn", backoff_s)
            parts = []
            for p in range(partitions):
                parts.append({"index": p, "records": encode_batch(
                    [(None, b"x" * 100)], producer_id=pid, producer_epoch=epoch, base_sequence=seq[p],
                    transactional=True)})
                seq[p] += 1
            await _ok(client, 0, 12 if tv2 else 9, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 30000,
                                                    "topic_data": [{"name": topic, "partition_data": parts}]},
                      "Produce", backoff_s)
            if offsets:
                if not tv2:
                    await _ok(client, 25, 3, {**ids, "group_id": GROUP}, "AddOffsetsToTxn")
                await _ok(client, 28, 5 if tv2 else 3, {**ids, "group_id": GROUP, "generation_id": -1, "member_id": "",
                                          "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                              {"partition_index": 0, "committed_offset": done,
                                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
                          "TxnOffsetCommit")
            t0 = time.perf_counter()
            r = await _ok(client, 26, 5 if tv2 else 3, {**ids, "committed": True}, "EndTxn")
            end_latencies.append(time.perf_counter() - t0)
            if tv2:  # the bumped epoch; sequences start again
                ids["producer_epoch"] = epoch = r.producer_epoch
                pid = ids["producer_id"] = r.producer_id
                seq = [0] * partitions
            done += 1
        return done
    finally:
        await client.close()


async def txn_run(port: int, topic: str, partitions: int, offsets: bool, producers: int, seconds: float,
                  backoff_s: float, tv2: bool = False) -> tuple[float, list[float]]:
    stop_at = time.perf_counter() + seconds
    latencies: list[float] = []
    t0 = time.perf_counter()
    counts = await asyncio.gather(*(producer_loop(port, f"bench-{topic}-{i}-{'v2' if tv2 else 'v1'}", topic,
                                                  partitions, offsets, stop_at, latencies, backoff_s, tv2)
                                    for i in range(producers)))
    return sum(counts) / (time.perf_counter() - t0), latencies


def txn_part(args) -> None:
    for fsync in ("never", "always"):
        data = tempfile.mkdtemp(prefix="bench-txn-")
        port = free_port()
        settings = [f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}", f"log.fsync.mode={fsync}",
                    "log.level=warning", "log.format=json"]
        proc = subprocess.Popen([*SERVE, *serve_args(settings)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_until_serving(proc, port)
            with SyncClient("127.0.0.1", port, timeout=30) as c:
                for name, n in (("one", 1), ("ten", 10)):
                    body = {"topics": [{"name": name, "num_partitions": n, "replication_factor": -1,
                                        "assignments": [], "configs": []}], "timeout_ms": 5000,
                            "validate_only": False}
                    assert c.request(19, 5, body).topics[0].error_code == 0
            for topic, partitions, offsets, label in (("one", 1, False, "1 partition, 1 record"),
                                                      ("ten", 10, True, "10 partitions + offsets")):
                backoff = args.backoff_ms / 1000
                rates = {}
                for tv2 in (False, True):
                    asyncio.run(txn_run(port, topic, partitions, offsets, args.producers, 0.5, backoff, tv2))
                    RETRIES["CONCURRENT_TRANSACTIONS"] = 0
                    rate, lat = asyncio.run(txn_run(port, topic, partitions, offsets, args.producers,
                                                    args.seconds, backoff, tv2))
                    rates[tv2] = rate
                    print(f"fsync {fsync:6s} {label:24s} {'v2' if tv2 else 'v1'} {rate:7.0f} txn/s  EndTxn p50 "
                          f"{percentile(lat, 0.5) * 1e3:6.2f} ms  p99 {percentile(lat, 0.99) * 1e3:6.2f} ms "
                          f"({len(lat)} transactions, {args.producers} producers, "
                          f"{RETRIES['CONCURRENT_TRANSACTIONS']} requests retried after 51)")
                print(f"fsync {fsync:6s} {label:24s} transactions v2 / classic: {rates[True] / rates[False]:.2f}")
        finally:
            stop(proc)
            shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=["all", "txn", "fetch"], default="all")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--backoff-ms", type=float, default=1.0,
                    help="wait before retrying CONCURRENT_TRANSACTIONS (Java: 20 ms for the first add)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--txns", type=int, default=5000)
    ap.add_argument("--txn-batches", type=int, default=4)
    args = ap.parse_args()
    if args.part in ("all", "txn"):
        txn_part(args)
    if args.part in ("all", "fetch"):
        fetch_part(args)


if __name__ == "__main__":
    main()
