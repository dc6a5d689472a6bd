#!/usr/bin/env python3
"""Acknowledged config changes survive ``kill -9`` of the broker at random moments.

Loop (bounded by ``--cycles`` and ``--seconds``; loopback only):

1. start ``odradek serve`` on a data dir (the same one every cycle);
2. one connection per resource (a few topics, this broker, the cluster
   default) sends IncrementalAlterConfigs with increasing values
   (``retention.ms`` on topics, ``log.retention.bytes`` on the broker
   resources), recording the last acknowledged and the last sent value;
   another produces records to the topics;
3. SIGKILL the broker at a random moment of that load;
4. restart it and check that ``topics.json`` and ``broker-configs.json`` are
   whole, that every resource reads back (DescribeConfigs) a value between its
   last acknowledged and its last sent one, and that every acknowledged
   record is still there (ListOffsets).

    python scripts/crash_configs.py [--cycles 10] [--seconds 120]

Exit status 0 when every check passed.  ``run()`` is what the tests call.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import SyncClient  # noqa: E402
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.testing.process import free_port  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from crash_commits import Broker  # noqa: E402

PRODUCE, LIST_OFFSETS, CREATE, DESCRIBE_CONFIGS, INCREMENTAL_ALTER = 0, 2, 19, 32, 44
TOPIC, BROKER = 2, 4
TOPICS = [f"cfg-{i}" for i in range(3)]
NODE = "1"


@dataclass
class Ledger:
    """Per resource: the last value acknowledged and the last one sent; records acknowledged per topic."""

    acked: dict[tuple[int, str], int] = field(default_factory=dict)
    sent: dict[tuple[int, str], int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)
    next_value: int = 1_000_000


def _key(rtype: int) -> str:
    return "retention.ms" if rtype == TOPIC else "log.retention.bytes"


def create_topics(port: int) -> None:
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        r = c.request(CREATE, 5, {"topics": [{"name": t, "num_partitions": 1, "replication_factor": 1,
                                               "assignments": [], "configs": []} for t in TOPICS],
                                  "timeout_ms": 30000, "validate_only": False})
    for t in r.topics:
        if t.error_code not in (0, 36):
            raise RuntimeError(f"CreateTopics {t.name}: error {t.error_code}")


def _alter_loop(port: int, rtype: int, name: str, ledger: Ledger, lock: threading.Lock, stop: threading.Event):
    try:
        with SyncClient("127.0.0.1", port, timeout=10) as c:
            while not stop.is_set():
                with lock:
                    ledger.next_value += 1
                    value = ledger.next_value
                    ledger.sent[(rtype, name)] = value
                r = c.request(INCREMENTAL_ALTER, 1, {"resources": [{
                    "resource_type": rtype, "resource_name": name,
                    "configs": [{"name": _key(rtype), "config_operation": 0, "value": str(value)}]}],
                    "validate_only": False})
                if r.responses[0].error_code != 0:
                    raise RuntimeError(f"alter {name}: error {r.responses[0].error_code}")
                with lock:
                    ledger.acked[(rtype, name)] = value
    except (OSError, EOFError, ConnectionError):
        pass  # the broker was killed


def _produce_loop(port: int, ledger: Ledger, lock: threading.Lock, stop: threading.Event):
    try:
        with SyncClient("127.0.0.1", port, timeout=10) as c:
            i = 0
            while not stop.is_set():
                topic = TOPICS[i % len(TOPICS)]
                i += 1
                r = c.request(PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                           "topic_data": [{"name": topic, "partition_data": [
                                               {"index": 0, "records": encode_batch([(b"k", b"v" * 100)])}]}]})
                if r.responses[0].partition_responses[0].error_code == 0:
                    with lock:
                        ledger.records[topic] = ledger.records.get(topic, 0) + 1
    except (OSError, EOFError, ConnectionError):
        pass


def described(port: int) -> dict[tuple[int, str], int | None]:
    resources = [(TOPIC, t) for t in TOPICS] + [(BROKER, NODE), (BROKER, "")]
    out: dict[tuple[int, str], int | None] = {}
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        r = c.request(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": t, "resource_name": n, "configuration_keys": [_key(t)]} for t, n in resources],
            "include_synonyms": True, "include_documentation": False})
    for (t, n), res in zip(resources, r.results, strict=True):
        synonyms = [s for c in res.configs for s in c.synonyms]
        wanted = {TOPIC: 1, BROKER: 2 if n else 3}[t]  # the source this resource's own value reports
        mine = [s.value for s in synonyms if s.source == wanted]
        out[(t, n)] = int(mine[0]) if mine else None
    return out


def end_offsets(port: int) -> dict[str, int]:
    with SyncClient("127.0.0.1", port, timeout=30) as c:
        r = c.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
            for t in TOPICS]})
    return {t.name: t.partitions[0].offset for t in r.topics}


def check(data_dir: Path, seen: dict[tuple[int, str], int | None], ends: dict[str, int], ledger: Ledger) -> list[str]:
    problems = []
    for name in ("topics.json", "broker-configs.json"):
        path = data_dir / name
        if path.exists():
            try:
                json.loads(path.read_text())
            except ValueError as exc:
                problems.append(f"{name} is torn: {exc}")
    for key, sent in ledger.sent.items():
        acked = ledger.acked.get(key)
        got = seen.get(key)
        if acked is not None and (got is None or got < acked):
            problems.append(f"{key}: acknowledged {acked}, reads back {got}")
        elif got is not None and got > sent:
            problems.append(f"{key}: reads back {got}, more than ever sent ({sent})")
    for topic, n in ledger.records.items():
        if ends.get(topic, 0) < n:
            problems.append(f"{topic}: {n} records acknowledged, log ends at {ends.get(topic)}")
    return problems


def run(cycles: int = 10, seconds: float = 120.0, seed: int | None = None,
        data_dir: Path | None = None) -> list[str]:
    rng = random.Random(seed)
    own = data_dir is None
    data_dir = Path(data_dir or tempfile.mkdtemp(prefix="odradek-crash-configs-"))
    port = free_port()
    broker = Broker(data_dir / "data", port, "never", data_dir / "broker.log")
    ledger = Ledger()
    problems: list[str] = []
    deadline = time.monotonic() + seconds
    try:
        broker.start()
        create_topics(port)
        for cycle in range(cycles):
            if time.monotonic() > deadline:
                break
            stop, lock = threading.Event(), threading.Lock()
            resources = [(TOPIC, t) for t in TOPICS] + [(BROKER, NODE), (BROKER, "")]
            threads = [threading.Thread(target=_alter_loop, args=(port, t, n, ledger, lock, stop)) for t, n in resources]
            threads.append(threading.Thread(target=_produce_loop, args=(port, ledger, lock, stop)))
            for th in threads:
                th.start()
            time.sleep(rng.uniform(0.2, 1.5))
            broker.kill()
            stop.set()
            for th in threads:
                th.join(15)
            broker.start()
            found = check(data_dir / "data", described(port), end_offsets(port), ledger)
            problems += [f"cycle {cycle}: {p}" for p in found]
            with lock:  # a change or record sent but unanswered may or may not have survived: now it is known
                for key, value in described(port).items():
                    if value is not None:
                        ledger.acked[key] = ledger.sent[key] = value
                ledger.records = end_offsets(port)
    finally:
        broker.stop()
        if own and not problems:
            shutil.rmtree(data_dir, ignore_errors=True)
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int)
    args = ap.parse_args()
    problems = run(args.cycles, args.seconds, args.seed)
    for p in problems:
        print(p)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
