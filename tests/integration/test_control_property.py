"""Property: for every (API, version) the broker serves, an injected error is a response that
our codec and kafka-python's codec both decode, with the error wherever that version carries one.

Over TCP: a rule for the API (with an error hypothesis picks from the
API's table) is added, a request built from the declaration is sent, and
the answer frame is decoded twice.  An ApiVersions error comes back as v0
(what clients read an ApiVersions error as, as for UNSUPPORTED_VERSION).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.broker.control.error_tables import allowed_errors
from odradek.broker.wire_client import SyncClient, encode
from odradek.protocol import headers
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import Reader
from odradek.protocol.registry import APIS
from odradek.testing import ThreadedBroker
from tests.hostile_requests import present_error_codes, sample
from tests.unit.test_codec_crosscheck import BEYOND_KAFKA_PYTHON, KP, ApiMessage

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served_broker():
    with ThreadedBroker() as b:
        yield b


def _served() -> list[tuple[int, int]]:
    with ThreadedBroker() as b:
        return [(k, v) for k, lo, hi in b.app.handlers.served() for v in range(lo, hi + 1)]


SERVED = _served()


def _decode_ours(api_key: int, version: int, frame: bytes):
    spec = APIS[api_key]
    reader = Reader(frame)
    head = headers.RESPONSE_HEADER.read(reader, headers.response_header_version(api_key, spec.is_flexible(version)))
    body = bytes(frame[reader.pos:])
    return head.correlation_id, spec.response.parse(body, version), body


@pytest.mark.parametrize("api_key, version", SERVED, ids=[f"{APIS[k].name}-v{v}" for k, v in SERVED])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_injected_error_decodes_with_both_codecs_and_carries_the_code(served_broker, api_key, version, data):
    codes = sorted(allowed_errors(api_key))
    code = data.draw(st.sampled_from(codes), label="error")
    body = sample(api_key, version, data.draw(st.integers(0, 50), label="seed"))
    if api_key == 0:
        body["acks"] = -1  # acks=0 is never answered, fault or not
    served_broker.fault(api_key, error=int(code), versions=version, times=1)
    with SyncClient("127.0.0.1", served_broker.app.endpoint.port) as c:
        c.send_raw(encode(api_key, version, 7, body))
        frame = c.recv_frame()
    answer_version = 0 if api_key == headers.API_VERSIONS_KEY else version
    cid, ours, raw = _decode_ours(api_key, answer_version, frame)
    assert cid == 7
    found = present_error_codes(APIS[api_key].response.fields, ours, answer_version)
    assert set(found) <= {code}, found
    top_level = any(f.name == "error_code" and answer_version in f.versions for f in APIS[api_key].response.fields)
    if top_level:
        assert found, "the version carries a top-level error code"
    if api_key not in BEYOND_KAFKA_PYTHON:  # kafka-python has no schema for these (our codec decoded it)
        theirs = ApiMessage.decode.__func__(KP[(api_key, "response")], raw, version=answer_version)
        if top_level:
            assert theirs.error_code == code
    assert served_broker.faults() == []  # the rule fired once


def test_every_served_api_has_an_error_table_and_an_error_answer():
    from odradek.broker.error_answers import SHAPES

    for api_key in {k for k, _ in SERVED}:
        assert allowed_errors(api_key), APIS[api_key].name
        assert api_key in SHAPES, APIS[api_key].name
        assert ErrorCode.UNKNOWN_SERVER_ERROR in allowed_errors(api_key)
