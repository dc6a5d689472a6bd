"""The steady ConsumerGroupHeartbeat's lean path (issue 32): the same bytes and values as the
declared codecs, by another road.

- the generated reader reads a *default tail* (the fields ending a message that all declare a
  null or numeric default) with one comparison: it reads what construct reads, every cut of it
  is a ProtocolError;
- the handler answers a Stable member with ``steady_body``, byte for byte the generated writer's
  and construct's encoding of that answer;
- the server's framing packs the response header in one call, as ``RESPONSE_HEADER`` encodes it;
- code that amends answers (a fault rule's throttle) reads an encoded answer back (``decoded``).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.dispatch import RequestContext, decoded
from odradek.broker.faulted import apply_fault
from odradek.broker.handlers.consumer_groups import steady_body
from odradek.protocol import fastcodec, headers
from odradek.protocol.messages import consumer_group_heartbeat as cgh
from odradek.protocol.primitives import ProtocolError, Reader
from odradek.protocol.registry import APIS

STEADY_TAIL = b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00"  # instance, rack .. owned partitions, tags


def test_the_steady_heartbeat_request_ends_in_a_default_tail():
    plans = [fastcodec._Plan(f, 1, True) for f in cgh.REQUEST.fields]
    start, tail = fastcodec._default_tail(plans, True)
    assert cgh.REQUEST.fields[start].name == "instance_id"
    assert tail == STEADY_TAIL


def _tailed() -> list[tuple[object, int]]:
    out = []
    for spec in APIS.values():
        for msg in (spec.request, spec.response):
            for v in msg.valid:
                try:
                    plans = [fastcodec._Plan(f, v, msg.is_flexible(v)) for f in msg.fields]
                    start, _ = fastcodec._default_tail(plans, msg.is_flexible(v))
                except fastcodec.UnsupportedDeclaration:
                    continue
                if start < len(plans):
                    out.append((msg, v))
    return out


TAILED = _tailed()


def test_some_messages_have_a_default_tail():
    assert (cgh.REQUEST, 1) in TAILED and (cgh.REQUEST, 0) in TAILED


STEADY_SHAPE = ("instance_id", "rack_id", "rebalance_timeout_ms", "subscribed_topic_names", "subscribed_topic_regex",
                "server_assignor", "topic_partitions")


@pytest.mark.parametrize("version", [0, 1])
def test_a_matched_default_tail_is_the_steady_shape(version):
    """The handler takes ``type(request) is DefaultTail`` for the steady shape: the tail covers
    every field it would compare, and a read whose tail did not match is a plain Container."""
    plans = [fastcodec._Plan(f, version, True) for f in cgh.REQUEST.fields]
    start, _ = fastcodec._default_tail(plans, True)
    tail = {pl.f.name for pl in plans[start:] if pl.present}
    assert tail == {n for n in STEADY_SHAPE if any(p.f.name == n and p.present for p in plans)}
    read, construct = cgh.REQUEST.codec(version)[0], cgh.REQUEST.struct(version)
    steady = read(construct.build({"group_id": "g", "member_id": "m", "member_epoch": 3}), 0)[0]
    assert type(steady) is fastcodec.DefaultTail and all(steady[n] in (None, -1) for n in tail)
    static = read(construct.build({"group_id": "g", "member_id": "m", "member_epoch": 3, "instance_id": "i"}), 0)[0]
    assert type(static) is not fastcodec.DefaultTail and static["instance_id"] == "i"


@pytest.mark.parametrize("msg, version", TAILED, ids=lambda x: getattr(x, "name", str(x)))
def test_a_default_tail_reads_as_construct_reads_it(msg, version):
    """The message at its defaults (the tail matched) and with an instance id (not matched)."""
    construct = msg.struct(version)
    read = msg.codec(version)[0]
    samples = [construct.build({})]
    if msg is cgh.REQUEST:
        samples.append(construct.build({"group_id": "g", "member_id": "m", "member_epoch": 3,
                                        "instance_id": "i"}))
        samples.append(construct.build({"group_id": "g", "member_id": "m", "member_epoch": 3}))
        assert samples[-1].endswith(STEADY_TAIL if version == 1 else STEADY_TAIL[:6] + STEADY_TAIL[7:])
    for data in samples:
        parsed, end = read(data, 0)
        assert end == len(data)
        expected = construct.parsefunc(Reader(data), None)
        assert parsed == expected and list(parsed) == [f.name for f in msg.fields]  # in declared order
        parsed.clear()  # each read its own Container (the tail's is a copy of one template)
        assert read(data, 0)[0] == expected
        for cut in range(len(data)):
            with pytest.raises(ProtocolError):
                read(data[:cut], 0)


@settings(max_examples=80, deadline=None)
@given(member_id=st.text(max_size=200), epoch=st.integers(-2**31, 2**31 - 1),
       interval=st.integers(-2**31, 2**31 - 1))
def test_the_steady_answer_is_the_declared_encoding(member_id, epoch, interval):
    body = {"member_id": member_id, "member_epoch": epoch, "heartbeat_interval_ms": interval}
    for version in cgh.RESPONSE.valid:
        assert steady_body(member_id, epoch, interval) == cgh.RESPONSE.build(body, version) \
            == cgh.RESPONSE.struct(version).build(body)


@settings(max_examples=40, deadline=None)
@given(correlation_id=st.integers(-2**31, 2**31 - 1), body=st.binary(max_size=40))
def test_the_response_framing_is_the_declared_header(correlation_id, body):
    for version in (0, 1):
        head, same = headers.encode_response_parts(correlation_id, version, body)
        declared = headers.RESPONSE_HEADER.struct(version).build({"correlation_id": correlation_id})
        assert same is body
        assert head == (len(declared) + len(body)).to_bytes(4, "big", signed=True) + declared


def _ctx(version: int = 1) -> RequestContext:
    return RequestContext(68, version, 7, "c", "/127.0.0.1", 1)


def test_an_encoded_answer_reads_back_as_its_fields():
    answer = decoded(_ctx(), steady_body("m-1", 4, 5000))
    assert type(answer) is dict
    assert answer["member_id"] == "m-1" and answer["member_epoch"] == 4
    assert answer["heartbeat_interval_ms"] == 5000 and answer["assignment"] is None
    assert decoded(_ctx(), {"x": 1}) == {"x": 1}


@pytest.mark.parametrize("delay_ms", [0, 1])
def test_a_fault_rules_throttle_reaches_an_encoded_answer(delay_ms):
    """A throttle rule on ConsumerGroupHeartbeat amends the steady answer (bytes) too."""
    rule = SimpleNamespace(id="r", error=None, per_partition=False, close=None, delay_ms=delay_ms,
                           throttle_ms=250)
    log = SimpleNamespace(info=lambda *a, **k: None)
    result = apply_fault(rule, 68, lambda ctx, req: steady_body("m-1", 4, 5000), _ctx(), {}, log,
                         "ConsumerGroupHeartbeat")
    if delay_ms:
        result = asyncio.run(result)
    assert result["throttle_time_ms"] == 250 and result["member_id"] == "m-1"
    assert APIS[68].response.build(result, 1)[:4] == (250).to_bytes(4, "big")
