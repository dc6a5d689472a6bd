"""Records/s through one share group with 1, 2 and 4 ShareConsumers, beside a classic consumer group.

One in-process broker (``ThreadedBroker``); per round a fresh topic of ``--partitions``
partitions filled with ``--records`` records of 100 bytes, then read whole, in turn, by a
classic consumer group (one confluent-kafka ``Consumer``, auto commit) and by share groups
(confluent-kafka ``ShareConsumer``s, implicit acknowledgement: every batch is accepted by the
next poll) of 1, 2 and 4 consumers, each polled from its own thread, every group reading from
the start (``share.auto.offset.reset=earliest`` set on each share group).  The rate counts
from the first record received to the last (joining left out); the ratio to the classic
group's rate is the figure to compare (absolute rates on a shared machine drift).

    python scripts/bench_share.py [--records 20000] [--partitions 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.testing import ThreadedBroker  # noqa: E402

QUIET = {"log_level": 3}


def make_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)


def fill(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **QUIET})
    payload = b"x" * 100
    for i in range(records):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.1)
    p.flush(60)


def classic_consumer(bootstrap: str, topic: str):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"classic-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": True, **QUIET})
    c.subscribe([topic])
    return c, lambda: [m for m in c.consume(500, 0.5) if m.error() is None]


def share_consumer(bootstrap: str, topic: str, group: str):
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    c.subscribe([topic])
    return c, lambda: [m for m in c.poll(0.5) or [] if m.error() is None]


def measure(records: int, topic: str, consumers: list) -> float:
    """The consumers (each polled from its own thread) read ``records`` already in the topic;
    records/s from the first record any of them received to the last."""
    counts = [0] * len(consumers)
    first: list[float] = []
    stop = threading.Event()

    def run(i: int) -> None:
        c, poll = consumers[i]
        try:
            while not stop.is_set():
                got = len(poll())
                if got and not first:
                    first.append(time.perf_counter())
                counts[i] += got
                if sum(counts) >= records:
                    stop.set()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(consumers))]
    for t in threads:
        t.start()
    stop.wait(300)
    end = time.perf_counter()
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / (end - first[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with ThreadedBroker(overrides={"group.share.heartbeat.interval.ms": 500}) as broker:
        bootstrap = broker.bootstrap_servers
        rates: dict[str, list[float]] = {}
        for _r in range(args.rounds):
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            make_topic(bootstrap, topic, args.partitions)
            fill(bootstrap, topic, args.records, args.partitions)
            rates.setdefault("classic group, 1 consumer", []).append(
                measure(args.records, topic, [classic_consumer(bootstrap, topic)]))
            for n in (1, 2, 4):
                group = f"share-{uuid.uuid4().hex[:6]}"
                broker.call(lambda g=group: broker.app.group_configs.set_overrides(
                    g, {"share_auto_offset_reset": "earliest"}))
                rates.setdefault(f"share group, {n} consumer{'s' if n > 1 else ''}", []).append(
                    measure(args.records, topic, [share_consumer(bootstrap, topic, group) for _ in range(n)]))
        base = statistics.median(rates["classic group, 1 consumer"])
        print(f"{args.records} records x {args.rounds} rounds, {args.partitions} partitions (median records/s)")
        for name, values in rates.items():
            med = statistics.median(values)
            print(f"  {name:28} {med:10.0f}/s   {med / base:5.2f}x the classic group")


if __name__ == "__main__":
    main()
