"""What a cluster in one process costs, and how fast clients follow a leader move.

Two in-process brokers side by side: one broker (``odradek.brokers=1``) and a
cluster of three.  One raw-frame client per broker sends sequential acks=1
Produce v9 and OffsetCommit v8 requests over loopback to the partition's
leader and the group's coordinator; rounds alternate between the two and the
median rate per round is printed with the 3-brokers/1-broker ratio (the
leadership guard's cost).  Then, on the cluster, each client family
(kafka-python, aiokafka, confluent-kafka) sends one record, the partition's
leader moves, and the time until the next record is acknowledged is printed.

    python scripts/bench_cluster.py [--requests 3000] [--rounds 5] [--moves 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchkit as kit  # noqa: E402
from benchkit import GROUP, OFFSET_COMMIT, PRODUCE, TOPIC  # noqa: E402

from odradek.broker import logging_setup  # noqa: E402
from odradek.testing import ThreadedBroker  # noqa: E402


def port_of(b: ThreadedBroker, api: int) -> int:
    """The port of the node that serves ``api``: the partition's leader, the group's coordinator."""
    cluster = b.app.cluster
    if cluster is None:
        return b.app.endpoint.port
    node = cluster.state(TOPIC, 0).leader if api == PRODUCE else cluster.coordinator(GROUP, False)
    return cluster.endpoints[node]["PLAINTEXT"].port


def guard_cost(b: ThreadedBroker, api: int) -> float:
    """Microseconds the leadership guard adds to one request (the handler replaced by a no-op)."""
    from odradek.broker.cluster import guard  # noqa: PLC0415
    from odradek.broker.dispatch import RequestContext  # noqa: PLC0415
    from odradek.protocol.registry import APIS  # noqa: PLC0415

    version, body = kit.request(api)
    req = APIS[api].request.parse(APIS[api].request.build(body, version), version)
    cluster = b.app.cluster
    node = cluster.state(TOPIC, 0).leader if api == PRODUCE else cluster.coordinator(GROUP, False)
    ctx = RequestContext(api, version, 1, "bench", "127.0.0.1", 1, node_id=node)
    if api == PRODUCE:
        return kit.cpu_us(guard._partition_guard, cluster, lambda _ctx, _req: None, ctx, req)
    return kit.cpu_us(guard._coordinator_guard, cluster, lambda _ctx, _req: None, "group_id", False, ctx, req)


def other_node(b: ThreadedBroker) -> int:
    state = b.call(lambda: b.app.cluster.state(TOPIC, 0))
    return next(n for n in state.replicas if n != state.leader) if len(state.replicas) > 1 else \
        next(n for n in b.app.cluster.nodes if n != state.leader)


def bootstrap(b: ThreadedBroker) -> str:
    return b.broker.bootstrap_servers


def follow_kafka_python(b: ThreadedBroker) -> float:
    from kafka import KafkaProducer  # noqa: PLC0415

    p = KafkaProducer(bootstrap_servers=bootstrap(b), retry_backoff_ms=10)
    try:
        p.send(TOPIC, b"warm", partition=0).get(10)
        b.control("move_leader", topic=TOPIC, partition=0, node=other_node(b))
        start = time.perf_counter()
        p.send(TOPIC, b"after", partition=0).get(30)
        return time.perf_counter() - start
    finally:
        p.close()


def follow_confluent(b: ThreadedBroker) -> float:
    from confluent_kafka import Producer  # noqa: PLC0415

    p = Producer({"bootstrap.servers": bootstrap(b), "linger.ms": 0, "retry.backoff.ms": 10})
    p.produce(TOPIC, b"warm", partition=0)
    p.flush(10)
    b.control("move_leader", topic=TOPIC, partition=0, node=other_node(b))
    start = time.perf_counter()
    p.produce(TOPIC, b"after", partition=0)
    assert p.flush(30) == 0
    return time.perf_counter() - start


def follow_aiokafka(b: ThreadedBroker) -> float:
    from aiokafka import AIOKafkaProducer  # noqa: PLC0415

    async def run() -> float:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap(b), retry_backoff_ms=10)
        await p.start()
        try:
            await (await p.send(TOPIC, b"warm", partition=0))
            await asyncio.to_thread(b.control, "move_leader", topic=TOPIC, partition=0, node=other_node(b))
            start = time.perf_counter()
            await (await p.send(TOPIC, b"after", partition=0))
            return time.perf_counter() - start
        finally:
            await p.stop()

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--moves", type=int, default=5)
    args = parser.parse_args()
    logging_setup.configure("text", "warning")
    with kit.brokers({}, {"overrides": {"default.replication.factor": "3"}, "brokers": 3}) as (one, three):
        kit.create_topic(one)
        kit.create_topic(three)
        for api, name in ((PRODUCE, "Produce acks=1"), (OFFSET_COMMIT, "OffsetCommit")):
            a, c = kit.alternating_medians(
                args.rounds, partial(kit.request_rate, port_of(one, api), api, args.requests, check=True),
                partial(kit.request_rate, port_of(three, api), api, args.requests, check=True))
            print(f"{name:16} 1 broker {a:8.0f}/s   3 brokers {c:8.0f}/s   ratio {c / a:.2f}   "
                  f"guard CPU {guard_cost(three, api):.1f} us/request")
        for name, follow in (("kafka-python", follow_kafka_python), ("aiokafka", follow_aiokafka),
                             ("confluent-kafka", follow_confluent)):
            times = [follow(three) for _ in range(args.moves)]
            print(f"{name:16} leader move -> next produce acknowledged: median "
                  f"{statistics.median(times) * 1000:7.1f} ms (max {max(times) * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
