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
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchkit as kit  # noqa: E402
from benchkit import GROUP, OFFSET_COMMIT, PRODUCE, TOPIC  # noqa: E402

from odradek.broker import logging_setup  # noqa: E402
from odradek.broker.wire_client import SyncClient  # noqa: E402
from odradek.testing import ThreadedBroker  # noqa: E402

TOPIC_T, GROUP_T, LITERAL, PREFIXED, ALLOW, READ, WRITE, ALL = 2, 3, 3, 4, 3, 3, 4, 2


def acl(rtype: int, name: str, pattern: int, principal: str, op: int) -> dict:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": op, "permission_type": ALLOW}


def setup(b: ThreadedBroker, with_acls: bool) -> None:
    kit.create_topic(b)
    if with_acls:
        others = [acl(TOPIC_T if i % 2 else GROUP_T, f"other-{i}", PREFIXED if i % 3 else LITERAL,
                      f"User:u{i}", ALL) for i in range(200)]
        mine = [acl(TOPIC_T, "bench-", PREFIXED, "User:ANONYMOUS", WRITE),
                acl(TOPIC_T, TOPIC, LITERAL, "User:ANONYMOUS", READ),
                acl(GROUP_T, GROUP, LITERAL, "User:ANONYMOUS", READ)]
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            codes = [r.error_code for r in c.request(30, 3, {"creations": others + mine}).results]
        assert set(codes) == {0}, codes


def guard_cost(b: ThreadedBroker, api: int) -> float:
    """Microseconds the guard adds to one request (decisions cached, audit off at info)."""
    from odradek.broker.dispatch import RequestContext
    from odradek.broker.security import guards
    from odradek.protocol.registry import APIS

    version, body = kit.request(api)
    req = APIS[api].request.parse(APIS[api].request.build(body, version), version)
    guarded = guards.Guarded(b.app.authorizer, b.app, lambda ctx, r: None)
    ctx = RequestContext(api, version, 1, "bench", "/127.0.0.1", 1)
    return kit.cpu_us(guards.GUARDS[api], guarded, ctx, req)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    logging_setup.configure("text", "warning")
    authorizer = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                  "super.users": "User:admin"}
    with kit.brokers({}, {"overrides": authorizer}) as (plain, secured):
        setup(plain, False)
        secured.app.authorizer.acls.super_users = frozenset({"User:admin", "User:ANONYMOUS"})
        setup(secured, True)  # as a super user, then as ANONYMOUS under the ACLs just made
        secured.app.authorizer.acls.super_users = frozenset({"User:admin"})
        secured.app.authorizer.acls.replace_all(secured.app.authorizer.acls.acls())
        for api, name in ((PRODUCE, "Produce acks=1"), (OFFSET_COMMIT, "OffsetCommit")):
            a, b = kit.alternating_medians(
                args.rounds, partial(kit.request_rate, plain.app.endpoint.port, api, args.requests),
                partial(kit.request_rate, secured.app.endpoint.port, api, args.requests))
            print(f"{name:16} no authorizer {a:8.0f}/s   ACLs {b:8.0f}/s   ratio {b / a:.2f}   "
                  f"guard CPU {guard_cost(secured, api):.1f} us/request")


if __name__ == "__main__":
    main()
