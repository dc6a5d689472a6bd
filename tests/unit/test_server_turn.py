"""The server's turn: every read of one loop iteration is appended together, then answered.

Connections here are the server's own ``Connection`` objects on a recording
transport, so "several reads in one iteration" is exact rather than hoped
for; the broker behind them (coordinator, logs) is the real one.
"""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker.runtime.runtime import ShardStatus
from odradek.broker.server import Connection
from odradek.broker.wire_client import decode, encode
from odradek.protocol.records import iter_batches
from odradek.testing import Broker


class RecordingTransport:
    """What the server wrote, and whether it closed; enough of a transport for ``Connection``."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def writelines(self, chunks) -> None:
        self.written.append(b"".join(chunks))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def get_extra_info(self, name: str):
        return ("127.0.0.1", 1) if name == "peername" else None

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def commit(cid: int, group: str, offset: int) -> bytes:
    return encode(8, 8, cid, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "retention_time_ms": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": 0,
             "commit_timestamp": -1, "committed_metadata": ""}]}]})


def answers(transport: RecordingTransport) -> list[int]:
    """The per-partition error codes of the OffsetCommit answers written so far."""
    data = b"".join(transport.written)
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        _header, body = decode(8, 8, data[pos + 4:pos + 4 + size])
        out.append(body.topics[0].partitions[0].error_code)
        pos += 4 + size
    return out


@pytest.fixture
async def broker(tmp_path):
    async with Broker(tmp_path) as b:  # offsets.topic.num.partitions=1: every group in one shard
        await b.app.topics.create("t", 1)
        yield b


def connect(broker) -> tuple[Connection, RecordingTransport]:
    conn = Connection(broker.app.server)
    transport = RecordingTransport()
    conn.connection_made(transport)
    return conn, transport


def batches(log, start: int) -> list[list[int]]:
    return [[r.offset for r in records] for _h, records in iter_batches(log.read(start, 1 << 20))]


async def test_one_iterations_reads_are_one_batch_and_answered_after_it(broker):
    log = broker.app.coordinator.shard_for("a").log
    start = log.log_end_offset
    (a, ta), (b, tb) = connect(broker), connect(broker)
    a.data_received(commit(1, "a", 10) + commit(2, "a", 11))
    b.data_received(commit(1, "b", 20))
    assert ta.written == tb.written == []  # held until the turn ends ...
    assert log.log_end_offset == start  # ... which appends first
    await asyncio.sleep(0)
    assert answers(ta) == [0, 0] and answers(tb) == [0]
    assert len(ta.written) == 1  # one write per connection
    assert batches(log, start) == [[start, start + 1, start + 2]]


async def test_a_failed_append_closes_the_waiting_connections_unanswered(broker, monkeypatch):
    shard = broker.app.coordinator.shard_for("a")

    def disk_gone(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(shard.log, "append_records", disk_gone)
    (a, ta), (b, tb) = connect(broker), connect(broker)
    a.data_received(commit(1, "a", 10))
    b.data_received(commit(1, "b", 20))
    await asyncio.sleep(0)
    assert ta.written == tb.written == [] and ta.closed and tb.closed
    assert shard.status is ShardStatus.FAILED


async def test_answers_before_a_bad_frame_go_out_before_the_close(broker):
    log = broker.app.coordinator.shard_for("a").log
    start = log.log_end_offset
    a, ta = connect(broker)
    a.data_received(commit(1, "a", 10) + b"\x00\x00\x00\x02\x00\x08")  # then a frame too short for a header
    assert answers(ta) == [0] and ta.closed
    assert batches(log, start) == [[start]]  # appended before that answer was written
    await asyncio.sleep(0)
    assert answers(ta) == [0]


async def test_a_read_and_the_clients_half_close_in_one_callback_still_get_answers(broker):
    log = broker.app.coordinator.shard_for("a").log
    start = log.log_end_offset
    a, ta = connect(broker)
    a.data_received(commit(1, "a", 10) + commit(2, "a", 11))  # the last read, then the FIN, before the turn ends
    if not a.eof_received():  # what the event loop does with False: close our side
        ta.close()
    await asyncio.sleep(0)
    assert answers(ta) == [0, 0]
    assert batches(log, start) == [[start, start + 1]]  # written before they were answered
