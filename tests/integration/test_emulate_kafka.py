"""``odradek.emulate.kafka.version``: an older Kafka's protocol surface and offsets-topic values.

For each release in the generated table: ApiVersions lists exactly what we
implement cut to what that release served, a version outside it is refused,
kafka-python and confluent-kafka run a consumer group, and the committed
offsets are written in the value versions that release wrote.
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient, decode, encode
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.kafka_releases import RELEASES
from odradek.protocol.records import iter_records
from odradek.testing import ThreadedBroker
from tests.integration.group_helpers import kafka_python_subscriber

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SETTING = "odradek.emulate.kafka.version"


@pytest.fixture(scope="module")
def implemented() -> dict[int, tuple[int, int]]:
    """What the broker serves without emulation, from its own ApiVersions."""
    with ThreadedBroker() as b, SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15) as c:
        r = c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def expected(release: str, implemented: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """Our range cut to the release's, for APIs its brokers answered (not controller-only)."""
    out = {}
    for key, (lo, hi) in implemented.items():
        entry = RELEASES[release]["apis"].get(key)
        if entry is None:
            continue
        _name, rlo, rhi, listeners = entry
        if listeners and not {"broker", "zkBroker"} & set(listeners):
            continue
        if max(lo, rlo) <= min(hi, rhi):
            out[key] = (max(lo, rlo), min(hi, rhi))
    floor = RELEASES[release].get("produce_advertised_min")
    if floor is not None and 0 in out:  # Kafka 4 lists Produce from v0 (KAFKA-18659)
        out[0] = (min(floor, out[0][0]), out[0][1])
    return out


@pytest.fixture(scope="module", params=sorted(RELEASES))
def emulated(request):
    with ThreadedBroker(overrides={SETTING: request.param}) as b:
        yield request.param, b


def test_the_table_records_where_each_column_came_from():
    for release, table in RELEASES.items():
        assert table["repository"] in ("apache/kafka", "confluentinc/kafka")
        assert len(table["commit"]) == 40 and table["commit"].startswith(table["ref"][:7]) \
            or table["ref"].startswith(release)
        assert table["apis"][18][0] == "ApiVersions"


def test_api_versions_matches_the_generated_table(emulated, implemented):
    release, b = emulated
    want = expected(release, implemented)
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15) as c:
        hi = want[18][1]
        for v in range(hi + 1):
            r = c.request(18, v, {"client_software_name": "t", "client_software_version": "1"})
            assert r.error_code == 0
            assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys} == want
        # an ApiVersions newer than the release's: UNSUPPORTED_VERSION naming its range
        raw = encode(18, hi, 7, {"client_software_name": "x", "client_software_version": "1"})
        c.send_raw(raw[:6] + struct.pack(">h", hi + 1) + raw[8:])
        _cid, body = decode(18, 0, c.recv_frame())
        assert body.error_code == E.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, hi)]
    if release == "2.0":
        assert want[3] == (0, 6) and want[1] == (0, 8) and 60 not in want and 47 not in want
    if release.startswith("4."):
        assert want[0][0] == 0 and want[1][0] == 4 and want[19][0] == 2


def test_kafka_4_lists_produce_from_v0_but_refuses_v0_to_v2(emulated):
    release, b = emulated
    if "produce_advertised_min" not in RELEASES[release]:
        pytest.skip(f"Kafka {release} served the Produce versions it listed")
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15) as c:
        with pytest.raises((ConnectionError, OSError, EOFError)):
            c.request(0, 2, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                             "topic_data": []})


def test_a_version_the_release_did_not_serve_is_refused(emulated, implemented):
    release, b = emulated
    metadata_hi = expected(release, implemented)[3][1]
    if metadata_hi == implemented[3][1]:
        pytest.skip(f"Kafka {release} served every Metadata version we implement")
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15) as c:
        with pytest.raises((ConnectionError, OSError, EOFError)):
            c.request(3, metadata_hi + 1, {"topics": None, "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})


def _offsets_values(b) -> list[bytes]:
    logs = sorted((b.data_dir / "__consumer_offsets-0").glob("*.log"))
    return [r.value for path in logs for r in iter_records(path.read_bytes()) if r.value is not None]


def test_kafka_python_runs_a_consumer_group(emulated):
    from kafka import KafkaProducer

    release, b = emulated
    topic, group = f"kp-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
    for i in range(5):
        producer.send(topic, key=b"k", value=b"v%d" % i).get(timeout=10)
    producer.close()
    consumer = kafka_python_subscriber(topic, bootstrap_servers=b.bootstrap_servers, group_id=group,
                                       auto_offset_reset="earliest", enable_auto_commit=False,
                                       consumer_timeout_ms=5000)
    got = [m.value for m in consumer]
    consumer.commit()
    consumer.close()
    assert got == [b"v%d" % i for i in range(5)]
    again = kafka_python_subscriber(topic, bootstrap_servers=b.bootstrap_servers, group_id=group,
                                    auto_offset_reset="earliest", consumer_timeout_ms=2000)
    assert [m.value for m in again] == []  # resumed from the committed offset
    again.close()
    versions = {struct.unpack_from(">h", v)[0] for v in _offsets_values(b)}
    # GroupMetadataValue and OffsetCommitValue as each release wrote them
    assert versions == {"2.0": {1}, "4.1": {3, 4}, "4.2": {3, 4}, "4.3": {3, 4}}.get(release, {3})


def test_confluent_kafka_runs_a_consumer_group(emulated):
    from confluent_kafka import Consumer, Producer

    _release, b = emulated
    topic, group = f"ck-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(5):
        p.produce(topic, key=b"k", value=b"v%d" % i)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    committed = c.committed(c.assignment(), timeout=10)
    c.close()
    assert got == [b"v%d" % i for i in range(5)]
    assert [tp.offset for tp in committed] == [5]


def test_list_groups_reads_states_as_that_release_did(emulated):
    """Case-sensitive to 3.5 (Scala coordinator), lower-cased in 3.9, also trimmed from 4.0."""
    from odradek.offsets.consumer_protocol import Subscription, encode_subscription

    release, b = emulated
    if RELEASES[release]["apis"][16][2] < 4:
        pytest.skip(f"Kafka {release}'s ListGroups has no states filter")
    group = f"g-{uuid.uuid4().hex[:6]}"
    meta = encode_subscription(Subscription(version=0, topics=["t"]))
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=15) as c:
        j = c.request(11, 2, {"group_id": group, "session_timeout_ms": 10000,
                              "rebalance_timeout_ms": 10000, "member_id": "",
                              "protocol_type": "consumer",
                              "protocols": [{"name": "range", "metadata": meta}]})
        s = c.request(14, 0, {"group_id": group, "generation_id": j.generation_id,
                              "member_id": j.member_id,
                              "assignments": [{"member_id": j.member_id, "assignment": b"A"}]})
        assert (j.error_code, s.error_code) == (0, 0)

        def listed(*states: str) -> bool:
            r = c.request(16, 4, {"states_filter": list(states)})
            return group in {g.group_id for g in r.groups}

        assert listed("Stable") and not listed("Empty")
        assert listed("stable") == (release not in ("2.8", "3.0", "3.5"))
        assert listed(" Stable") == release.startswith("4.")
