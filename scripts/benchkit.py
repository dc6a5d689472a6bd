"""What the benchmarks in ``scripts/`` share, so each says only what it compares.

- Side by side over TCP (``bench_acls.py``, ``bench_cluster.py``): in-process brokers in
  temporary data dirs (``brokers``), the bench topic (``create_topic``), the two requests a
  client repeats -- Produce v9 acks=1 of one 100-byte record and an admin OffsetCommit v8
  (``request``) -- their sequential rate over one raw-frame client (``request_rate``), rounds
  alternating between two setups with the median of each (``alternating_medians``), and the CPU
  one call costs (``cpu_us``).
- In process, no sockets (``bench_request_path.py``, ``bench_fetch_path.py``,
  ``bench_heartbeat_path.py``): ``FakeTransport``, what a ``server.Connection`` writes to.

Import it after the script has put the tree to measure on ``sys.path`` (an A/B names it with
``PYTHONPATH``); the script's own folder is on the path already.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch
from odradek.testing import ThreadedBroker

TOPIC, GROUP = "bench-orders", "bench-group"
PRODUCE, OFFSET_COMMIT = 0, 8


@contextlib.contextmanager
def brokers(*configs: dict[str, Any]) -> Iterator[list[ThreadedBroker]]:
    """Started in-process brokers, one per ``configs`` entry (``ThreadedBroker``'s keyword
    arguments), each in its own temporary data dir; closed, in order, at the end."""
    with contextlib.ExitStack() as dirs:
        started: list[ThreadedBroker] = []
        try:
            for config in configs:
                data_dir = dirs.enter_context(tempfile.TemporaryDirectory())
                started.append(ThreadedBroker(data_dir, **config).start())
            yield started
        finally:
            for b in started:
                b.close()


def create_topic(b: ThreadedBroker) -> None:
    """The bench topic, one partition (CreateTopics v5 to the broker's first listener)."""
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        c.request(19, 5, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": -1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000,
                          "validate_only": False})


def request(api: int) -> tuple[int, dict]:
    """(version, body) of what the client repeats: Produce v9 acks=1 of one 100-byte record to
    partition 0, or OffsetCommit v8 of offset 1 for it by an admin (no member)."""
    if api == PRODUCE:
        return 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": encode_batch([(None, b"x" * 100)])}]}]}
    return 8, {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
               "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                   {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                    "committed_metadata": ""}]}]}


def request_rate(port: int, api: int, n: int, *, check: bool = False) -> float:
    """Requests per second: ``n`` sequential ``request(api)`` over one client.  ``check``: one
    first, untimed, whose partition must answer no error."""
    version, body = request(api)
    with SyncClient("127.0.0.1", port) as c:
        if check:
            first = c.request(api, version, body)
            errors = [p.error_code for t in (first.responses if api == PRODUCE else first.topics)
                      for p in (t.partition_responses if api == PRODUCE else t.partitions)]
            assert errors == [0], errors
        start = time.perf_counter()
        for _ in range(n):
            c.request(api, version, body)
        return n / (time.perf_counter() - start)


def alternating_medians(rounds: int, first: Callable[[], float], second: Callable[[], float]
                        ) -> tuple[float, float]:
    """The medians of ``first`` and ``second`` measured in alternating rounds, so both see the
    machine's same drift."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        a.append(first())
        b.append(second())
    return statistics.median(a), statistics.median(b)


def cpu_us(call: Callable[..., Any], *args: Any, n: int = 20000) -> float:
    """Process CPU microseconds per ``call(*args)``, over ``n`` calls."""
    start = time.process_time()
    for _ in range(n):
        call(*args)
    return (time.process_time() - start) / n * 1e6


class FakeTransport:
    """What a ``server.Connection`` writes to in process: it counts the writes."""

    def __init__(self) -> None:
        self.written = 0

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def writelines(self, chunks) -> None:
        self.written += len(chunks)

    def write(self, data) -> None:
        self.written += 1

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class KeepingTransport(FakeTransport):
    """A ``FakeTransport`` that keeps the bytes written (``chunks``), for a bench that reads the answers."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []

    def writelines(self, chunks) -> None:
        self.chunks.extend(bytes(c) for c in chunks)

    def write(self, data) -> None:
        self.chunks.append(bytes(data))
