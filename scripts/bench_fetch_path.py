"""CPU per Fetch through the server's request path, in process: no sockets, no client.

A started broker (fsync never) holding one partition of 2,000 small batches, and
one ``server.Connection`` on a fake transport; each Fetch (max_wait 0, one
partition, 4 KiB: three batches) is handed to it whole (``data_received``) and the loop turns
until its answer is written, then the next one fetches from where that answer
ended.  Three kinds, each the best of five runs over the partition, the kinds taking turns (process CPU
time, µs per Fetch):

- ``v12``: sessionless (epoch -1), by name -- librdkafka's and aiokafka's way, the
  hot path before fetch sessions;
- ``v12 session``: a full fetch with epoch 0, then incremental ones in the session
  the broker opened (KIP-227), as Java's and kafka-python's fetchers (a broker
  without sessions answers session id 0 and they stay full fetches);
- ``v16``: sessionless by topic id (confluent-kafka 2.16), where served.

Made for A/Bs: run it from outside both trees with ``PYTHONPATH`` set to each,
alternately.

    PYTHONPATH=. python scripts/bench_fetch_path.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

if "PYTHONPATH" not in os.environ:  # an A/B names the tree to measure
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchkit import KeepingTransport  # noqa: E402

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.server import Connection  # noqa: E402
from odradek.broker.wire_client import decode, encode  # noqa: E402
from odradek.protocol.records import encode_batch, iter_batch_headers  # noqa: E402
from odradek.testing import Broker  # noqa: E402

BATCHES = 2_000
MAX_BYTES = 4 << 10


async def _answer(conn: Connection, transport: KeepingTransport, version: int, frame: bytes, api_key: int = 1):
    transport.chunks.clear()
    conn.data_received(frame)
    while not transport.chunks:
        await asyncio.sleep(0)
    return decode(api_key, version, b"".join(transport.chunks)[4:])[1]


def _fetch(version: int, topic, offset: int, session_id: int, epoch: int) -> bytes:
    key = "topic_id" if version >= 13 else "topic"
    return encode(1, version, 1, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": MAX_BYTES, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{key: topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                                               "log_start_offset": -1, "partition_max_bytes": MAX_BYTES}]}]})


async def _pass(conn: Connection, transport: KeepingTransport, version: int, topic, sessions: bool) -> int:
    """Fetch the whole partition once; the number of fetches."""
    offset = n = 0
    session, epoch = 0, (0 if sessions else -1)
    while offset < BATCHES:
        body = await _answer(conn, transport, version, _fetch(version, topic, offset, session, epoch))
        n += 1
        if sessions and body.session_id:
            session, epoch = body.session_id, epoch + 1
        *_, (_pos, last) = iter_batch_headers(body.responses[0].partitions[0].records)
        offset = last.base_offset + last.last_offset_delta + 1
    return n


async def run() -> dict[str, float]:
    async with Broker() as b:
        await b.app.wait_loaded()
        conn = Connection(b.app.server)
        transport = KeepingTransport()
        conn.connection_made(transport)
        await _answer(conn, transport, 5, encode(19, 5, 0, {"topics": [
            {"name": "bench", "num_partitions": 1, "replication_factor": -1, "assignments": [], "configs": []}],
            "timeout_ms": 10000}), api_key=19)
        batch = encode_batch([(b"k", b"v" * 100)] * 10)
        for _ in range(BATCHES):
            await _answer(conn, transport, 9, encode(0, 9, 1, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                              "topic_data": [{"name": "bench", "partition_data": [
                                                                  {"index": 0, "records": batch}]}]}), api_key=0)
        kinds: dict[str, tuple[int, object, bool]] = {"v12": (12, "bench", False), "v12 session": (12, "bench", True)}
        fetch_top = b.app.handlers.get(1).versions.hi
        if fetch_top >= 16:
            kinds["v16"] = (16, b.app.topics.id_by_name("bench", b.app.cluster_id), False)
        out = dict.fromkeys(kinds, float("inf"))
        for _ in range(5):  # the kinds take turns, so none gets a warmer cache
            for name, (version, topic, sessions) in kinds.items():
                t0 = time.process_time()
                n = await _pass(conn, transport, version, topic, sessions)
                out[name] = min(out[name], (time.process_time() - t0) / n * 1e6)
        conn.connection_lost(None)
    return out


def main() -> None:
    logging_setup.configure("text", "warning")
    with tempfile.TemporaryDirectory():
        results = asyncio.run(run())
    print(", ".join(f"{k}: {v:.1f} us" for k, v in results.items()) + " CPU per Fetch (best of 5)")


if __name__ == "__main__":
    main()
