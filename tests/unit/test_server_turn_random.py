"""The server's turns under random interleavings: pipelined commits and fetches, several connections.

What a client relies on, checked at every write to a transport:

- answers on one connection go out in request (correlation id) order;
- a successful OffsetCommit is answered only once its record is in the log
  (with fsync ``always``: once the recovery point is past it).

At the end every request has its answer, nothing is left queued or held, and
a reload gives the live state.  The random choices: how many requests a read
carries, which connections read in a turn, and where turns end.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from odradek.broker.server import Connection
from odradek.broker.wire_client import decode, encode
from odradek.offsets.records import OffsetKey, decode_key, decode_value
from odradek.protocol.records import iter_batches
from odradek.testing import Broker

from .test_server_turn import RecordingTransport


def commit(cid: int, group: str, partition: int, offset: int) -> bytes:
    return encode(8, 8, cid, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "retention_time_ms": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": 0,
             "commit_timestamp": -1, "committed_metadata": ""}]}]})


def fetch(cid: int, group: str) -> bytes:
    return encode(9, 8, cid, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                          "topics": None}], "require_stable": True})


class CheckingTransport(RecordingTransport):
    """Runs ``check(transport, data)`` on every write, before recording it."""

    def __init__(self, check, conn_id: int) -> None:
        super().__init__()
        self.check = check
        self.conn_id = conn_id

    def writelines(self, chunks) -> None:
        self.check(self, b"".join(chunks))
        super().writelines(chunks)


def log_records(log) -> dict[int, tuple]:
    out = {}
    for _h, records in iter_batches(log.read(log.log_start_offset, 1 << 24)):
        for r in records:
            key = decode_key(r.key)
            if isinstance(key, OffsetKey):
                out[r.offset] = (key.group, key.partition, decode_value(key, r.value).offset)
    return out


@pytest.mark.parametrize("mode", ["never", "always"])
@pytest.mark.parametrize("seed", range(6))
async def test_random_reads_and_turns_keep_order_and_log_first(tmp_path, mode, seed):
    rng = random.Random(seed)
    async with Broker(tmp_path, overrides={"log.fsync.mode": mode}) as b:
        await b.app.wait_loaded()
        await b.app.topics.create("t", 4)
        shard = b.app.coordinator.shards[0]
        log = shard.log
        sent: dict[int, dict[int, tuple]] = {}  # conn -> cid -> request
        last_cid: dict[int, int] = {}
        problems: list[str] = []

        def check(transport, data: bytes) -> None:
            records = log_records(log)
            durable_to = log.durability.recovery_point
            pos = 0
            while pos < len(data):
                size = int.from_bytes(data[pos:pos + 4], "big")
                cid = int.from_bytes(data[pos + 4:pos + 8], "big")
                conn_id = transport.conn_id
                if cid <= last_cid.get(conn_id, -1):
                    problems.append(f"conn {conn_id}: cid {cid} after {last_cid[conn_id]}")
                last_cid[conn_id] = cid
                req = sent[conn_id][cid]
                if req[0] == "commit":
                    _h, body = decode(8, 8, data[pos + 4:pos + 4 + size])
                    if body.topics[0].partitions[0].error_code == 0:
                        want = (req[1], req[2], req[3])
                        at = [o for o, v in records.items() if v == want]
                        if not at:
                            problems.append(f"commit {want} answered before it was in the log")
                        elif mode == "always" and durable_to <= max(at):
                            problems.append(f"commit {want} answered before fsync ({durable_to} <= {max(at)})")
                pos += 4 + size

        conns = []
        for i in range(4):
            conn = Connection(b.app.server)
            conn.connection_made(CheckingTransport(check, i))
            conns.append(conn)
            sent[i] = {}
        next_offset = 0
        for _round in range(60):
            for i, conn in enumerate(conns):
                if rng.random() < 0.5:
                    continue
                frames = []
                for _ in range(rng.randint(1, 4)):
                    cid = len(sent[i])
                    group = f"g{rng.randint(0, 2)}"
                    if rng.random() < 0.75:
                        next_offset += 1
                        p = rng.randint(0, 3)
                        sent[i][cid] = ("commit", group, p, next_offset)
                        frames.append(commit(cid, group, p, next_offset))
                    else:
                        sent[i][cid] = ("fetch", group)
                        frames.append(fetch(cid, group))
                conn.data_received(b"".join(frames))
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)
            if rng.random() < 0.2:
                await asyncio.sleep(0.002)
        for _ in range(200):
            await asyncio.sleep(0)
            if all(not c.queue and not c.held for c in conns):
                break
            await asyncio.sleep(0.005)
        assert problems == []
        assert all(not c.queue and not c.held for c in conns)
        for i in range(len(conns)):
            assert last_cid.get(i, -1) == len(sent[i]) - 1, f"conn {i} did not get every answer"
        live = shard.persisted_view()
    async with Broker(tmp_path, overrides={"log.fsync.mode": mode}) as b:
        await b.app.wait_loaded()
        assert b.app.coordinator.shards[0].persisted_view() == live
