"""What ACLs cost a client: Produce and OffsetCommit round trips with and without an authorizer.

Two in-process brokers side by side: one without ``authorizer.class.name``
(no guard is installed), one with Kafka's StandardAuthorizer, 200 ACLs
(LITERAL and PREFIXED, on topics and groups, for other users) plus the ones
granting the client.  One raw-frame client per broker sends sequential
acks=1 Produce v9 and OffsetCommit v8 requests over loopback; rounds
alternate between the two brokers and the median rate per round is printed
with the with/without ratio.  Loopback round trips on a shared machine drift
by more than the checks cost, so the guards' own CPU per request (the
authorizer's checks on the same decoded request, the handler replaced by a
no-op) is measured too.

    python scripts/bench_acls.py [--requests 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.wire_client import SyncClient  # noqa: E402
from odradek.protocol.records import encode_batch  # noqa: E402
from odradek.testing import ThreadedBroker  # noqa: E402

TOPIC, GROUP = "bench-orders", "bench-group"
TOPIC_T, GROUP_T, LITERAL, PREFIXED, ALLOW, READ, WRITE, ALL = 2, 3, 3, 4, 3, 3, 4, 2


def acl(rtype: int, name: str, pattern: int, principal: str, op: int) -> dict:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": op, "permission_type": ALLOW}


def setup(b: ThreadedBroker, with_acls: bool) -> None:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        c.request(19, 5, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": -1,
                                      "assignments": [], "configs": []}], "timeout_ms": 5000,
                          "validate_only": False})
        if with_acls:
            others = [acl(TOPIC_T if i % 2 else GROUP_T, f"other-{i}", PREFIXED if i % 3 else LITERAL,
                          f"User:u{i}", ALL) for i in range(200)]
            mine = [acl(TOPIC_T, "bench-", PREFIXED, "User:ANONYMOUS", WRITE),
                    acl(TOPIC_T, TOPIC, LITERAL, "User:ANONYMOUS", READ),
                    acl(GROUP_T, GROUP, LITERAL, "User:ANONYMOUS", READ)]
            codes = [r.error_code for r in c.request(30, 3, {"creations": others + mine}).results]
            assert set(codes) == {0}, codes


def rate(b: ThreadedBroker, api: int, n: int) -> float:
    if api == 0:
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": encode_batch([(None, b"x" * 100)])}]}]}
        version = 9
    else:
        body = {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}]}
        version = 8
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        start = time.perf_counter()
        for _ in range(n):
            c.request(api, version, body)
        return n / (time.perf_counter() - start)


def guard_cost(b: ThreadedBroker, api: int, n: int = 20000) -> float:
    """Microseconds the guard adds to one request (decisions cached, audit off at info)."""
    from odradek.broker.dispatch import RequestContext
    from odradek.broker.security import guards
    from odradek.protocol.registry import APIS

    version = 9 if api == 0 else 8
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": encode_batch([(None, b"x" * 100)])}]}]} \
        if api == 0 else {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                          "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                              {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                               "committed_metadata": ""}]}]}
    req = APIS[api].request.parse(APIS[api].request.build(body, version), version)
    guarded = guards.Guarded(b.app.authorizer, b.app, lambda ctx, r: None)
    ctx = RequestContext(api, version, 1, "bench", "/127.0.0.1", 1)
    fn = guards.GUARDS[api]
    start = time.process_time()
    for _ in range(n):
        fn(guarded, ctx, req)
    return (time.process_time() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    logging_setup.configure("text", "warning")
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as acl_dir:
        plain = ThreadedBroker(plain_dir).start()
        secured = ThreadedBroker(acl_dir, overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin"}).start()
        try:
            setup(plain, False)
            secured.app.authorizer.acls.super_users = frozenset({"User:admin", "User:ANONYMOUS"})
            setup(secured, True)  # as a super user, then as ANONYMOUS under the ACLs just made
            secured.app.authorizer.acls.super_users = frozenset({"User:admin"})
            secured.app.authorizer.acls.replace_all(secured.app.authorizer.acls.acls())
            for api, name in ((0, "Produce acks=1"), (8, "OffsetCommit")):
                without, with_ = [], []
                for _ in range(args.rounds):
                    without.append(rate(plain, api, args.requests))
                    with_.append(rate(secured, api, args.requests))
                a, b = statistics.median(without), statistics.median(with_)
                print(f"{name:16} no authorizer {a:8.0f}/s   ACLs {b:8.0f}/s   ratio {b / a:.2f}   "
                      f"guard CPU {guard_cost(secured, api):.1f} us/request")
        finally:
            plain.close()
            secured.close()


if __name__ == "__main__":
    main()
