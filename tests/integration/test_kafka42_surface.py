"""Our ApiVersions against a Kafka 4.2 broker's client-facing table (issue 31's measure).

The table is the generated, committed ``RELEASES["4.2"]`` (``scripts/gen_kafka_release_versions.py``
read it from Kafka's 4.2 release commit), so the comparison runs in a bare clone; a ``shared``
test checks it against Kafka 4.2's JSON specs beside the checkout.  Client-facing = a request
whose spec lists the ``broker`` listener, less the keys below that only brokers send or that no
single process has.  Every client-facing key must be served at 4.2's maximum, except the keys
open issues own and the versions other work is adding now (explicit lists, to shrink as they
land).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.kafka_releases import RELEASES
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

KAFKA_42 = RELEASES["4.2"]["apis"]
SPECS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-spec" / "kafka-4.2" / "messages"

# on the broker listener, but never sent by a client
BROKER_TO_BROKER = {
    27: "WriteTxnMarkers: the transaction coordinator to partition leaders",
    83: "InitializeShareGroupState: brokers to the share coordinator",
    84: "ReadShareGroupState: brokers to the share coordinator",
    85: "WriteShareGroupState: brokers to the share coordinator",
    86: "DeleteShareGroupState: brokers to the share coordinator",
    87: "ReadShareGroupStateSummary: brokers to the share coordinator",
}
# client-facing in Kafka, outside issue 31's 61 keys: nothing here to honour them with
OUT_OF_SCOPE = {
    38: "CreateDelegationToken: no delegation tokens (docs/differences.md)",
    39: "RenewDelegationToken: no delegation tokens",
    40: "ExpireDelegationToken: no delegation tokens",
    41: "DescribeDelegationToken: no delegation tokens",
    55: "DescribeQuorum: no KRaft quorum in one process",
    64: "UnregisterBroker: no broker registrations",
    80: "AddRaftVoter: no KRaft quorum",
    81: "RemoveRaftVoter: no KRaft quorum",
}
# client-facing keys other open issues own: not served until they land
OWNED_ELSEWHERE = {
    88: "StreamsGroupHeartbeat: streams groups (KIP-1071), no issue yet",
    89: "StreamsGroupDescribe: streams groups",
}
# versions being added by work in progress: {key: our max until it lands} (none now)
IN_PROGRESS: dict[int, int] = {}


def client_facing() -> dict[int, tuple[str, int, int]]:
    """Kafka 4.2's client-facing keys: {key: (name, min, max)}."""
    skip = BROKER_TO_BROKER.keys() | OUT_OF_SCOPE.keys()
    return {k: (name, lo, hi) for k, (name, lo, hi, listeners) in KAFKA_42.items()
            if "broker" in listeners and k not in skip}


def api_versions(b) -> dict[int, tuple[int, int]]:
    with SyncClient("127.0.0.1", b.app.endpoint.port) as c:
        r = c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert r.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


@pytest.fixture(scope="module")
def served():
    """A broker as a Kafka 4.2 broker with a telemetry receiver (which lists keys 71 and 72)."""
    with ThreadedBroker(overrides={"client.telemetry.enable": "true"}) as b:
        yield api_versions(b)


def test_the_lists_name_only_kafka_42_keys_and_no_key_twice():
    lists = [BROKER_TO_BROKER, OUT_OF_SCOPE, OWNED_ELSEWHERE, IN_PROGRESS]
    for listed in lists:
        assert set(listed) <= set(KAFKA_42)
    assert sum(map(len, lists[:3])) == len(set().union(*lists[:3]))
    # 77 keys on 4.2's broker listener, 14 not clients': 63, issue 31's 61 and the two streams-group keys
    assert len(client_facing()) == 63


def test_every_client_facing_key_is_served_at_kafka_42s_maximum(served):
    wrong = {}
    for key, (name, _lo, hi) in client_facing().items():
        if key in OWNED_ELSEWHERE:
            continue
        want = IN_PROGRESS.get(key, hi)
        got = served.get(key, (None, -1))[1]
        if got != want and not (key in IN_PROGRESS and got >= want):  # landing early is fine
            wrong[name] = (got, hi)
    assert wrong == {}, "served max vs Kafka 4.2's max"


def test_the_owned_keys_are_really_not_served_yet(served):
    """When one is served, move it out of OWNED_ELSEWHERE so the maximum is checked."""
    assert not set(OWNED_ELSEWHERE) & set(served)


def test_we_serve_no_version_kafka_42_lacks_above_its_maximum(served):
    for key, (_lo, hi) in served.items():
        if key in KAFKA_42:
            assert hi <= KAFKA_42[key][2], KAFKA_42[key][0]


def test_the_4_2_profile_lists_kafka_42s_ranges_for_what_is_served():
    """Emulating 4.2: each served client-facing key with 4.2's own minimum (KIP-896; Produce listed
    from v0, KAFKA-18659) and maximum, cut to ours only where other work is still adding versions."""
    with ThreadedBroker(overrides={"odradek.emulate.kafka.version": "4.2",
                                   "client.telemetry.enable": "true"}) as b:
        got = api_versions(b)
    for key, (name, lo, hi) in client_facing().items():
        if key in OWNED_ELSEWHERE:
            continue
        want_lo = 0 if key == 0 else lo
        want_hi = min(hi, IN_PROGRESS[key]) if key in IN_PROGRESS else hi
        assert got[key][0] == want_lo and got[key][1] >= want_hi, (name, got[key])


@pytest.mark.shared
@pytest.mark.skipif(not SPECS.is_dir(), reason=f"Kafka 4.2's message specs not found at {SPECS} "
                                               "(optional; kept outside the repository)")
def test_the_committed_table_is_kafka_42s_json():
    found = {}
    for path in SPECS.glob("*Request.json"):
        text = "\n".join(ln for ln in path.read_text().splitlines() if not ln.strip().startswith("//"))
        spec = json.loads(text)
        if spec["validVersions"] == "none":  # removed in 4.0: not in the generated table either
            continue
        lo, _, hi = spec["validVersions"].partition("-")
        top = int(hi or lo) - (1 if spec.get("latestVersionUnstable") else 0)
        found[spec["apiKey"]] = (re.sub("Request$", "", spec["name"]), int(lo), top, tuple(spec.get("listeners", [])))
    assert found == KAFKA_42


COMPATIBILITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"


def test_the_compatibility_page_states_the_measured_counts(served):
    """docs/compatibility.md says how many of the 63 keys are served at 4.2's maximum, below it
    and not at all: the figures this comparison measures, not those of an earlier session."""
    keys = client_facing()
    at_max = sum(1 for k, (_n, _lo, hi) in keys.items() if served.get(k, (None, -1))[1] == hi)
    unserved = sum(1 for k in keys if k not in served)
    below = len(keys) - at_max - unserved
    text = " ".join(COMPATIBILITY_DOC.read_text().split())
    stated = re.search(r"Today (\d+) of those (\d+) keys are served at 4\.2's maximum, (\d+) below it"
                       r" and (\d+) not at all", text)
    assert stated, "docs/compatibility.md: the sentence giving the counts"
    assert tuple(map(int, stated.groups())) == (at_max, len(keys), below, unserved)
