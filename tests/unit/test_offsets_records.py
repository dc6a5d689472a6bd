"""``__consumer_offsets`` records and consumer-protocol blobs, byte for byte.

Users rely on three things here: a log written by real Kafka (or by us) is
read back exactly, unknown record types never break a load while damaged
known ones always do, and a group lands on the same offsets partition as it
would on Kafka.  Vectors (real cluster captures and Burrow's tests) are kept
in tests/kafka_captures.py; property tests hold the generated fast codec to the generic
schema layer for every version.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.offsets import consumer_protocol as cp
from odradek.offsets import records as r
from odradek.protocol.fastcodec import compile_reader, compile_writer
from tests.kafka_captures import BURROW as BURROW_BYTES
from tests.kafka_captures import KONSUMER as KONSUMER_BYTES
from tests.kafka_captures import SHARED_VECTORS, needs_shared

VECTORS = SHARED_VECTORS / "consumer-offsets"
KONSUMER = VECTORS / "konsumer_offsets"
BURROW = VECTORS / "burrow"


NESTED = {"members": r.MemberValue}


def burrow(name: str) -> bytes:
    return BURROW_BYTES[name]


def konsumer(kind: str, case: str) -> tuple[bytes, bytes]:
    return KONSUMER_BYTES[kind, case]


@needs_shared
def test_embedded_captures_match_the_reference_folder():
    for name, data in BURROW_BYTES.items():
        assert data == bytes.fromhex("".join((BURROW / name).read_text().split())), name
    for (kind, case), (key, value) in KONSUMER_BYTES.items():
        assert key == (KONSUMER / kind / f"{case}.key").read_bytes(), (kind, case)
        assert value == (KONSUMER / kind / f"{case}.payload").read_bytes(), (kind, case)
    assert len(KONSUMER_BYTES) == len(list(KONSUMER.glob("*/*.key")))
    assert set(BURROW_BYTES) == {p.name for p in BURROW.glob("*.hex")}


def reencode(message, version: int, obj, nested=None) -> bytes:
    """Encode at an explicit version through the same declaration (not our version rule)."""
    return compile_writer(message, version, prefix=version, nested=nested)(obj)


def consumes_all(message, cls, data: bytes, nested=None) -> bool:
    """The declaration accounts for every byte of ``data`` (version prefix included)."""
    version = struct.unpack_from(">h", data)[0]
    _, end = compile_reader(message, version, cls, nested)(data, 2)
    return end == len(data)


# --- vectors: konsumer_offsets (real cluster, librdkafka clients) --------------------

OFFSET_COMMITS = {
    "01": ("ivan-experimental-consumer", "__consumer_offsets", 46, 97507, 1672871009232),
    "02": ("ivan-experimental-consumer", "__consumer_offsets", 46, 97554, 1672871009282),
    "03": ("kafkesc-devcluster-group-id", "t01", 0, 106, 1672788047244),
    "04": ("ivan-experimental-consumer", "__consumer_offsets", 46, 99158, 1672871010428),
    "05": ("kafkesc-devcluster-group-id", "t01", 0, 15134, 1672870795763),
}


@pytest.mark.parametrize("case", sorted(OFFSET_COMMITS))
def test_konsumer_offset_commit(case):
    group, topic, partition, offset, ts = OFFSET_COMMITS[case]
    kdata, vdata = konsumer("offset_commit", case)
    key = r.decode_key(kdata)
    assert key == r.OffsetKey(group, topic, partition)
    value = r.decode_value(key, vdata)
    assert value == r.OffsetValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=ts,
                                  expire_timestamp=-1)
    assert struct.unpack_from(">h", vdata)[0] == 3
    assert r.encode_key(key) == kdata  # key type 1, as Kafka writes
    # Kafka wrote v3 without a leader epoch; we write the same bytes
    assert reencode(r.OFFSET_COMMIT_VALUE, 3, value) == vdata
    assert r.encode_value(value) == vdata


GROUPS = {
    # case: group, generation, protocol, leader prefix, current_state_timestamp, assignments
    "01": ("kafkesc-devcluster-group-id", 7, "range", "rdkafka-9f4fc1b0-", 1672870956437, [[0, 1, 2]]),
    "02": ("kafkesc-devcluster-group-id", 3, "range", "rdkafka-9f4fc1b0-", 1672870558659, [[0, 1, 2]]),
    "03": ("ivan-experimental-consumer", 1, "range", "rdkafka-57736292-", 1672870929040, [list(range(50))]),
    "04": ("kafkesc-devcluster-group-id", 6, "range", "rdkafka-9f4fc1b0-", 1672870941404, [[2], [0, 1]]),
    "05": ("kafkesc-devcluster-group-id", 8, None, None, 1672870964792, []),
}


@pytest.mark.parametrize("case", sorted(GROUPS))
def test_konsumer_group_metadata(case):
    group, generation, protocol, leader, cst, assignments = GROUPS[case]
    kdata, vdata = konsumer("group_metadata", case)
    key = r.decode_key(kdata)
    assert key == r.GroupKey(group)
    assert r.encode_key(key) == kdata
    value = r.decode_value(key, vdata)
    assert struct.unpack_from(">h", vdata)[0] == 3
    assert (value.protocol_type, value.generation, value.protocol) == ("consumer", generation, protocol)
    assert value.current_state_timestamp == cst
    if leader is None:
        assert value.leader is None and value.members == []  # an Empty group: int16 -1 strings
    else:
        assert value.leader.startswith(leader)
        assert value.members[0].member_id == value.leader
    topic = "__consumer_offsets" if case == "03" else "t01"
    assert len(value.members) == len(assignments)
    for member, partitions in zip(value.members, assignments, strict=True):
        assert member.group_instance_id is None
        assert (member.client_id, member.client_host) == ("rdkafka", "/172.18.0.1")
        assert (member.rebalance_timeout, member.session_timeout) == (300000, 45000)
        sub = cp.decode_subscription(member.subscription)
        assert sub == cp.Subscription(version=1, topics=[topic], user_data=b"", owned_partitions=[])
        assert cp.decode_subscription_topics(member.subscription) == [topic]
        asg = cp.decode_assignment(member.assignment)
        assert asg == cp.Assignment(version=0, assigned_partitions=[cp.TopicPartitions(topic, partitions)],
                                    user_data=b"")
        assert cp.encode_subscription(sub) == member.subscription
        assert cp.encode_assignment(asg) == member.assignment
    assert consumes_all(r.GROUP_METADATA_VALUE, r.GroupValue, vdata, NESTED)
    assert reencode(r.GROUP_METADATA_VALUE, 3, value, NESTED) == vdata
    # no static member: Kafka still writes v3, and so do we, byte for byte
    assert r.encode_value(value) == vdata


# --- vectors: Burrow ------------------------------------------------------------------------


def test_burrow_offset_key_and_v0_value():
    key = r.decode_key(burrow("offset_key_v1.hex"))
    assert key == r.OffsetKey("testgroup", "testtopic", 11)
    assert r.encode_key(key) == burrow("offset_key_v1.hex")
    data = burrow("offset_value_v0.hex")
    value = r.decode_value(key, data)
    assert value == r.OffsetValue(offset=8372, metadata="testdata", commit_timestamp=1637,
                                  leader_epoch=-1, expire_timestamp=-1)
    assert reencode(r.OFFSET_COMMIT_VALUE, 0, value) == data


def test_burrow_offset_value_v3_body_with_prefix_reencodes_exactly():
    data = bytes.fromhex("0003") + burrow("offset_value_v3_body_no_version.hex")
    key = r.OffsetKey("testgroup", "testtopic", 11)
    value = r.decode_value(key, data)
    assert value == r.OffsetValue(offset=8372, leader_epoch=0, metadata="testdata", commit_timestamp=1637)
    assert r.encode_value(value) == data  # v3, as Kafka writes


def test_burrow_offset_value_v4_without_tagged_section_is_rejected_until_completed():
    key = r.OffsetKey("testgroup", "testtopic", 11)
    broken = burrow("offset_value_v4_MISSING_TAGGED_SECTION.hex")
    with pytest.raises(r.RecordDecodeError):
        r.decode_value(key, broken)
    value = r.decode_value(key, broken + b"\x00")
    assert value == r.OffsetValue(offset=8372, leader_epoch=0, metadata="testdata", commit_timestamp=1637)
    assert reencode(r.OFFSET_COMMIT_VALUE, 4, value) == broken + b"\x00"


def test_burrow_group_key():
    assert r.decode_key(burrow("group_key_v2.hex")) == r.GroupKey("testgroup")
    assert r.encode_key(r.GroupKey("testgroup")) == burrow("group_key_v2.hex")


def test_burrow_group_value_v1_with_empty_subscription():
    data = burrow("group_value_v1.hex")
    value = r.decode_value(r.GroupKey("testgroup"), data)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == \
        ("consumer", 1, "testprotocol", "testleader")
    assert value.current_state_timestamp == -1  # not in v1
    (m,) = value.members
    assert (m.member_id, m.client_id, m.client_host) == ("testmemberid", "testclientid", "testclienthost")
    assert (m.rebalance_timeout, m.session_timeout, m.group_instance_id) == (4, 8, None)
    assert m.subscription == b""
    assert cp.decode_subscription_topics(m.subscription) is None  # unknown, not a crash
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_subscription(m.subscription)
    assert cp.decode_assignment(m.assignment).assigned_partitions == [cp.TopicPartitions("topic1", [11])]
    assert reencode(r.GROUP_METADATA_VALUE, 1, value, NESTED) == data


def test_burrow_group_value_v2():
    data = burrow("group_value_v2.hex")
    key = r.GroupKey("testgroup")
    value = r.decode_value(key, data)
    leader = "tLeader-a42d2baa-bfaa-4b96-9ea2-dee5f42b2ab2"
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == \
        ("consumer", 3, "range", leader)
    assert value.current_state_timestamp == 1552078883402
    (m,) = value.members
    assert (m.member_id, m.client_id, m.client_host) == (leader, "tMember", "/172.18.0.1")
    assert (m.rebalance_timeout, m.session_timeout) == (30000, 30000)
    assert cp.decode_subscription(m.subscription) == cp.Subscription(version=0, topics=["testtopic"],
                                                                      user_data=b"")
    assert cp.decode_assignment(m.assignment).assigned_partitions == \
        [cp.TopicPartitions("testtopic", list(range(9)))]
    assert r.encode_value(value, version=2) == data  # the v2 writer stays, for older releases


def test_burrow_group_value_v3_with_truncated_v1_subscription():
    data = burrow("group_value_v3.hex")
    value = r.decode_value(r.GroupKey("testgroup"), data)
    assert (value.protocol_type, value.generation, value.protocol) == ("consumer", 1, "RoundRobinAssigner")
    assert value.leader == "tLeader-a42d2baa-bfaa-4b96-9ea2-dee5f42b2ab2"
    assert value.current_state_timestamp == 1567112890219
    (m,) = value.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host) == \
        ("member", None, "client", "/10.10.10.100")
    assert (m.rebalance_timeout, m.session_timeout) == (-1, 30000)
    # claims v1 but stops after the v0 fields: Kafka's v0-prefix read still finds the topic
    assert cp.decode_subscription_topics(m.subscription) == ["topic1"]
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_subscription(m.subscription)
    asg = cp.decode_assignment(m.assignment)
    assert (asg.version, asg.assigned_partitions) == (1, [cp.TopicPartitions("topic1", [0])])
    assert reencode(r.GROUP_METADATA_VALUE, 3, value, NESTED) == data


def _all_vectors() -> list[tuple[str, bytes, bytes]]:
    """(name, key, value) for every complete record among the vectors."""
    out = []
    for kind, case in sorted(KONSUMER_BYTES):
        out.append((f"konsumer/{kind}/{case}", *konsumer(kind, case)))
    okey, gkey = burrow("offset_key_v1.hex"), burrow("group_key_v2.hex")
    for path in sorted(name for name in BURROW_BYTES if "value" in name):
        data = burrow(path)
        if "body_no_version" in path:
            data = bytes.fromhex("0003") + data
        if "MISSING_TAGGED" in path:
            data += b"\x00"
        out.append((f"burrow/{path}", gkey if path.startswith("group") else okey, data))
    return out


@pytest.mark.parametrize(("name", "kdata", "vdata"), _all_vectors(), ids=[v[0] for v in _all_vectors()])
def test_truncated_vectors_are_rejected(name, kdata, vdata):
    """Every strict prefix of a known record fails loudly instead of yielding partial state."""
    key = r.decode_key(kdata)
    r.decode_value(key, vdata)
    for cut in range(len(kdata)):
        with pytest.raises(r.RecordDecodeError):
            r.decode_key(kdata[:cut])
    for cut in range(len(vdata)):
        with pytest.raises(r.RecordDecodeError):
            r.decode_value(key, vdata[:cut])


# --- framing rules -------------------------------------------------------------------------------


def test_key_type_0_reads_like_type_1_and_we_write_1():
    body = r.encode_key(r.OffsetKey("g", "t", 3))[2:]
    assert r.decode_key(b"\x00\x00" + body) == r.decode_key(b"\x00\x01" + body) == r.OffsetKey("g", "t", 3)
    assert r.encode_key(r.OffsetKey("g", "t", 3))[:2] == b"\x00\x01"


@pytest.mark.parametrize("key_type", [3, 4, 8, 9, 15, 16, 0x7FFF, -1])
def test_unknown_key_types_are_skipped(key_type):
    # KIP-848 / KIP-932 records (flexible, arbitrary layout) must not break a classic load
    assert r.decode_key(struct.pack(">h", key_type) + b"\x01\x02\xff") is None
    assert r.decode_key(struct.pack(">h", key_type)) is None


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x01", b"\x00\x01\x00\x05ab", b"\x00\x02\xff\xff",
                                  b"\x00\x02\x00\x02\xc3\x28", b"\x00\x01\x00\x01g\x00\x01t\x00\x00"])
def test_damaged_known_keys_raise(data):
    with pytest.raises(r.RecordDecodeError):
        r.decode_key(data)


def test_tombstones_and_unknown_value_versions():
    key = r.OffsetKey("g", "t", 0)
    assert r.encode_value(None) is None
    assert r.decode_value(key, None) is None
    assert r.decode_value(r.GroupKey("g"), None) is None
    body = r.encode_value(r.OffsetValue(offset=1, commit_timestamp=2))[2:]
    for version in (5, 6, -1, 0x7FFF):
        with pytest.raises(r.RecordDecodeError, match="version"):
            r.decode_value(key, struct.pack(">h", version) + body)
    for data in (b"", b"\x00"):
        with pytest.raises(r.RecordDecodeError):
            r.decode_value(key, data)


def test_bytes_like_inputs_are_accepted():
    key = r.OffsetKey("g", "t", 0)
    value = r.OffsetValue(offset=5, leader_epoch=2, metadata="m", commit_timestamp=9)
    kdata, vdata = r.encode_key(key), r.encode_value(value)
    assert r.decode_key(memoryview(kdata)) == key
    assert r.decode_key(bytearray(kdata)) == key
    assert r.decode_value(key, memoryview(vdata)) == value


def test_v0_group_member_rebalance_timeout_is_its_session_timeout():
    value = r.GroupValue(protocol_type="consumer", generation=2, protocol="range", leader="m1",
                         members=[r.MemberValue("m1", None, "c", "/h", 999, 10000, b"s", b"a")])
    data = reencode(r.GROUP_METADATA_VALUE, 0, value, NESTED)
    back = r.decode_value(r.GroupKey("g"), data)
    assert back.members[0].rebalance_timeout == 10000
    assert back.current_state_timestamp == -1


def test_v1_offset_value_keeps_expiry_and_drops_leader_epoch_like_kafka():
    value = r.OffsetValue(offset=7, leader_epoch=4, metadata="", commit_timestamp=100, expire_timestamp=200)
    data = r.encode_value(value)
    assert data[:2] == b"\x00\x01"
    assert r.decode_value(r.OffsetKey("g", "t", 0), data) == dataclasses.replace(value, leader_epoch=-1)


def test_v4_values_skip_unknown_tagged_fields():
    offset = r.OffsetValue(offset=42, leader_epoch=3, metadata="meta", commit_timestamp=1000)
    data = reencode(r.OFFSET_COMMIT_VALUE, 4, offset)
    assert data.endswith(b"\x00")
    tagged = data[:-1] + bytes([2, 5, 3]) + b"abc" + bytes([200, 1, 0])  # tag 5 (3 bytes), tag 200 (0)
    assert r.decode_value(r.OffsetKey("g", "t", 0), tagged) == offset
    with pytest.raises(r.RecordDecodeError):
        r.decode_value(r.OffsetKey("g", "t", 0), data[:-1] + bytes([1, 5, 9]) + b"abc")

    member = r.MemberValue("m", "inst", "c", "/h", 1, 2, b"\x00\x00", b"")
    group = r.GroupValue(protocol_type="consumer", generation=1, protocol="range", leader="m",
                         current_state_timestamp=5, members=[member])
    gdata = reencode(r.GROUP_METADATA_VALUE, 4, group, NESTED)
    # member's tagged section is the byte before the top-level one; give both unknown tags
    gtagged = gdata[:-2] + bytes([1, 1, 1, 7]) + bytes([1, 0, 0])
    assert r.decode_value(r.GroupKey("g"), gtagged) == group


def test_invalid_utf8_is_a_decode_error():
    good = r.encode_key(r.OffsetKey("gg", "t", 0))
    with pytest.raises(r.RecordDecodeError, match="UTF-8"):
        r.decode_key(good.replace(b"gg", b"\xc3\x28"))


def test_unencodable_values_raise():
    with pytest.raises(r.RecordEncodeError):
        r.encode_value(r.OffsetValue(offset=2**63, commit_timestamp=0))
    with pytest.raises(r.RecordEncodeError):
        r.encode_key(r.OffsetKey("g" * 40000, "t", 0))
    with pytest.raises(r.RecordEncodeError):
        r.encode_value(r.GroupValue(protocol_type=None, generation=0, protocol=None, leader=None))
    with pytest.raises(TypeError):
        r.encode_key(("g", "t", 0))


def test_a_commit_batch_encodes_as_each_record_alone():
    """The coordinator's one-loop encoding of a commit batch (``encode_offset_records``) writes
    what ``encode_key``/``encode_value`` write record by record: both value versions, tombstones,
    and the same error for what cannot be encoded."""
    records = [(r.offset_key("g", "t", p), r.offset_value(p, p - 1, "m" * p, 1000 + p, -1 if p % 2 else 5000 + p))
               for p in range(6)] + [(r.OffsetKey("g", "t", 9), None), (r.offset_key("g", "t", 0), None)]
    assert r.encode_offset_records(records) == [(r.encode_key(k), r.encode_value(v)) for k, v in records]
    with pytest.raises(r.RecordEncodeError):
        r.encode_offset_records([(r.OffsetKey("g", "t", 0), r.OffsetValue(offset=2**63, commit_timestamp=0))])
    with pytest.raises(r.RecordEncodeError):
        r.encode_offset_records([(r.OffsetKey("g" * 40000, "t", 0), None)])


@pytest.mark.parametrize("expire", [-1, 9000])
def test_a_commit_encoded_in_one_pass_is_its_records_and_their_bytes(expire):
    """``encode_commits`` (the OffsetCommit path) makes the records ``offset_key``/``offset_value``
    make and the bytes ``encode_key``/``encode_value`` write: both value versions, metadata empty,
    null, ASCII and beyond the BMP, the commit's own timestamp or the broker's, two topics."""
    topics = [("t", [(0, 5, 3, "", -1), (1, 6, -1, None, 77)]), ("u", [(0, 7, 2, "m\U0001f600é", -1)]),
              ("t", [(2, 2**63 - 1, 2**31 - 1, "x" * 300, -1)])]
    rows = [(t, *row) for t, topic_rows in topics for row in topic_rows]
    for _ in range(2):  # the second time from the kept keys
        records = r.encode_commits("g", topics, 1000, expire)
        expected = [(r.offset_key("g", t, p), r.offset_value(o, e, m or "", 1000 if ts == -1 else ts, expire))
                    for t, p, o, e, m, ts in rows]
        assert list(records) == expected
        assert all(k is e[0] for (k, _v), e in zip(records, expected, strict=True))  # the shared key instances
        assert records.pairs == [(r.encode_key(k), r.encode_value(v)) for k, v in expected]


def test_a_commit_that_cannot_be_encoded_in_one_pass_goes_the_general_way():
    """None, so that the write's general encoding raises its RecordEncodeError."""
    assert r.encode_commits("g", [("t", [(0, 2**63, 0, "", -1)])], 1000, -1) is None
    assert r.encode_commits("g", [("t", [(0, 1, 0, "m" * 40000, -1)])], 1000, -1) is None
    assert r.encode_commits("g", [("t", [(0, 1, 0, "\ud800", -1)])], 1000, -1) is None
    assert r.encode_commits("g" * 40000, [("t", [(0, 1, 0, "", -1)])], 1000, -1) is None
    assert r.encode_commits("g", [("t", [(0, 1, 0, "", -1)])], 1000, 2**63) is None  # now + a huge retention


def test_keys_are_immutable_and_hashable(monkeypatch):
    monkeypatch.setattr(r, "_KEY_CACHE_MAX", 4)  # decoded keys are shared: they must not change
    keys = [r.OffsetKey("g", f"t{i}", i) for i in range(10)] + [r.GroupKey("g")]
    for _ in range(2):
        assert [r.decode_key(r.encode_key(k)) for k in keys] == keys
    assert len({*keys, *keys}) == len(keys)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.decode_key(r.encode_key(keys[0])).group = "other"


@given(st.sampled_from([0, 1, 2]), st.binary(max_size=64))
def test_garbage_keys_decode_or_raise_record_decode_error(key_type, body):
    try:
        key = r.decode_key(struct.pack(">h", key_type) + body)
    except r.RecordDecodeError:
        return
    assert isinstance(key, r.GroupKey if key_type == 2 else r.OffsetKey)


@given(st.sampled_from([r.OffsetKey("g", "t", 0), r.GroupKey("g")]), st.integers(-1, 5), st.binary(max_size=80))
def test_garbage_values_decode_or_raise_record_decode_error(key, version, body):
    try:
        value = r.decode_value(key, struct.pack(">h", version) + body)
    except r.RecordDecodeError:
        return
    assert isinstance(value, r.OffsetValue if isinstance(key, r.OffsetKey) else r.GroupValue)


def test_dataclasses_must_match_their_declarations():
    @dataclasses.dataclass(slots=True)
    class Wrong:
        offset: int
        metadata: str

    with pytest.raises(TypeError, match="fields"):
        compile_reader(r.OFFSET_COMMIT_VALUE, 3, Wrong)


# --- property tests: our version rule round-trips; the fast codec equals the declaration --------

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=40)
blob = st.binary(max_size=40)

offset_values = st.builds(
    r.OffsetValue, offset=int64, metadata=text, commit_timestamp=int64,
    leader_epoch=st.one_of(st.just(-1), int32), expire_timestamp=st.one_of(st.just(-1), int64))
members = st.builds(r.MemberValue, text, st.one_of(st.none(), text), text, text, int32, int32, blob, blob)
group_values = st.builds(
    r.GroupValue, protocol_type=text, generation=int32, protocol=st.one_of(st.none(), text),
    leader=st.one_of(st.none(), text), current_state_timestamp=int64, members=st.lists(members, max_size=4))
offset_keys = st.builds(r.OffsetKey, text, text, int32)


@given(offset_keys, offset_values)
def test_offset_records_round_trip_in_the_version_kafka_writes(key, value):
    kdata, vdata = r.encode_key(key), r.encode_value(value)
    assert r.decode_key(kdata) == key
    version = struct.unpack_from(">h", vdata)[0]
    if value.expire_timestamp != -1:
        assert version == 1
        expected = dataclasses.replace(value, leader_epoch=-1)  # v1 has no leader epoch (as in Kafka)
    else:
        assert version == 3  # with or without a leader epoch, as Kafka since IBP 2.3
        expected = value
    assert r.decode_value(key, vdata) == expected


@given(text, group_values)
def test_group_records_round_trip_in_the_version_kafka_writes(group, value):
    key = r.GroupKey(group)
    assert r.decode_key(r.encode_key(key)) == key
    data = r.encode_value(value)
    assert struct.unpack_from(">h", data)[0] == 3  # static members or not, as Kafka since IBP 2.3
    assert r.decode_value(key, data) == value


def test_epochless_commits_and_plain_groups_are_written_as_kafka_writes_them():
    """Burrow reads offset values v0, v1, v3, v4 only: a v2 commit (kafka-python's) was silently dropped."""
    commit = r.OffsetValue(offset=12, metadata="", commit_timestamp=1700000000000)
    data = r.encode_value(commit)
    assert data == b"\x00\x03" + struct.pack(">qih", 12, -1, 0) + struct.pack(">q", 1700000000000)
    group = r.GroupValue(protocol_type="consumer", generation=1, protocol="range", leader="m",
                         members=[r.MemberValue("m", None, "c", "/h", 300000, 45000, b"s", b"a")])
    assert r.encode_value(group)[:2] == b"\x00\x03"
    # the older writers stay available (emulated older releases), dropping what they lack
    assert r.encode_value(commit, version=2)[:2] == b"\x00\x02"
    old = r.encode_value(dataclasses.replace(commit, leader_epoch=5), version=2)
    assert r.decode_value(r.OffsetKey("g", "t", 0), old) == commit
    assert r.encode_value(group, version=2)[:2] == b"\x00\x02"
    assert r.decode_value(r.GroupKey("g"), r.encode_value(group, version=2)) == group
    # v1, what Kafka 2.0 wrote: no current-state timestamp, no static member id
    v1 = r.encode_value(dataclasses.replace(group, current_state_timestamp=1700000000000), version=1)
    assert v1[:2] == b"\x00\x01" and r.decode_value(r.GroupKey("g"), v1) == group
    assert r.encode_value(commit, version=1)[:2] == b"\x00\x01"
    # v4, what Kafka 4.1 writes: flexible (compact metadata string, empty tagged fields)
    v4 = r.encode_value(dataclasses.replace(commit, metadata="m", leader_epoch=3), version=4)
    assert v4 == b"\x00\x04" + struct.pack(">qi", 12, 3) + b"\x02m" + struct.pack(">q", 1700000000000) + b"\x00"


def _as_dict(obj):
    return dataclasses.asdict(obj)


def _expected_at(message, version: int, obj) -> dict:
    """What the generic layer yields for ``obj`` written at ``version``: absent fields at defaults."""
    return dict(message.parse(message.build(_as_dict(obj), version), version))


def _normalise(container):
    if isinstance(container, list):
        return [_normalise(x) for x in container]
    if isinstance(container, dict):
        return {k: _normalise(v) for k, v in container.items() if not k.startswith("_")}
    return container


@settings(max_examples=60)
@given(offset_values, st.integers(0, 4))
def test_fast_offset_value_codec_equals_the_generic_schema_layer(value, version):
    msg = r.OFFSET_COMMIT_VALUE
    generic = msg.build(_as_dict(value), version)
    fast = compile_writer(msg, version)(value)
    assert fast == generic
    decoded, end = compile_reader(msg, version, r.OffsetValue)(generic, 0)
    assert end == len(generic)
    assert _as_dict(decoded) == _normalise(msg.parse(generic, version))


@settings(max_examples=60)
@given(group_values, st.integers(0, 4))
def test_fast_group_value_codec_equals_the_generic_schema_layer(value, version):
    msg = r.GROUP_METADATA_VALUE
    generic = msg.build(_as_dict(value), version)
    assert compile_writer(msg, version, nested=NESTED)(value) == generic
    decoded, end = compile_reader(msg, version, r.GroupValue, NESTED)(generic, 0)
    assert end == len(generic)
    assert _as_dict(decoded) == _normalise(msg.parse(generic, version))


@given(offset_keys, st.integers(0, 1))
def test_fast_key_codec_equals_the_generic_schema_layer(key, key_type):
    generic = r.OFFSET_COMMIT_KEY.build(_as_dict(key), key_type)
    assert compile_writer(r.OFFSET_COMMIT_KEY, key_type)(key) == generic
    assert r.decode_key(struct.pack(">h", key_type) + generic) == key


# --- consumer protocol ------------------------------------------------------------------------

topic_partitions = st.builds(cp.TopicPartitions, text, st.lists(int32, max_size=5))
subscriptions = st.builds(
    cp.Subscription, version=st.integers(0, 3), topics=st.lists(text, max_size=4),
    user_data=st.one_of(st.none(), blob), owned_partitions=st.lists(topic_partitions, max_size=3),
    generation_id=int32, rack_id=st.one_of(st.none(), text))
assignments = st.builds(cp.Assignment, version=st.integers(0, 3),
                        assigned_partitions=st.lists(topic_partitions, max_size=3),
                        user_data=st.one_of(st.none(), blob))


def _subscription_at(sub: cp.Subscription) -> cp.Subscription:
    """``sub`` as its version can carry it (later fields back at their defaults)."""
    v = sub.version
    return dataclasses.replace(sub, owned_partitions=sub.owned_partitions if v >= 1 else [],
                               generation_id=sub.generation_id if v >= 2 else -1,
                               rack_id=sub.rack_id if v >= 3 else None)


@given(subscriptions)
def test_subscription_round_trip(sub):
    data = cp.encode_subscription(sub)
    assert data == struct.pack(">h", sub.version) + cp.SUBSCRIPTION.build(_as_dict(sub), sub.version)
    assert cp.decode_subscription(data) == _subscription_at(sub)
    assert cp.decode_subscription_topics(data) == sub.topics


@given(assignments)
def test_assignment_round_trip(asg):
    data = cp.encode_assignment(asg)
    assert data == struct.pack(">h", asg.version) + cp.ASSIGNMENT.build(_as_dict(asg), asg.version)
    assert cp.decode_assignment(data) == asg


@given(subscriptions, st.integers(4, 2**15 - 1), blob)
def test_newer_subscription_versions_parse_with_the_highest_known_layout(sub, version, trailing):
    sub = dataclasses.replace(sub, version=3)
    data = struct.pack(">h", version) + cp.encode_subscription(sub)[2:] + trailing
    assert cp.decode_subscription(data) == dataclasses.replace(sub, version=version)
    assert cp.decode_subscription_topics(data) == sub.topics


@given(assignments, st.integers(4, 2**15 - 1), blob)
def test_newer_assignment_versions_parse_with_the_highest_known_layout(asg, version, trailing):
    data = struct.pack(">h", version) + cp.encode_assignment(asg)[2:] + trailing
    assert cp.decode_assignment(data) == dataclasses.replace(asg, version=version)


def test_subscription_topics_unknown_for_unparsable_blobs():
    good = cp.encode_subscription(cp.Subscription(version=0, topics=["a", "b"]))
    assert cp.decode_subscription_topics(good) == ["a", "b"]
    assert cp.decode_subscription_topics(b"\xff\xff" + good[2:]) is None  # negative version
    assert cp.decode_subscription_topics(good[:-1]) is None  # user data cut short
    assert cp.decode_subscription_topics(b"") is None
    assert cp.decode_subscription_topics(b"\x00\x00\x7f\xff\xff\xff") is None  # absurd topic count
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_assignment(b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff")
    with pytest.raises(cp.ConsumerProtocolError):
        cp.encode_subscription(cp.Subscription(version=4, topics=[]))


# --- group -> offsets partition ------------------------------------------------------------------


@pytest.mark.parametrize(("group", "hash_", "partition"), [
    ("", 0, 0),
    ("test-group", 627841412, 12),
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", None, 6),
    ("groupé", -1237460406, 6),
    ("polygenelubricants", -(2**31), 0),  # Kafka's Utils.abs(MIN_VALUE) == 0; naive abs gives 48
])
def test_partition_for_matches_kafka(group, hash_, partition):
    if hash_ is not None:
        assert r.java_string_hash(group) == hash_
    assert r.partition_for(group, 50) == partition


def _java_hash_from_units(units: list[int]) -> int:
    h = 0
    for u in units:
        h = (31 * h + u) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def test_partition_for_counts_surrogate_pairs_as_two_code_units():
    group = "g\U0001F600"  # U+1F600 is the UTF-16 pair D83D DE00 in Java
    expected = _java_hash_from_units([0x67, 0xD83D, 0xDE00])
    assert expected == 1871882  # 0x67 * 31**2 + 0xD83D * 31 + 0xDE00
    assert r.java_string_hash(group) == expected
    assert r.java_string_hash(group) != _java_hash_from_units([0x67, 0x1F600])
    assert r.partition_for(group, 50) == 32


@given(st.text())
def test_java_string_hash_over_utf16_code_units(s):
    units = []
    for ch in s:
        cp_ = ord(ch)
        if cp_ > 0xFFFF:
            cp_ -= 0x10000
            units += [0xD800 + (cp_ >> 10), 0xDC00 + (cp_ & 0x3FF)]
        else:
            units.append(cp_)
    h = _java_hash_from_units(units)
    assert r.java_string_hash(s) == h
    assert r.partition_for(s, 50) == (0 if h == -(2**31) else abs(h)) % 50


def test_partition_for_rejects_no_partitions():
    with pytest.raises(ValueError):
        r.partition_for("g", 0)
