"""The versions raised to Kafka 4.2's maxima are declared as Kafka 4.2 defines them: the top
version, and each field's name and version range, read from Kafka's own JSON message specs
(kept outside the repository; the codec cross-check against kafka-python's bundled copy of the
same JSON is the coverage in a bare clone)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from odradek.protocol.registry import APIS
from odradek.protocol.schema import Versions

SPECS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-spec" / "kafka-4.2" / "messages"
RAISED = {0: 13, 1: 18, 3: 13, 8: 10, 9: 10, 2: 11, 15: 6, 60: 2, 66: 2,  # api key -> 4.2's top version
          45: 1, 46: 0, 74: 1, 34: 2,  # and the APIs added for it
          76: 1, 77: 1}  # ShareGroupHeartbeat, ShareGroupDescribe (KIP-932)

pytestmark = [pytest.mark.shared,
              pytest.mark.skipif(not SPECS.is_dir(), reason=f"Kafka 4.2's message specs not found at {SPECS} "
                                                            "(optional; kept outside the repository)")]


def _spec(name: str) -> dict:
    text = (SPECS / f"{name}.json").read_text(encoding="utf-8")
    return json.loads("\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//")))


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _fields(fields: list, top: int, prefix: str = "", common: dict | None = None) -> dict[str, tuple[int, int]]:
    """path -> (first, last) version of every field Kafka 4.2 defines, capped at ``top`` (a field
    typed by one of the spec's ``commonStructs`` has that struct's fields)."""
    out = {}
    for f in fields:
        v = Versions.parse(f["versions"])
        if v.lo > top:
            continue
        path = prefix + _snake(f["name"])
        out[path] = (v.lo, top if v.hi is None else min(v.hi, top))
        inner = f.get("fields") or (common or {}).get(f["type"].removeprefix("[]"), [])
        out |= _fields(inner, top, path + ".", common)
    return out


def _ours(fields, top: int, prefix: str = "") -> dict[str, tuple[int, int]]:
    out = {}
    for f in fields:
        present = [v for v in range(top + 1) if v in f.versions]
        if not present:
            continue
        path = prefix + f.name
        out[path] = (present[0], present[-1])
        out |= _ours(f.fields or [], top, path + ".")
    return out


@pytest.mark.parametrize("key", sorted(RAISED))
@pytest.mark.parametrize("side", ["request", "response"])
def test_declared_as_kafka_42_from_its_first_version_to_its_top(key, side):
    spec, top = APIS[key], RAISED[key]
    assert spec.declared.hi == top
    kafka = _spec(f"{spec.name}{side.title()}")
    assert Versions.parse(kafka["validVersions"]).hi == top
    message = getattr(spec, side)
    kafka_lo = Versions.parse(kafka["validVersions"]).lo
    ours = {p: (max(lo, kafka_lo), hi) for p, (lo, hi) in _ours(message.fields, top).items() if hi >= kafka_lo}
    common = {s["name"]: s["fields"] for s in kafka.get("commonStructs", [])}
    theirs = {p: (max(lo, kafka_lo), hi) for p, (lo, hi) in _fields(kafka["fields"], top, common=common).items()
              if hi >= kafka_lo}
    renamed = {"cluster_authorized_operations", "authorized_operations"}  # same bytes, our names
    assert {p: r for p, r in ours.items() if p.split(".")[-1] not in renamed} == \
        {p: r for p, r in theirs.items() if p.split(".")[-1] not in renamed}
