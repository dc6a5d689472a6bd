"""Heavy Produce batches (a compressed area of hundreds of MiB, a walk of many records) are
checked off the event loop and still appended in their connection's order.

What a user relies on: one client's legal near-cap batch does not stall every other client
(Kafka validates on its handler threads), and an idempotent producer pipelining a heavy batch
and then a small one gets both appended in order.  The check is held in its worker thread
(a gate on the record walk), so the tests are deterministic, not timed.
"""

from __future__ import annotations

import threading
import time

import pytest

from odradek.broker.dataplane import batches
from odradek.broker.dataplane.batches import HEAVY_RECORDS
from odradek.broker.wire_client import SyncClient, decode, encode
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import compute_crc, encode_batch
from odradek.testing import ThreadedBroker
from tests.integration.wire_helpers import create_topic

pytestmark = pytest.mark.integration

HEAVY = [(b"k", b"v")] * (HEAVY_RECORDS + 1)


def produce_body(topic: str, batch: bytes, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


class Gate:
    """Holds the record walk of heavy batches (more than HEAVY_RECORDS records) until opened."""

    def __init__(self, monkeypatch) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.walkers: list[str] = []
        real = batches.scan_records

        def gated(data, p, end, count):
            if count > HEAVY_RECORDS:
                self.walkers.append(threading.current_thread().name)
                self.entered.set()
                self.opened.wait(30)
            return real(data, p, end, count)

        monkeypatch.setattr(batches, "scan_records", gated)


def test_a_heavy_batch_is_checked_in_a_worker_thread_while_other_clients_are_served(tmp_path, monkeypatch):
    gate = Gate(monkeypatch)
    with ThreadedBroker(tmp_path) as b:
        create_topic(b, "heavy")
        create_topic(b, "small")
        port = b.app.endpoint.port
        with SyncClient("127.0.0.1", port, timeout=30) as big, SyncClient("127.0.0.1", port, timeout=5) as small:
            try:
                heavy = encode_batch(HEAVY, compression=4)
                big.send_raw(encode(0, 9, 1, produce_body("heavy", heavy)))
                assert gate.entered.wait(10)
                # the loop is free while the heavy batch is checked: another client is answered
                r = small.request(0, 9, produce_body("small", encode_batch([(b"k", b"v")])))
                assert r.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            finally:
                gate.opened.set()
            _cid, r = decode(0, 9, big.recv_frame())
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        captured = b.captured("Produce", topic="heavy")  # the request as it came, not its check
        assert bytes(captured[0].body.topic_data[0].partition_data[0].records) == heavy
    assert gate.walkers and "odradek-broker" not in gate.walkers


def test_a_connection_s_later_produce_appends_after_its_heavy_one(tmp_path, monkeypatch):
    gate = Gate(monkeypatch)
    with ThreadedBroker(tmp_path) as b:
        create_topic(b, "idem")
        with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
            pid = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                    "producer_id": -1, "producer_epoch": -1})
            ids = {"producer_id": pid.producer_id, "producer_epoch": pid.producer_epoch}
            heavy = encode_batch(HEAVY, compression=1, base_sequence=0, **ids)
            small = encode_batch([(b"k", b"last")], base_sequence=len(HEAVY), **ids)
            try:
                c.send_raw(encode(0, 9, 1, produce_body("idem", heavy)))
                assert gate.entered.wait(10)
                c.send_raw(encode(0, 9, 2, produce_body("idem", small)))
            finally:
                gate.opened.set()
            answers = [decode(0, 9, c.recv_frame()) for _ in range(2)]
    assert [cid for cid, _ in answers] == [1, 2]
    parts = [r.responses[0].partition_responses[0] for _, r in answers]
    assert [(p.error_code, p.base_offset) for p in parts] == [(ErrorCode.NONE, 0), (ErrorCode.NONE, len(HEAVY))]


def test_a_refused_heavy_batch_answers_as_before(tmp_path):
    """Checked off the loop, a heavy batch with a bad record still gets Kafka's INVALID_RECORD,
    and one over max.message.bytes MESSAGE_TOO_LARGE (from its header, never decompressed)."""
    bad = bytearray(encode_batch(HEAVY, compression=0))
    bad[-1] ^= 0x7F  # the last record's header count
    bad[17:21] = compute_crc(bad, 0, len(bad)).to_bytes(4, "big")
    with ThreadedBroker(tmp_path) as b:
        create_topic(b, "u")
        create_topic(b, "t", configs={"max.message.bytes": "100000"})
        with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
            r = c.request(0, 9, produce_body("u", bytes(bad)))
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
            r = c.request(0, 9, produce_body("t", encode_batch(HEAVY, compression=0)))
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_a_read_after_a_heavy_produce_on_its_connection_sees_it(tmp_path, monkeypatch):
    """ListOffsets pipelined behind a heavy Produce on the same connection answers the log end
    after that Produce's append, as Kafka, which handles a connection's requests in turn."""
    gate = Gate(monkeypatch)
    latest = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "seen", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    with ThreadedBroker(tmp_path) as b:
        create_topic(b, "seen")
        with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
            try:
                c.send_raw(encode(0, 9, 1, produce_body("seen", encode_batch(HEAVY, compression=1))))
                assert gate.entered.wait(10)
                c.send_raw(encode(2, 7, 2, latest))
                time.sleep(0.3)  # time for the ListOffsets to be read while the check is held
            finally:
                gate.opened.set()
            decode(0, 9, c.recv_frame())
            _cid, r = decode(2, 7, c.recv_frame())
    assert r.topics[0].partitions[0].offset == len(HEAVY)


def test_a_heavy_batch_for_a_topic_of_another_codec_is_recompressed_off_the_loop(tmp_path, monkeypatch):
    """A topic whose ``compression.type`` differs from the producer's codec recompresses on append
    (Kafka's LogValidator); for a heavy batch that is big work too, so it is done with the check
    in the worker thread, and the stored batch is the topic's codec with every record.  The
    area is decompressed once, for the check and the recompression both."""
    from odradek.broker.dataplane import recompress, service
    from odradek.protocol.records import decode_batch

    threads: list[str] = []
    real = service.recompress

    def watched(*args):
        threads.append(threading.current_thread().name)
        return real(*args)

    decompressed: list[int] = []
    for module in (batches, recompress):
        def counted(codec, data, *args, _real=module.decompress, **kwargs):
            decompressed.append(codec)
            return _real(codec, data, *args, **kwargs)
        monkeypatch.setattr(module, "decompress", counted)
    monkeypatch.setattr(service, "recompress", watched)
    with ThreadedBroker(tmp_path) as b:
        create_topic(b, "gz", configs={"compression.type": "gzip"})
        with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
            r = c.request(0, 9, produce_body("gz", encode_batch(HEAVY, compression=4)))
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert threads and "odradek-broker" not in threads
    assert decompressed == [4]  # zstd, once
    segment = next(tmp_path.rglob("gz-0/*.log")).read_bytes()
    h, records = decode_batch(segment, 0)
    assert h.compression == 1 and len(records) == len(HEAVY)


def test_an_in_process_broker_leaves_the_switch_interval_as_it_found_it(tmp_path):
    """The 1 ms GIL switch interval is for the broker's clients while it runs; a test process
    that ran a broker gets its own interval back when the (last) broker stops."""
    import sys  # noqa: PLC0415

    from odradek.broker.dataplane.service import GIL_SWITCH_S  # noqa: PLC0415

    before = sys.getswitchinterval()  # CPython's 5 ms, unless a broker of this session runs
    with ThreadedBroker(tmp_path / "a"):
        assert sys.getswitchinterval() <= GIL_SWITCH_S
        with ThreadedBroker(tmp_path / "b"):
            assert sys.getswitchinterval() <= GIL_SWITCH_S
        assert sys.getswitchinterval() <= GIL_SWITCH_S  # the first one still runs
    assert sys.getswitchinterval() == before
