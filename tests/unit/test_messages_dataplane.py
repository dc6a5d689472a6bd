"""Data-plane and admin declarations agree with kafka-python's codec, byte for byte.

kafka-python 3.0 builds its codec from Kafka's JSON definitions, independently
of ours.  For every served version of each API below we derive a value with a
distinct entry in every field (tagged ones included, non-default so they are
on the wire) from our own declaration, then check both directions:
kafka-python decodes our bytes to the same values, and kafka-python's
encoding of those values is exactly our encoding (which also catches two
same-typed fields in swapped order).  A variant with every nullable field
null, one with nothing set (defaults only), and a per-version comparison of
field names, order, nullability and tags cover what one sample cannot.
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.data_container import DataContainer
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.schemas.fields.codecs import BitField

from odradek.protocol.registry import APIS
from odradek.protocol.schema import F, Message

KP = {
    0: (ProduceRequest, ProduceResponse),
    1: (FetchRequest, FetchResponse),
    2: (ListOffsetsRequest, ListOffsetsResponse),
    3: (MetadataRequest, MetadataResponse),
    18: (ApiVersionsRequest, ApiVersionsResponse),
    19: (CreateTopicsRequest, CreateTopicsResponse),
    20: (DeleteTopicsRequest, DeleteTopicsResponse),
    22: (InitProducerIdRequest, InitProducerIdResponse),
    32: (DescribeConfigsRequest, DescribeConfigsResponse),
    33: (AlterConfigsRequest, AlterConfigsResponse),
    44: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    60: (DescribeClusterRequest, DescribeClusterResponse),
}

# kafka-python patches a JSON default: ListOffsets replica_id defaults to -1
# there (what consumers send); the JSON, and so our declaration, has none (0).
KP_DEFAULT_OVERRIDES = {(2, "request"): {"replica_id": 0}}

# kafka-python renames the authorized-operations fields (and decodes them as sets).
KP_RENAMES = {
    (3, "response"): {"topic_authorized_operations": "authorized_operations",
                      "cluster_authorized_operations": "authorized_operations"},
    (60, "response"): {"cluster_authorized_operations": "authorized_operations"},
}

# kafka-python decodes any ApiVersions response with an error as v0 (KIP-511's
# fallback), so the sample keeps error_code 0 there.
SAMPLE_FIXES = {(18, "response"): {"error_code": 0}}

CASES = [(key, kind, v) for key in KP for v in APIS[key].declared for kind in ("request", "response")]


def _ids(case):
    key, kind, v = case
    return f"{APIS[key].name}-{kind}-v{v}"


def _message(key: int, kind: str) -> Message:
    spec = APIS[key]
    return spec.request if kind == "request" else spec.response


# --- sample values from our declaration ---------------------------------------

def _scalar(f: F, n: int):
    t = f.elem_type
    if t == "bool":  # tagged ones must differ from the default to be on the wire
        return not f.default if f.tag is not None else bool(n % 2)
    if t == "int8":
        return n % 100 + 2
    if t in ("int16", "int32", "int64"):
        return n
    if t == "string":
        return f"{f.name}-{n}"
    if t in ("bytes", "records"):
        return f"{f.name}-{n}".encode()
    if t == "uuid":
        return uuid.UUID(int=n)
    raise AssertionError(t)


def _sample(fields: list[F], v: int, seq, nulls: bool) -> dict:
    out = {}
    for f in fields:
        if v not in f.versions:
            continue
        if nulls and v in f.nullable:
            out[f.name] = None
        elif f.fields is not None and f.is_array:
            out[f.name] = [_sample(f.fields, v, seq, nulls) for _ in range(2)]
        elif f.fields is not None:
            out[f.name] = _sample(f.fields, v, seq, nulls)
        elif f.is_array:
            out[f.name] = [_scalar(f, next(seq)) for _ in range(2)]
        else:
            out[f.name] = _scalar(f, next(seq))
    return out


def _project(fields: list[F], v: int, obj) -> dict:
    """Our parsed value as plain dicts, only the fields on the wire in ``v``."""
    out = {}
    for f in fields:
        if v not in f.versions:
            continue
        val = obj[f.name]
        if f.fields is not None and val is not None:
            val = ([_project(f.fields, v, x) for x in val] if f.is_array
                   else _project(f.fields, v, val))
        out[f.name] = val
    return out


# --- kafka-python side ----------------------------------------------------------

def _is_bitfield(field) -> bool:
    return getattr(field, "_type_str", None) == "bitfield"


def _kp_plain(fields, v: int, obj, renames: dict) -> dict:
    """A kafka-python value as plain dicts, restricted to our fields in ``v``."""
    out = {}
    for f in fields:
        if v not in f.versions:
            continue
        val = getattr(obj, renames.get(f.name, f.name))
        if isinstance(val, DataContainer):
            val = _kp_plain(f.fields, v, val, renames)
        elif f.fields is not None and val is not None:
            val = [_kp_plain(f.fields, v, x, renames) for x in val]
        elif isinstance(val, set):
            val = BitField.to_32_bit_field(val)
        elif isinstance(val, (memoryview, bytearray)):
            val = bytes(val)
        out[f.name] = val
    return out


def _kp_kwargs(kp_fields: dict, d: dict, renames: dict) -> dict:
    kwargs = {}
    for name, val in d.items():
        name = renames.get(name, name)
        field = kp_fields[name]
        if val is not None and field.is_struct():
            val = field.data_class(**_kp_kwargs(field.fields, val, renames))
        elif val is not None and field.is_struct_array():
            val = [field.data_class(**_kp_kwargs(field.fields, x, renames)) for x in val]
        elif val is not None and _is_bitfield(field):
            val = BitField.from_32_bit_field(val)
        kwargs[name] = val
    return kwargs


def _kp_decode(key, kind, v, data: bytes, fields) -> dict:
    kp_cls = KP[key][kind == "response"]
    return _kp_plain(fields, v, kp_cls.decode(data, version=v), KP_RENAMES.get((key, kind), {}))


def _kp_encode(key, kind, v, d: dict) -> bytes:
    kp_cls = KP[key][kind == "response"]
    kwargs = _kp_kwargs(kp_cls._struct.fields, d, KP_RENAMES.get((key, kind), {}))
    return bytes(kp_cls(version=v, **kwargs).encode(version=v))


# --- the checks -------------------------------------------------------------------

@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_matches_kafka_python(case, nulls):
    key, kind, v = case
    msg = _message(key, kind)
    sample = _sample(msg.fields, v, itertools.count(2), nulls) | SAMPLE_FIXES.get((key, kind), {})

    ours = msg.build(sample, v)
    assert _kp_decode(key, kind, v, ours, msg.fields) == sample
    assert _kp_encode(key, kind, v, sample) == ours
    assert _project(msg.fields, v, msg.parse(ours, v)) == sample


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_defaults_match_kafka_python(case):
    key, kind, v = case
    kp_cls = KP[key][kind == "response"]
    overrides = KP_DEFAULT_OVERRIDES.get((key, kind), {})
    assert _message(key, kind).build({}, v) == bytes(kp_cls(version=v, **overrides).encode(version=v))


def _our_shape(fields: list[F], v: int, renames: dict) -> list:
    shape = []
    for f in fields:
        if v in f.versions:
            tag = f.tag if v in f.tagged else None
            nested = _our_shape(f.fields, v, renames) if f.fields is not None else None
            shape.append((renames.get(f.name, f.name), v in f.nullable, tag, nested))
    return sorted(shape, key=lambda e: -1 if e[2] is None else e[2])  # stable: wire order, then tags


def _kp_shape(struct, v: int) -> list:
    shape = []
    for f in struct.untagged_fields(v) + sorted(struct.tagged_fields(v)._fields, key=lambda f: f.tag):
        nested = _kp_shape(f, v) if (f.is_struct() or f.is_struct_array()) else None
        tag = f.tag if f.tagged_field_q(v) else None
        shape.append((f.name, f.nullable_for_version_q(v), tag, nested))
    return shape


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_declaration_shape_matches_kafka_python(case):
    """Names, order, nullability and tags per version -- what a sample cannot reveal."""
    key, kind, v = case
    kp_cls = KP[key][kind == "response"]
    renames = KP_RENAMES.get((key, kind), {})
    assert _our_shape(_message(key, kind).fields, v, renames) == _kp_shape(kp_cls._struct, v)


def test_declared_ranges_match_registry():
    for key in KP:
        spec = APIS[key]
        assert spec.request.valid == spec.declared == spec.response.valid
        for v in spec.declared:
            assert spec.request.is_flexible(v) == KP[key][0].flexible_version_q(v)
            assert spec.response.is_flexible(v) == KP[key][1].flexible_version_q(v)
