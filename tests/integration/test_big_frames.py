"""What a big request costs the broker's memory: one copy of its frame.

A 50 MiB Produce batch refused as MESSAGE_TOO_LARGE (from its header: the
size alone decides) used to raise the broker's RSS by three times its size
(the read chunks joined, copied whole, then sliced).  The broker runs as its
own process, so its peak resident set (``VmHWM``) is the broker's alone.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from odradek.broker.wire_client import SyncClient, decode, encode
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch, iter_records
from odradek.testing import ThreadedBroker
from odradek.testing.process import memory_mb, reset_peak, serving
from tests.integration.wire_helpers import create_topic

pytestmark = pytest.mark.integration

MIB = 1 << 20


def produce(c: SyncClient, topic: str, batch: bytes):
    r = c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def test_a_refused_50_mib_batch_costs_at_most_one_copy_of_its_frame():
    batch = encode_batch([(b"k", bytes(range(256)) * (50 * MIB // 256))])
    with serving() as (proc, port), SyncClient("127.0.0.1", port, timeout=60) as c:
        assert produce(c, "warm", encode_batch([(b"k", b"v")])).error_code == ErrorCode.NONE
        before = memory_mb(proc.pid)["VmRSS"]
        reset_peak(proc.pid)
        answer = produce(c, "warm", batch)
        growth = memory_mb(proc.pid)["VmHWM"] - before
    print(f"peak RSS growth {growth:.0f} MiB for a {len(batch) / MIB:.0f} MiB batch")
    assert answer.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert growth < 1.5 * len(batch) / MIB, f"peak RSS grew {growth:.0f} MiB for a {len(batch) / MIB:.0f} MiB batch"


def test_a_big_frame_and_the_frames_behind_it_in_the_same_read_are_answered(tmp_path):
    """A big frame, received into its own buffer, is decoded where it lies; what follows it in the
    same read is answered after it, in order, and the accepted batch reads back byte for byte."""
    batch = encode_batch([(b"k", bytes(range(256)) * (3 * MIB // 256))])
    small = encode_batch([(b"k", b"after")])
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000}
    with ThreadedBroker(tmp_path) as b:
        create_topic(b, "big", configs={"max.message.bytes": str(8 * MIB)})
        with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
            c.send_raw(b"".join(encode(0, 9, cid, {**body, "topic_data": [
                {"name": "big", "partition_data": [{"index": 0, "records": data}]}]})
                for cid, data in ((1, batch), (2, small))))
            answers = [decode(0, 9, c.recv_frame()) for _ in range(2)]
            fetched = c.request(1, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 16 * MIB,
                                        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                        "forgotten_topics_data": [], "rack_id": "", "topics": [
                                            {"topic": "big", "partitions": [
                                                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                 "log_start_offset": -1, "partition_max_bytes": 16 * MIB}]}]})
    assert [(cid, r.responses[0].partition_responses[0].error_code) for cid, r in answers] == [(1, 0), (2, 0)]
    values = [r.value for r in iter_records(fetched.responses[0].partitions[0].records)]
    assert values == [bytes(range(256)) * (3 * MIB // 256), b"after"]


def test_announced_big_frames_cost_what_arrives_not_what_they_announce():
    """200 connections announcing 8 MiB frames and sending a few bytes of each hold a few bytes
    each, not 8 MiB (a buffer of the announced size is only paid for as it fills)."""
    with serving() as (proc, port):
        before = memory_mb(proc.pid)["VmRSS"]
        reset_peak(proc.pid)
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
        try:
            for s in socks:
                s.sendall(struct.pack(">i", 8 * MIB) + b"\x00\x00\x00\x09" + b"x" * 100)
            time.sleep(1.0)
            growth = memory_mb(proc.pid)["VmHWM"] - before
        finally:
            for s in socks:
                s.close()
    assert growth < 40, f"peak RSS grew {growth:.0f} MiB for 200 announced 8 MiB frames"
