#!/usr/bin/env python3
"""Data-plane throughput against ``odradek serve`` over loopback: produce (raw, pipelined), consume.

The broker runs in its own process (its CPU is its own on this 2-core
machine).  Each figure is the median of ``--runs`` runs:

1. Produce: Produce v9 (acks=-1, fsync mode never), one partition per
   request carrying one batch of 100 records of 1 KiB each, uncompressed,
   pre-encoded; ``--connections`` connections, each keeping ``--window``
   requests in flight, one partition per connection.  MB/s counts batch
   bytes accepted by the broker; messages/s counts records.
2. Consume end to end with aiokafka: a fresh AIOKafkaConsumer (default
   fetch sizes, manual assign, from the beginning) reads every record of
   those partitions; MB/s counts record values (1 KiB each) handed to the
   application.  aiokafka's per-record Python work is most of the cost: it
   spends about twice the broker's CPU time on the same bytes.
3. For comparison, the same bytes fetched with raw Fetch v12 requests
   (no record decoding), pipelined per partition: what the broker serves
   when the client costs nothing.

Targets on the reference machine: produce >= 50 MB/s, consume >= 100 MB/s.

3b. The same with a fetch session (KIP-227): a full fetch with epoch 0, then incremental ones.

    python scripts/bench_dataplane.py [--runs 3] [--seconds 3] [--connections 4] [--window 8]
        [--baseline PATH_TO_OTHER_CHECKOUT]   # A/B: the two trees' brokers alternate in one run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import SyncClient, decode, encode  # noqa: E402
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.testing.process import SERVE, free_port, serve_args, stop, wait_until_serving  # noqa: E402

_SIZE = struct.Struct(">i")
RECORD_BYTES = 1024
RECORDS_PER_BATCH = 100


# --- broker process --------------------------------------------------------------------------

class BrokerProcess:
    def __init__(self, src: Path = ROOT) -> None:
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix="bench-dataplane-")
        settings = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.data}",
                    "log.fsync.mode=never", "log.level=warning", "log.format=json"]
        self.proc = subprocess.Popen([*SERVE, *serve_args(settings)], env=dict(os.environ, PYTHONPATH=str(src)), cwd=self.data,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_serving(self.proc, self.port)

    def create_topic(self, name: str, partitions: int) -> None:
        body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                            "assignments": [], "configs": []}], "timeout_ms": 30000, "validate_only": False}
        with SyncClient("127.0.0.1", self.port, timeout=30) as c:
            code = c.request(19, 5, body).topics[0].error_code
        if code != 0:
            raise RuntimeError(f"CreateTopics {name}: error {code}")

    def stop(self) -> None:
        stop(self.proc)
        subprocess.run(["rm", "-rf", self.data], check=False)


# --- pipelined raw client --------------------------------------------------------------------

class Pipe(asyncio.Protocol):
    """Counts size-prefixed responses (in order) and keeps the last one for a spot check."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.done = 0
        self.last = b""
        self.waiter: asyncio.Future | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if len(buf) - pos - 4 < size:
                break
            self.last = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            self.done += 1
        del buf[:pos]
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wait_for(self, count: int) -> None:
        while self.done < count:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter


async def connect(port: int) -> Pipe:
    _, proto = await asyncio.get_running_loop().create_connection(Pipe, "127.0.0.1", port)
    return proto


def produce_frame(topic: str, partition: int, batch: bytes) -> bytes:
    return encode(0, 9, 1, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                            "topic_data": [{"name": topic, "partition_data": [
                                {"index": partition, "records": batch}]}]})


def check_produce(frame: bytes) -> None:
    _cid, body = decode(0, 9, frame)
    code = body.responses[0].partition_responses[0].error_code
    if code != 0:
        raise RuntimeError(f"Produce failed with error {code}")


async def produce_run(port: int, topic: str, connections: int, window: int, seconds: float
                      ) -> tuple[float, float, list[int]]:
    """(MB/s, messages/s, requests per partition) for ``seconds`` of closed-loop pipelined produce."""
    batch = encode_batch([(None, b"x" * RECORD_BYTES)] * RECORDS_PER_BATCH)
    frames = [produce_frame(topic, p, batch) for p in range(connections)]
    pipes = [await connect(port) for _ in range(connections)]
    stop = time.perf_counter() + seconds

    async def drive(pipe: Pipe, frame: bytes) -> int:
        sent = 0
        while time.perf_counter() < stop:
            while sent - pipe.done < window:
                pipe.transport.write(frame)
                sent += 1
            await pipe.wait_for(sent - window // 2)
        await pipe.wait_for(sent)
        check_produce(pipe.last)
        return sent

    t0 = time.perf_counter()
    sent = await asyncio.gather(*(drive(p, f) for p, f in zip(pipes, frames, strict=True)))
    elapsed = time.perf_counter() - t0
    for p in pipes:
        p.transport.close()
    requests = sum(sent)
    return requests * len(batch) / elapsed / 1e6, requests * RECORDS_PER_BATCH / elapsed, list(sent)


# --- consume ---------------------------------------------------------------------------------

async def aiokafka_consume(port: int, topic: str, partitions: int, expected: int) -> tuple[float, float]:
    """(MB/s of values, messages/s) for a fresh consumer reading every record from the start."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        got = nbytes = 0
        t0 = time.perf_counter()
        while got < expected:
            for msgs in (await c.getmany(timeout_ms=1000, max_records=100_000)).values():
                got += len(msgs)
                nbytes += sum(len(m.value) for m in msgs)
        elapsed = time.perf_counter() - t0
    finally:
        await c.stop()
    return nbytes / elapsed / 1e6, got / elapsed


def fetch_frame(topic: str, partition: int, offset: int, max_bytes: int, session_id: int = 0,
                epoch: int = -1) -> bytes:
    return encode(1, 12, 1, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                    "fetch_offset": offset, "log_start_offset": -1,
                                                    "partition_max_bytes": max_bytes}]}]})


async def raw_fetch(port: int, topic: str, counts: list[int], sessions: bool = False) -> float:
    """MB/s of record-batch bytes fetched with raw Fetch requests, one connection per partition.

    Offsets advance by what each response held (decoded only for its last batch's offset).
    ``sessions``: as Java's and kafka-python's fetchers, a full fetch with epoch 0 first, then
    incremental ones in the session the broker opened (KIP-227; full ones again if it opens none)."""
    from odradek.protocol.records import iter_batch_headers

    async def one(p: int) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        offset = total = 0
        session, epoch = 0, (0 if sessions else -1)
        try:
            while offset < counts[p]:
                writer.write(fetch_frame(topic, p, offset, 4 << 20, session, epoch))
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                _cid, body = decode(1, 12, await reader.readexactly(size))
                if sessions and body.session_id:
                    session, epoch = body.session_id, epoch + 1
                records = body.responses[0].partitions[0].records
                total += len(records)
                *_, (_pos, last) = iter_batch_headers(records)
                offset = last.base_offset + last.last_offset_delta + 1
        finally:
            writer.close()
        return total

    t0 = time.perf_counter()
    sizes = await asyncio.gather(*(one(p) for p in range(len(counts))))
    return sum(sizes) / (time.perf_counter() - t0) / 1e6


# --- driver ----------------------------------------------------------------------------------

def one_run(args: argparse.Namespace, src: Path = ROOT) -> dict[str, float]:
    broker = BrokerProcess(src)
    try:
        broker.create_topic("bench", args.connections)
        mbs, msgs, sent = asyncio.run(produce_run(broker.port, "bench", args.connections, args.window,
                                                  args.seconds))
        records = [n * RECORDS_PER_BATCH for n in sent]
        expected = sum(records)
        c_mbs, c_msgs = asyncio.run(aiokafka_consume(broker.port, "bench", args.connections, expected))
        raw = asyncio.run(raw_fetch(broker.port, "bench", records))
        raw_sessions = asyncio.run(raw_fetch(broker.port, "bench", records, sessions=True))
    finally:
        broker.stop()
    return {"produce MB/s": mbs, "produce msgs/s": msgs, "consume MB/s (aiokafka)": c_mbs,
            "consume msgs/s (aiokafka)": c_msgs, "raw fetch MB/s": raw, "raw fetch MB/s (sessions)": raw_sessions,
            "data MB": expected * RECORD_BYTES / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--baseline", type=Path, help="another checkout's root, run alternately with this one")
    args = ap.parse_args()
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _src in trees}
    for i in range(args.runs):
        for name, src in trees:  # alternating, so both see the same machine load
            r = one_run(args, src)
            results[name].append(r)
            print(f"run {i + 1} ({name}): " + ", ".join(f"{k} {v:,.0f}" for k, v in r.items()), flush=True)
    for name, runs in results.items():
        print(f"\n{name}: medians of {args.runs} runs (1 KiB records, 100 per request, {args.connections} "
              f"connections x {args.window} in flight):")
        for key in runs[0]:
            values = sorted(r[key] for r in runs)
            line = f"  {key:28s} {statistics.median(values):12,.1f}   [{values[0]:,.1f} .. {values[-1]:,.1f}]"
            if name != trees[0][0]:
                ours = statistics.median(r[key] for r in results[trees[0][0]])
                line += f"   this tree / baseline: {ours / statistics.median(values):.2f}"
            print(line)
    print("  targets: produce >= 50 MB/s, consume >= 100 MB/s")


if __name__ == "__main__":
    main()
