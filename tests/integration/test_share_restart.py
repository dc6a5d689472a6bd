"""A share-partition resumes from its durable state after ``kill -9`` of ``odradek serve``.

Acknowledged records (ACCEPT, REJECT) are never redelivered; records that were released
come back with their delivery count; records that were acquired and not acknowledged at the
kill (acquisition is not persisted, as in Kafka) come back too, none is lost; the start
offset DescribeShareGroupOffsets shows is the one before the kill.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from odradek.testing.process import SERVE, free_port, serve_args, stop, wait_until_serving

from .share_wire import (
    ACCEPT,
    REJECT,
    RELEASE,
    acks,
    acquired,
    create_topic,
    describe_offsets,
    fetch_topics,
    init_share,
    produce,
    share_ack,
    share_fetch,
    topic_id,
)
from .share_wire import client as share_client

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]


def _start(data: Path, port: int, fsync: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([*SERVE, *serve_args([f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}",
                                                  "log.level=warning", f"log.fsync.mode={fsync}"])],
                            cwd=data, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until_serving(proc, port)
    return proc


@pytest.mark.parametrize("fsync", ["never", "always"])
def test_kill_9_loses_no_acknowledgement_and_no_acquired_record(tmp_path, fsync):
    port = free_port()
    proc = _start(tmp_path, port, fsync)
    try:
        with share_client(("127.0.0.1", port)) as c:
            create_topic(c, "t")
            produce(c, "t", 4, 5)  # offsets 0..19 in batches of 5
            init_share(c, "g", "t")
            tid = topic_id(c, "t")
            assert acquired(share_fetch(c, "g", "m1", 0, fetch_topics(tid, 0), max_records=15)) == [(0, 14, 1)]
            r = share_ack(c, "g", "m1", 1, acks(tid, 0, (0, 4, [ACCEPT]), (5, 6, [RELEASE]), (10, 14, [REJECT])))
            assert r.error_code == 0 and all(p.error_code == 0 for t in r.responses for p in t.partitions)
            # 7..9 stay acquired, unacknowledged, when the broker dies: killed while m1's connection is
            # open (once it closes, the session's end releases them in the background, and a release
            # the broker wrote before the kill comes back as a delivery count of 1, not 0)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        proc = _start(tmp_path, port, fsync)
        with share_client(("127.0.0.1", port)) as c:
            row = describe_offsets(c, "g", "t").groups[0].topics[0].partitions[0]
            assert row.start_offset == 5
            got = acquired(share_fetch(c, "g", "m2", 0, fetch_topics(tid, 0)))
            assert got == [(5, 6, 2), (7, 9, 1), (15, 19, 1)]
            share_fetch(c, "g", "m2", 1, acks(tid, 0, (5, 9, [ACCEPT]), (15, 19, [ACCEPT])))
            row = describe_offsets(c, "g", "t").groups[0].topics[0].partitions[0]
            assert (row.start_offset, row.lag) == (20, 0)
    finally:
        stop(proc)


def test_a_confluent_share_consumer_across_kill_9_loses_no_acknowledgement(tmp_path):
    """confluent-kafka's ``ShareConsumer`` (explicit acknowledgement) kept open across the kill:
    what it accepted or rejected before the kill never comes back, what it released comes back
    with its delivery count, and the start offset is where the acknowledgements left it.  (A
    ShareConsumer must acknowledge a poll's records before it polls again, so records acquired
    and unacknowledged at the kill are the raw-frame test's above.)"""
    ck = pytest.importorskip("confluent_kafka")
    if not hasattr(ck, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer (2.15+)")
    port = free_port()
    proc = _start(tmp_path, port, "always")
    consumer = ck.ShareConsumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "ck-g",
                                 "share.acknowledgement.mode": "explicit"})
    kinds = {**dict.fromkeys(range(5), ck.AcknowledgeType.ACCEPT), 5: ck.AcknowledgeType.RELEASE,
             6: ck.AcknowledgeType.RELEASE, **dict.fromkeys(range(7, 10), ck.AcknowledgeType.REJECT)}
    try:
        with share_client(("127.0.0.1", port)) as c:
            create_topic(c, "t")
            produce(c, "t", 2, 5)  # offsets 0..9
            init_share(c, "ck-g", "t")  # the group reads from offset 0
        consumer.subscribe(["t"])
        first = _poll(consumer, 10, kinds)
        assert sorted(m.offset() for m in first) == list(range(10))
        consumer.commit_sync()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc = _start(tmp_path, port, "always")
        again = _poll(consumer, 2, dict.fromkeys((5, 6), ck.AcknowledgeType.ACCEPT), seconds=60)
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [(5, 2), (6, 2)]
        consumer.commit_sync()
        with share_client(("127.0.0.1", port)) as c:
            row = describe_offsets(c, "ck-g", "t").groups[0].topics[0].partitions[0]
            assert (row.start_offset, row.lag) == (10, 0)
    finally:
        consumer.close()
        stop(proc)


def _poll(consumer, count: int, kinds: dict, seconds: float = 30) -> list:
    """Messages polled until ``count`` arrived, each acknowledged as ``kinds`` says by offset
    (anything else ACCEPT) before the next poll, as explicit acknowledgement requires."""
    accept = type(next(iter(kinds.values()))).ACCEPT
    got: list = []
    deadline = time.monotonic() + seconds
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {sorted(m.offset() for m in got)}"
        for m in consumer.poll(0.5) or []:
            if m.error() is None:
                got.append(m)
                consumer.acknowledge(m, kinds.get(m.offset(), accept))
    return got
