"""Mutated frames for every served API and version, against a live broker over TCP.

Every (API, version) the broker's handler table serves gets frames built
from its protocol declaration (``tests/hostile_requests.py``), and the run
fails unless each got at least one decodable frame: an API added to the
registry and served is fuzzed the day it is added, with no list to update.

What a user relies on: whatever arrives, the broker stays up, answers every
request that decodes (or refuses it as Kafka would: a closed connection for
one that does not decode), logs no unhandled exception, and keeps committed
offsets -- a canary group's survive a restart.  The default run is bounded
in rounds and time; ``-m slow`` runs ``test_fuzz_long`` (ODRADEK_FUZZ_ROUNDS
rounds, default 40), and ODRADEK_FUZZ_SEED picks another sequence.
"""

from __future__ import annotations

import os
import time

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode
from odradek.testing import ThreadedBroker
from tests.hostile_requests import error_lines, fuzz, served

pytestmark = pytest.mark.integration

CANARY = "canary-group-7f3a9c"  # no seed string, so mutations do not touch it
CANARY_OFFSETS = {("canary-topic", p): 1000 + p for p in range(3)}
SEED = int(os.environ.get("ODRADEK_FUZZ_SEED", "19"))


def commit_canary(c: SyncClient) -> None:
    c.request(19, 5, {"topics": [{"name": "canary-topic", "num_partitions": 3, "replication_factor": 1,
                                  "assignments": [], "configs": []}], "timeout_ms": 5000})
    r = c.request(8, 8, {"group_id": CANARY, "generation_id_or_member_epoch": -1, "member_id": "",
                         "group_instance_id": None, "topics": [
                             {"name": "canary-topic", "partitions": [
                                 {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                  "committed_metadata": "canary"} for (_t, p), o in CANARY_OFFSETS.items()]}]})
    assert [p.error_code for p in r.topics[0].partitions] == [ErrorCode.NONE] * 3


def canary_offsets(c: SyncClient) -> dict:
    r = c.request(9, 7, {"group_id": CANARY, "topics": None, "require_stable": False})
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def run(tmp_path, capsys, rounds: int, budget_s: float) -> None:
    capsys.readouterr()
    # telemetry on: its two APIs are served (and fuzzed) only then
    with ThreadedBroker(tmp_path, overrides={"log.fsync.mode": "always", "client.telemetry.enable": "true"}) as b:
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            commit_canary(c)
        stats = fuzz(b.app.endpoint.port, b.app.handlers, rounds, seed=SEED,
                     deadline=time.monotonic() + budget_s)
        assert stats.failures == [], "\n".join(stats.failures[:20])
        missing = set(served(b.app.handlers)) - stats.decodable
        assert not missing, f"served but never fuzzed with a decodable frame: {sorted(missing)}"
        assert stats.answered > stats.sent // 10  # the mutations leave many requests decodable
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0
        b.restart()
        with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
            assert canary_offsets(c) == CANARY_OFFSETS
    errors = error_lines(capsys.readouterr().err)
    assert errors == [], "\n".join(errors[:10])
    print(f"fuzz: {stats.sent} frames, {stats.answered} answered, {stats.refused} refused, "
          f"{stats.parked} parked")


def test_fuzz_every_api_and_version(tmp_path, capsys):
    run(tmp_path, capsys, rounds=8, budget_s=60)


@pytest.mark.slow
def test_fuzz_long(tmp_path, capsys):
    run(tmp_path, capsys, rounds=int(os.environ.get("ODRADEK_FUZZ_ROUNDS", "40")), budget_s=1800)
