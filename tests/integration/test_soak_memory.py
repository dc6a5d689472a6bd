"""Hostile traffic repeated for minutes does not grow the broker's memory.

What a user relies on: a broker left running under a fuzzer (or a buggy
client) keeps a flat resident set once what the traffic legitimately
creates (topics, partitions, transactional ids, groups) exists.  The broker
runs as its own process (``odradek serve``, with its garbage-collector
policy); one warm-up pass of the mutated frames for every served API and
version creates that state and reaches the allocator's high-water marks,
then the same passes repeat and the RSS over the second half of the run may
grow by at most 5 MB.  Bounded to about two minutes.
"""

from __future__ import annotations

import time

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.records import encode_batch
from odradek.testing.process import memory_mb, serving
from tests.hostile_requests import ServedTable, fuzz

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHURN_PARTITIONS = 400  # 800 open files while it lives: under the common 1,024 limit
SEEDS = range(12)  # one pass: every served API and version, once per seed (mutated and not)
PASSES = 5
BUDGET_S = 170


def churn(port: int, name: str) -> None:
    """What the fuzzer's CreateTopics with 5,000 partitions does, smaller: a topic of many
    partitions created, produced to, listed and deleted."""
    with SyncClient("127.0.0.1", port, timeout=120) as c:
        r = c.request(19, 4, {"topics": [{"name": name, "num_partitions": CHURN_PARTITIONS, "replication_factor": -1,
                                          "assignments": [], "configs": []}], "timeout_ms": 60000,
                              "validate_only": False})
        assert r.topics[0].error_code == 0, r
        for p in range(0, CHURN_PARTITIONS, 10):
            c.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": name, "partition_data": [{"index": p, "records": encode_batch([(b"k", b"v" * 100)])}]}]})
        c.request(3, 1, {"topics": None})
        c.request(35, 1, {"topics": None})
        assert c.request(20, 4, {"topic_names": [name], "timeout_ms": 60000}).responses[0].error_code == 0


def one_pass(port: int, served: ServedTable, n: int) -> int:
    churn(port, f"churn-{n}")
    return sum(fuzz(port, served, 4, seed=seed, wait=2.0, park_wait=0.05).sent for seed in SEEDS)


def test_rss_is_flat_under_repeated_fuzzing():
    deadline = time.monotonic() + BUDGET_S
    with serving() as (proc, port):
        with SyncClient("127.0.0.1", port) as c:
            served = ServedTable(c.request(18, 0, {}).api_keys)
        one_pass(port, served, 0)  # warm-up: the state the traffic creates, the allocator's peaks
        samples = []
        for n in range(1, PASSES + 1):
            if time.monotonic() > deadline:
                break
            one_pass(port, served, n)
            samples.append(memory_mb(proc.pid)["VmRSS"])
        assert proc.poll() is None
    assert len(samples) >= 4, f"only {len(samples)} passes in {BUDGET_S} s"
    half = samples[len(samples) // 2 - 1:]
    print("RSS per pass (MB):", " ".join(f"{s:.1f}" for s in samples))
    assert max(half) - half[0] <= 5.0, f"RSS grew {max(half) - half[0]:.1f} MB over the last half: {samples}"
