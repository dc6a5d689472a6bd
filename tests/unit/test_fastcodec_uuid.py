"""uuid fields in the generated codec (``fastcodec``): the same bytes and values as the declared
construct struct, so the messages that name topics by id (OffsetCommit and OffsetFetch v10,
KIP-848's consumers) take the generated path instead of construct."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import fastcodec
from odradek.protocol.messages import offset_commit, offset_fetch
from odradek.protocol.primitives import ZERO_UUID, ProtocolError, Reader

V10 = [(offset_commit.REQUEST, "request"), (offset_commit.RESPONSE, "response"),
       (offset_fetch.REQUEST, "request"), (offset_fetch.RESPONSE, "response")]


@pytest.mark.parametrize("message, side", V10)
def test_v10_offset_messages_are_generated(message, side):
    """Before uuids were a kind of the generated codec, these fell back to construct."""
    fastcodec.compile_reader(message, 10, None)
    fastcodec.compile_writer(message, 10, mapping=True)


commit_request = st.fixed_dictionaries({
    "group_id": st.text(max_size=8), "generation_id_or_member_epoch": st.integers(-1, 9),
    "member_id": st.text(max_size=8), "group_instance_id": st.none() | st.text(max_size=4),
    "topics": st.lists(st.fixed_dictionaries({
        "topic_id": st.uuids() | st.just(ZERO_UUID),
        "partitions": st.lists(st.fixed_dictionaries({
            "partition_index": st.integers(0, 2**31 - 1), "committed_offset": st.integers(-1, 2**63 - 1),
            "committed_leader_epoch": st.integers(-1, 9), "committed_metadata": st.none() | st.text(max_size=5),
        }), max_size=3),
    }), max_size=3),
})


@settings(max_examples=60, deadline=None)
@given(commit_request)
def test_uuid_reads_and_writes_as_construct_does(req):
    construct = offset_commit.REQUEST.struct(10)
    read, write = offset_commit.REQUEST.codec(10)
    data = construct.build(req)
    assert write(req) == data
    parsed, end = read(data, 0)
    assert end == len(data)
    assert [t.topic_id for t in parsed.topics] == [t["topic_id"] for t in req["topics"]]
    assert all(type(t.topic_id) is uuid.UUID for t in parsed.topics)
    assert parsed == construct.parsefunc(Reader(data), None)


def test_a_missing_uuid_is_written_as_the_zero_uuid():
    """As the schema layer's ``write_uuid``: None (or no key in a mapping) is Kafka's ZERO_UUID."""
    write = offset_fetch.RESPONSE.codec(10)[1]
    body = {"throttle_time_ms": 0, "groups": [{"group_id": "g", "error_code": 0,
                                               "topics": [{"topic_id": None, "partitions": []}, {"partitions": []}]}]}
    assert write(body) == offset_fetch.RESPONSE.struct(10).build(body)


def test_a_truncated_uuid_is_a_protocol_error():
    read = offset_commit.REQUEST.codec(10)[0]
    whole = offset_commit.REQUEST.struct(10).build({"group_id": "g", "topics": [
        {"topic_id": uuid.uuid4(), "partitions": []}]})
    for cut in range(len(whole)):  # every cut, those inside the uuid's 16 bytes included
        with pytest.raises(ProtocolError):
            read(whole[:cut], 0)
