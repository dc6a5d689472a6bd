"""Hostile input to the schema registry: random bodies, paths and parameters get an answer in
Confluent's error shape (or a success), never a 500 or a traceback, and the registry goes on."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.testing.handle import BrokerHandle

from .registry_helpers import http

pytestmark = pytest.mark.integration

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
SCHEMA_TEXT = st.one_of(
    st.text(max_size=60),
    JSON.map(json.dumps),
    st.sampled_from(['"int"', '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}',
                     '{"type":"object"}', 'syntax = "proto3"; message M { int32 a = 1; }', "{", "[]"]),
)
BODY = st.one_of(
    JSON,
    st.fixed_dictionaries({"schema": SCHEMA_TEXT}, optional={
        "schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF", "XML", "", 5]),
        "references": st.one_of(JSON, st.lists(st.fixed_dictionaries(
            {"name": st.text(max_size=8), "subject": st.text(max_size=8), "version": st.integers(-2, 3)}),
            max_size=2)),
        "metadata": JSON, "ruleSet": JSON, "id": st.integers(-2, 10**10), "version": st.integers(-2, 10**10),
        "compatibility": st.text(max_size=20), "mode": st.text(max_size=12)}),
)
PATHS = st.sampled_from([
    "/subjects/{s}/versions", "/subjects/{s}", "/compatibility/subjects/{s}/versions/{v}?verbose=true",
    "/compatibility/subjects/{s}/versions", "/config/{s}", "/config", "/mode/{s}", "/mode",
    "/subjects/{s}/versions/{v}", "/subjects/{s}/versions/{v}/referencedby", "/schemas/ids/{v}",
    "/schemas/guids/{v}", "/subjects/{s}/metadata?key={v}&value={v}", "/subjects?offset={v}&limit={v}",
])
METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE"])


@pytest.fixture(scope="module")
def registry():
    with BrokerHandle(schema_registry=True) as handle:
        yield handle


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=PATHS, method=METHODS, subject=st.text(min_size=1, max_size=12), version=st.text(max_size=6),
       body=BODY, raw=st.booleans())
def test_random_requests_get_confluents_error_shape(registry, path, method, subject, version, body, raw):
    quote = urllib.parse.quote
    url = registry.schema_registry_url + path.format(s=quote(subject, safe=""), v=quote(version, safe=""))
    data = json.dumps(body).encode() if not raw else json.dumps(body).encode()[:-1]
    status, answer = http(url, method, raw=data if method in ("POST", "PUT") else None)
    assert status < 500, answer
    if status >= 400:
        assert set(answer) == {"error_code", "message"} and isinstance(answer["error_code"], int)


def test_the_registry_still_serves_after_the_storm(registry):
    status, answer = http(f"{registry.schema_registry_url}/subjects/after-storm/versions", "POST",
                          {"schema": '"string"'})
    assert status == 200 and answer["version"] >= 1


@pytest.mark.parametrize("body, code", [
    (b"[" * 100_000 + b"]" * 100_000, 400),  # JSON nested past the parser's recursion limit
    (json.dumps({"schema": '{"type":"array","items":' * 3000 + '"int"' + "}" * 3000}).encode(), 42201),
    (json.dumps({"schema": "[" * 3000 + "]" * 3000, "schemaType": "JSON"}).encode(), 42201),
    (json.dumps({"schema": 'syntax = "proto3"; ' + "message M { " * 3000 + "}" * 3000,
                 "schemaType": "PROTOBUF"}).encode(), 42201),
])
def test_deeply_nested_input_is_refused_not_a_500(registry, body, code):
    status, answer = http(f"{registry.schema_registry_url}/subjects/deep/versions", "POST", raw=body)
    assert answer["error_code"] == code, answer
