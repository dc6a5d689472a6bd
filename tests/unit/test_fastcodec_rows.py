"""The generated row writer and pre-encoded arrays (``fastcodec.compile_row_writer``,
``EncodedArray``) write exactly what the declaration's construct struct builds.

OffsetFetch answers are written partition by partition with the row writer
of the response's partition struct; the response built that way must be the
same bytes, for every version, as the declared codec builds from dicts.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.fastcodec import EncodedArray, compile_fixed_rows, compile_row_writer
from odradek.protocol.messages.offset_commit import RESPONSE as COMMIT_RESPONSE
from odradek.protocol.messages.offset_fetch import RESPONSE as FETCH_RESPONSE

partitions = st.lists(st.fixed_dictionaries({
    "partition_index": st.integers(0, 2**31 - 1),
    "committed_offset": st.integers(-1, 2**63 - 1),
    "committed_leader_epoch": st.integers(-1, 2**31 - 1),
    "metadata": st.one_of(st.none(), st.text(max_size=40)),
    "error_code": st.sampled_from([0, 3, 14, 88]),
}), max_size=20)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=10), partitions, st.uuids()), max_size=4)

ORDER = ("partition_index", "committed_offset", "committed_leader_epoch", "metadata", "error_code")


def _path(version: int) -> tuple[str, ...]:
    return ("groups", "topics", "partitions") if version >= 8 else ("topics", "partitions")


def _response(version: int, named: list[tuple[str, object, uuid.UUID]]) -> dict:
    """v10 names its topics by id (a uuid, which the generated codec writes too)."""
    listed = [{"topic_id": topic_id, "partitions": parts} if version >= 10 else {"name": name, "partitions": parts}
              for name, parts, topic_id in named]
    if version >= 8:
        return {"throttle_time_ms": 0, "groups": [{"group_id": "g", "topics": listed, "error_code": 0}]}
    return {"throttle_time_ms": 0, "topics": listed, "error_code": 0}


def _encoded(version: int, parts: list[dict]) -> EncodedArray:
    row = compile_row_writer(FETCH_RESPONSE, version, _path(version))
    chunks: list[bytes] = []
    for p in parts:
        row(chunks.append, *(p[name] for name in ORDER))
    return EncodedArray(len(parts), b"".join(chunks))


@settings(max_examples=40, deadline=None)
@given(topics, st.integers(0, 10))
def test_rows_written_ahead_equal_the_declared_codec(named, version):
    generic = FETCH_RESPONSE.struct(version).build(_response(version, named))  # construct
    fast = FETCH_RESPONSE.codec(version)[1]
    assert fast(_response(version, named)) == generic
    assert fast(_response(version, [(n, _encoded(version, ps), i) for n, ps, i in named])) == generic
    # rows added to an encoded array (a fault rule's per-partition errors) follow its bytes
    assert fast(_response(version, [(n, _encoded(version, ps[:1]).extended(ps[1:]), i)
                                    for n, ps, i in named])) == generic


def test_row_writer_refuses_a_path_that_is_not_an_array_of_structs():
    with pytest.raises(ValueError):
        compile_row_writer(FETCH_RESPONSE, 8, ("topics", "partitions"))  # v8 nests under groups
    with pytest.raises(ValueError):
        compile_row_writer(FETCH_RESPONSE, 10, ("groups",))


@pytest.mark.parametrize("size", [0, 125, 126, 127, 128, 300])
def test_lengths_around_the_one_byte_varint_are_written_as_construct_writes_them(size):
    """Compact lengths under 127 come from a table, longer ones from the varint encoder."""
    metadata = "m" * size
    parts = [{"partition_index": i, "committed_offset": i, "committed_leader_epoch": 0, "metadata": metadata,
              "error_code": 0} for i in range(size)]
    generic = FETCH_RESPONSE.struct(8).build(_response(8, [("t" * size or "t", parts, uuid.UUID(int=1))]))
    assert FETCH_RESPONSE.codec(8)[1](_response(8, [("t" * size or "t", parts, uuid.UUID(int=1))])) == generic
    assert FETCH_RESPONSE.codec(8)[1](_response(8, [("t" * size or "t", _encoded(8, parts), uuid.UUID(int=1))])) \
        == generic


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.sampled_from([0, 3, 22, 25, 100])), max_size=200),
       st.integers(0, 10))
def test_fixed_rows_packed_at_once_equal_the_declared_codec(rows, version):
    """OffsetCommit's answer packs a topic's (partition, error) rows in one go (``compile_fixed_rows``):
    the same bytes construct builds from dicts, flexible versions' empty tag sections included."""
    packer = compile_fixed_rows(COMMIT_RESPONSE, version, ("topics", "partitions"))
    assert packer.fields == ("partition_index", "error_code")
    topic = {"name": "t", "topic_id": uuid.UUID(int=7)}
    dicts = [{"partition_index": p, "error_code": e} for p, e in rows]
    generic = COMMIT_RESPONSE.struct(version).build({"throttle_time_ms": 0, "topics": [{**topic, "partitions": dicts}]})
    data = packer(len(rows))(*(v for row in rows for v in row))
    packed = {"throttle_time_ms": 0, "topics": [{**topic, "partitions": EncodedArray(len(rows), data)}]}
    assert COMMIT_RESPONSE.codec(version)[1](packed) == generic


def test_fixed_rows_are_only_for_rows_of_fixed_width_fields():
    assert compile_fixed_rows(FETCH_RESPONSE, 8, ("groups", "topics", "partitions")) is None  # metadata
    with pytest.raises(ValueError):
        compile_fixed_rows(FETCH_RESPONSE, 8, ("topics", "partitions"))
