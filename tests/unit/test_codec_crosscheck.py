"""Cross-check our wire codec against kafka-python's independent JSON-schema codec.

Our declarations are hand-written from Kafka's JSON message definitions;
kafka-python 3.x ships the same JSON files and generates its own encoder and
decoder from them.  Agreement between the two, byte for byte, on random
messages for every API and version in the registry is the evidence that a
declaration (field order, versions, nullability, tags, defaults, compact
encodings) is right.  The harness reads only ``registry.APIS``: a new API
module is checked as soon as it exists.

Per API, side (request/response) and declared version:

* the declaration matches kafka-python's schema field by field (names,
  versions, nullable versions, tags, defaults -- defaults never reach the
  wire, so only this check can catch a wrong one);
* on hypothesis-generated messages: our build -> our parse round-trips
  (the generated fast codec, compiled and interpreted construct, all equal); our bytes equal kafka-python's bytes; our
  bytes decode with kafka-python to the same values; kafka-python's bytes
  parse with ours to the same values.

Known kafka-python deviations, normalised here (never worked around in our
codec), each with its reason:

1. Client-side overrides bypassed: we call the generic
   ``ApiMessage.encode``/``ApiMessage.decode``.  ``ApiVersionsResponse.decode``
   re-reads *any* body whose error code is non-zero as v0 (the KIP-511
   fallback a client applies to UNSUPPORTED_VERSION answers), and
   ``MetadataRequest.encode`` rewrites a v0 null topic list to ``[]``; both are
   client policy, not codec.  (For the broker: an ApiVersions response with a
   non-zero error code must be encoded as v0, or kafka-python misreads it.)
2. ``authorized_operations`` fields (DescribeGroups, Metadata,
   DescribeCluster) are patched by kafka-python from int32 to a set of bit
   positions, with INT32_MIN (only bit 31, Kafka's "not requested") mapped to
   None; Metadata and DescribeCluster also rename them (e.g.
   ``cluster_authorized_operations`` -> ``authorized_operations``).  Same
   bytes; we convert int <-> set and match fields by their JSON name.
3. A zero UUID decodes to None in kafka-python; Kafka (and we) keep the zero
   UUID as the value.
4. Tagged fields are written when they differ from their default.  For a
   tagged *struct* kafka-python's default is None, so it writes any struct
   it is given, while Kafka writes it only when it differs from a struct of
   default values (as we do); an absent tagged struct decodes to None.  The
   same holds for a tagged uuid (default None vs the zero UUID).  We hand
   kafka-python its own default when our value equals ours.
5. ``records`` fields default to ``b''`` in kafka-python; Kafka's default is
   null, as is ours.  Defaults of ``records`` fields are not compared.
6. kafka-python's JSON files come from a newer Kafka (4.x): some messages
   have more versions or fields beyond our ranges (e.g. OffsetCommit v10
   topic ids).  Fields outside our declared range are ignored; kafka-python
   also accepts versions below its JSON ``validVersions`` (it resets the
   minimum to 0), so every version we declare can be checked.
7. kafka-python patches some JSON defaults for its client's convenience
   (``ListOffsetsRequest.replica_id`` defaults to -1, a consumer's id; Kafka's
   JSON gives no default, i.e. 0).  Defaults are compared with the
   unpatched JSON, read by kafka-python's own field parser.
"""

from __future__ import annotations

import copy
import importlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.primitives import ZERO_UUID, Reader
from odradek.protocol.registry import APIS, ApiSpec
from odradek.protocol.schema import F, Message, Versions

MAX_EXAMPLES = 20
SIDES = ("request", "response")

# --- kafka-python side ------------------------------------------------------------

# kafka-python reads its JSON with deprecated importlib.resources calls; keep that
# noise (a hundred DeprecationWarnings) out of our test report
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    _KP_MODULES = {name: importlib.import_module(f"kafka.protocol.{name}") for name in (
        "api_message", "schemas", "schemas.fields.codecs", "admin", "consumer", "metadata", "producer")}
ApiMessage = _KP_MODULES["api_message"].ApiMessage
BaseField = _KP_MODULES["schemas"].BaseField
SimpleField = _KP_MODULES["schemas"].SimpleField
load_json = _KP_MODULES["schemas"].load_json
BitField = _KP_MODULES["schemas.fields.codecs"].BitField


def _kp_classes() -> dict[tuple[int, str], type]:
    """kafka-python's primary message classes by (api key, "request"/"response")."""
    found: dict[tuple[int, str], type] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls._class_version is None:  # skip the per-version wrapper classes
            seen = found.setdefault((cls.API_KEY, cls.type), cls)
            assert seen is cls, f"two kafka-python classes for api key {cls.API_KEY}: {seen}, {cls}"
    return found


KP = _kp_classes()


# APIs newer than kafka-python's bundled schemas (it stops at Kafka 3.x's set): only our own
# round trip (construct compiled and interpreted, the generated fast path) checks them here
BEYOND_KAFKA_PYTHON = {68, 69, 71, 72,  # ConsumerGroupHeartbeat/Describe (KIP-848), Get/PushTelemetry (KIP-714)
                       76, 77, 78, 79, 90, 91, 92}  # ShareGroupHeartbeat/Describe, ShareFetch/Acknowledge,
# Describe/Alter/DeleteShareGroupOffsets (KIP-932)


def kp_class(spec: ApiSpec, side: str) -> type:
    cls = KP.get((spec.key, side))
    if cls is None and spec.key in BEYOND_KAFKA_PYTHON:
        pytest.skip(f"kafka-python has no schema for {spec.name} (api key {spec.key})")
    assert cls is not None, f"kafka-python has no {side} class for api key {spec.key}"
    return cls


def _is_bitfield(kpf: BaseField) -> bool:
    return isinstance(kpf, SimpleField) and kpf._type is BitField


def _kp_struct(kpf: BaseField):
    """The StructField whose ``_fields`` kafka-python encodes (arrays wrap one)."""
    return kpf.array_of if kpf.is_struct_array() else kpf


def _int_to_bits(value: int) -> set[int] | None:
    """Our int32 bit field -> kafka-python's set of bit positions (deviation 2)."""
    bits = {i for i in range(32) if (value >> i) & 1}
    return None if bits == {31} else bits


def _bits_to_int(bits: set[int] | None) -> int:
    unsigned = sum(1 << i for i in ({31} if bits is None else bits))
    return unsigned - (1 << 32) if unsigned & 0x80000000 else unsigned


# --- declaration <-> kafka-python field pairing ---------------------------------------


@dataclass
class Node:
    """One of our fields paired with kafka-python's field for the same JSON field."""

    f: F
    kp: BaseField | None  # None: kafka-python lacks it (a failure if in range)
    json: dict | None  # the field's unpatched JSON definition
    children: list[Node] | None


def _pair(fields: list[F], kp_struct, json_fields: list[dict]) -> list[Node]:
    """Pair by JSON name: kafka-python's field list is in JSON order, but some of
    its names are patched (deviation 2), so map through the unpatched JSON."""
    by_name = {BaseField.underscore_name(j["name"]): (kpf, j)
               for kpf, j in zip(kp_struct._fields, json_fields, strict=True)}
    nodes = []
    for f in fields:
        kpf, j = by_name.get(f.name, (None, None))
        children = None
        if f.fields is not None:
            children = [Node(c, None, None, None) for c in f.fields] if kpf is None else \
                _pair(f.fields, _kp_struct(kpf), j.get("fields", []))
        nodes.append(Node(f, kpf, j, children))
    return nodes


_TREES: dict[tuple[int, str], tuple[Message, type, list[Node], dict]] = {}


def load(spec: ApiSpec, side: str) -> tuple[Message, type, list[Node], dict]:
    """Our Message, kafka-python's class, the paired field tree and the raw JSON.

    Skips (does not fail) while the API's declaration module is still being
    written -- any other import error fails.
    """
    key = (spec.key, side)
    if key not in _TREES:
        try:
            msg = getattr(spec, side)
        except ModuleNotFoundError as exc:
            if exc.name == f"odradek.protocol.messages.{spec.module}":
                pytest.skip(f"{spec.name}: declaration module {spec.module}.py not written yet")
            raise
        cls = kp_class(spec, side)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            raw = load_json(cls.__name__)  # unpatched
        _TREES[key] = (msg, cls, _pair(msg.fields, cls._struct, raw["fields"]), raw)
    return _TREES[key]


# --- declaration check ---------------------------------------------------------------


def _check_fields(nodes: list[Node], kp_struct, versions: Versions, path: str) -> list[str]:
    problems = []
    for kpf in kp_struct._fields:  # in Kafka's schema within our range, but not declared
        if any(kpf.for_version_q(v) for v in versions) and not any(n.kp is kpf for n in nodes):
            problems.append(f"{path}{kpf.name}: in Kafka's schema, not declared")
    for n in nodes:
        f, kpf, where = n.f, n.kp, f"{path}{n.f.name}"
        if kpf is None:
            if any(v in f.versions for v in versions):
                problems.append(f"{where}: no such field in Kafka's schema (name?)")
            continue
        for v in versions:
            if (v in f.versions) != kpf.for_version_q(v):
                problems.append(f"{where}: presence differs at v{v}")
            elif v in f.versions:
                if (v in f.nullable) != kpf.nullable_for_version_q(v):
                    problems.append(f"{where}: nullability differs at v{v}")
                if (v in f.tagged) != kpf.tagged_field_q(v):
                    problems.append(f"{where}: taggedness differs at v{v}")
                elif v in f.tagged and f.tag != kpf.tag:
                    problems.append(f"{where}: tag {f.tag} != {kpf.tag}")
        ftype = n.json["type"]
        if f.fields is None and ftype != f.type:
            problems.append(f"{where}: type {f.type} != {ftype}")
        if f.fields is not None and (f.is_array != ftype.startswith("[]")):
            problems.append(f"{where}: array-ness differs from {ftype}")
        problems += _check_default(n, where)
        if n.children is not None:
            problems += _check_fields(n.children, _kp_struct(kpf), versions, where + ".")
    return problems


def _check_default(n: Node, where: str) -> list[str]:
    """Against the unpatched JSON default, as kafka-python reads it (deviation 7)."""
    f = n.f
    if f.type == "records" or (f.fields is not None and not f.is_array):
        return []  # deviations 5 and 4: kafka-python's defaults differ from Kafka's
    ours: Any = f.default
    theirs = BaseField.parse_json(n.json).default
    if f.type == "uuid" and theirs is None:
        theirs = ZERO_UUID  # deviation 3
    if ours != theirs or type(ours) is not type(theirs):
        return [f"{where}: default {ours!r} != Kafka's {theirs!r}"]
    return []


# --- value conversion ---------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Containers -> dicts, recursively, for clear pytest diffs."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def project(fields: list[F], version: int, obj: dict) -> dict:
    """What parse must return for ``obj``: its in-version values, defaults elsewhere."""
    out = {}
    for f in fields:
        if version in f.versions and f.name in obj:
            val = obj[f.name]
            if f.fields is not None and val is not None:
                val = ([project(f.fields, version, x) for x in val] if f.is_array
                       else project(f.fields, version, val))
            out[f.name] = _plain(val)
        else:
            out[f.name] = _plain(f.default)
    return out


def to_kp(nodes: list[Node], version: int, obj: dict, data_class: type) -> Any:
    """Our (projected) message -> kafka-python data objects for ``version``."""
    kwargs = {}
    for n in nodes:
        if version not in n.f.versions:
            continue
        assert n.kp is not None, f"{n.f.name}: unknown to kafka-python"
        val = obj[n.f.name]
        if version in n.f.tagged and val == _plain(n.f.default):
            kwargs[n.kp.name] = n.kp.default  # deviation 4
            continue
        if _is_bitfield(n.kp):
            val = _int_to_bits(val)
        elif n.children is not None and val is not None:
            dc = _kp_struct(n.kp).data_class
            val = ([to_kp(n.children, version, x, dc) for x in val] if n.f.is_array
                   else to_kp(n.children, version, val, dc))
        kwargs[n.kp.name] = val
    return data_class(version=version, **kwargs)


def from_kp(nodes: list[Node], version: int, kobj: Any) -> dict:
    """A kafka-python decoded object -> the dict our parse would give."""
    out = {}
    for n in nodes:
        f = n.f
        if version not in f.versions:
            out[f.name] = _plain(f.default)
            continue
        val = getattr(kobj, n.kp.name)
        if _is_bitfield(n.kp):
            val = _bits_to_int(val)
        elif f.type == "uuid" and val is None:
            val = ZERO_UUID  # deviation 3
        elif f.type == "[]uuid" and val is not None:
            val = [ZERO_UUID if u is None else u for u in val]  # deviation 3
        elif n.children is not None:
            if val is None and not f.is_array and version in f.tagged:
                val = _plain(f.default)  # deviation 4: absent tagged struct
            elif val is not None:
                val = ([from_kp(n.children, version, x) for x in val] if f.is_array
                       else from_kp(n.children, version, val))
        elif isinstance(val, (bytearray, memoryview)):
            val = bytes(val)
        out[f.name] = val
    return out


# --- hypothesis strategies from a declaration ----------------------------------------------

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}
# any unicode except lone surrogates, which no UTF-8 string can carry; now and
# then longer than 127 bytes, so compact lengths need a two-byte varint
_TEXT = st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=6),
                  st.text(st.characters(blacklist_categories=("Cs",)), min_size=128, max_size=140))
_BYTES = st.one_of(st.binary(max_size=8), st.binary(min_size=127, max_size=200))


def _prim(type_name: str) -> st.SearchStrategy:
    if type_name in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[type_name]
        return st.integers(lo, hi)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": _TEXT,
        "bytes": _BYTES,
        "records": _BYTES,
        "uuid": st.one_of(st.just(ZERO_UUID), st.uuids()),
    }[type_name]


def message_strategy(fields: list[F], version: int, flexible: bool, depth: int = 0):
    """Dicts of in-version fields only; absent fields are left to the defaults."""
    return st.fixed_dictionaries({
        f.name: _field_strategy(f, version, flexible, depth)
        for f in fields if version in f.versions})


def _field_strategy(f: F, version: int, flexible: bool, depth: int) -> st.SearchStrategy:
    if f.fields is not None:
        item = message_strategy(f.fields, version, flexible, depth + 1)
    else:
        item = _prim(f.elem_type)
    s = st.lists(item, max_size=3 if depth == 0 else 2) if f.is_array else item
    if version in f.nullable:
        s = st.one_of(st.none(), s)
    if flexible and version in f.tagged:
        s = st.one_of(st.just(f.default).map(copy.deepcopy), s)
    return s


_STRATEGIES: dict[tuple[str, int], st.SearchStrategy] = {}


def strategy_for(msg: Message, version: int) -> st.SearchStrategy:
    key = (msg.name, version)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = message_strategy(msg.fields, version, msg.is_flexible(version))
    return _STRATEGIES[key]


# --- tests ---------------------------------------------------------------------------------

CASES = [pytest.param(spec, v, side, id=f"{spec.name}-v{v}-{side}")
         for spec in APIS.values() for v in spec.declared for side in SIDES]
SPEC_SIDES = [pytest.param(spec, side, id=f"{spec.name}-{side}")
              for spec in APIS.values() for side in SIDES]


@pytest.mark.parametrize("spec, side", SPEC_SIDES)
def test_declaration_matches_kafka_schema(spec: ApiSpec, side: str) -> None:
    """Versions, flexibility, and every field's presence, nullability, tag and default."""
    msg, cls, nodes, raw = load(spec, side)
    assert msg.valid == spec.declared, f"{msg.name}.valid {msg.valid} != registry {spec.declared}"
    assert msg.flexible == Versions.parse(raw["flexibleVersions"]), "flexible versions differ"
    problems = _check_fields(nodes, cls._struct, spec.declared, "")
    assert not problems, f"{msg.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("spec, version, side", CASES)
@settings(max_examples=MAX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_codec_agrees_with_kafka_python(spec: ApiSpec, version: int, side: str, data) -> None:
    """Round-trip ours; then bytes and values both ways against kafka-python."""
    if spec.key in BEYOND_KAFKA_PYTHON and (spec.key, side) not in KP:
        msg = getattr(spec, side)
        obj = data.draw(strategy_for(msg, version), label="message")
        _own_round_trip(msg, version, obj, project(msg.fields, version, obj))
        return
    msg, cls, nodes, _ = load(spec, side)
    obj = data.draw(strategy_for(msg, version), label="message")
    expected = project(msg.fields, version, obj)
    ours = _own_round_trip(msg, version, obj, expected)

    # (b) against kafka-python, generic codec entry points (deviation 1)
    theirs = bytes(ApiMessage.encode(to_kp(nodes, version, expected, cls), version=version))
    assert ours == theirs, "encodings differ"
    decoded = ApiMessage.decode.__func__(cls, ours, version=version)
    assert from_kp(nodes, version, decoded) == expected
    assert _plain(msg.parse(theirs, version)) == expected


def _own_round_trip(msg, version: int, obj, expected) -> bytes:
    """(a) our own round trip: generated fast path (where the declaration allows), compiled
    construct, interpreted construct -- all three agree; returns our encoding."""
    ours = msg.build(obj, version)
    assert _plain(msg.parse(ours, version)) == expected
    assert msg.build(msg.parse(ours, version), version) == ours
    compiled = msg.struct(version)
    assert compiled.build(obj) == ours
    assert _plain(compiled.parsefunc(Reader(ours), None)) == expected
    interpreted = msg.struct(version, compiled=False)
    assert interpreted.build(obj) == ours
    assert _plain(interpreted.parse(ours)) == expected
    return ours


def test_bitfield_conversion_is_lossless() -> None:
    """The int32 <-> bit-set normalisation (deviation 2) must not hide a difference."""
    for value in (0, 1, -1, -(2**31), 2**31 - 1, 0x40000001):
        assert _bits_to_int(_int_to_bits(value)) == value
    assert _int_to_bits(-(2**31)) is None


KAFKA_42 = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-spec" / "kafka-4.2" / "messages"


@pytest.mark.shared
@pytest.mark.skipif(not KAFKA_42.is_dir(),
                    reason=f"Kafka 4.2's message specs not found at {KAFKA_42} (optional; kept outside the repository)")
@pytest.mark.parametrize("key", sorted(BEYOND_KAFKA_PYTHON))
@pytest.mark.parametrize("side", SIDES)
def test_declarations_beyond_kafka_python_match_kafka_42(key: int, side: str) -> None:
    """What kafka-python cannot check: the declaration's versions, flexibility and every field's
    name and version range are Kafka 4.2's (our round trip above is the other half)."""
    import json
    import re

    spec = APIS[key]
    msg = getattr(spec, side)
    path = KAFKA_42 / f"{spec.name}{side.capitalize()}.json"
    raw = json.loads("\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")))
    assert msg.valid == Versions.parse(raw["validVersions"])
    assert msg.flexible == Versions.parse(raw["flexibleVersions"])

    def snake(name: str) -> str:
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()

    common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}  # shared struct types

    def walk(ours, theirs, where: str) -> None:
        assert [f.name for f in ours] == [snake(f["name"]) for f in theirs], where
        for mine, kafka in zip(ours, theirs, strict=True):
            assert mine.versions == Versions.parse(kafka["versions"]), f"{where}.{mine.name}"
            nested = kafka.get("fields") or common.get(kafka["type"].removeprefix("[]"), [])
            walk(getattr(mine, "fields", None) or [], nested, f"{where}.{mine.name}")

    walk(msg.fields, raw["fields"], spec.name)
