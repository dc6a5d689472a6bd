"""Requests for every served API and version, built from the declarations, for hostile tests.

``sample`` fills every field a version carries (arrays with one element,
nullable fields sometimes null), so a mutation of its bytes exercises each
field's decoder; ``seed`` varies the choices.
"""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

from odradek.protocol.registry import APIS
from odradek.protocol.schema import F

_INTS = {"int8": (-128, 127), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
         "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1)}
_NICE_INTS = (-1, 0, 1, 2, 100, 5000)


def _prim(kind: str, rng: random.Random, name: str) -> Any:
    if kind in _INTS:
        lo, hi = _INTS[kind]
        return max(lo, min(hi, rng.choice(_NICE_INTS))) if rng.random() < 0.8 else rng.randint(lo, hi)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return 1.5
    if kind == "uuid":
        return uuid.UUID(int=0) if rng.random() < 0.5 else uuid.UUID(int=rng.getrandbits(128))
    if kind == "string":
        return rng.choice(["t", "g", "fuzz-topic", "canary", "", "x" * rng.randint(1, 300)])
    if kind == "bytes":
        return rng.randbytes(rng.randint(0, 24))
    if kind == "records":
        return None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 80))
    raise ValueError(kind)


def _value(f: F, version: int, rng: random.Random) -> Any:
    if version in f.nullable and rng.random() < 0.25:
        return None
    if f.is_array:
        n = rng.choice([0, 1, 1, 2])
        if f.fields is not None:
            return [sample_fields(f.fields, version, rng) for _ in range(n)]
        return [_prim(f.elem_type, rng, f.name) for _ in range(n)]
    if f.fields is not None:
        return sample_fields(f.fields, version, rng)
    return _prim(f.type, rng, f.name)


def sample_fields(fields: list[F], version: int, rng: random.Random) -> dict:
    return {f.name: _value(f, version, rng) for f in fields if version in f.versions}


def sample(api_key: int, version: int, seed: int = 0) -> dict:
    """A request body for (api_key, version) that encodes."""
    rng = random.Random(f"{api_key}/{version}/{seed}")
    return sample_fields(APIS[api_key].request.fields, version, rng)


def present_error_codes(fields: list[F], obj: Any, version: int) -> list[int]:
    """Every ``error_code`` a decoded message carries at ``version`` (absent fields left out)."""
    out: list[int] = []
    for f in fields:
        if version not in f.versions:
            continue
        value = obj[f.name]
        if f.name == "error_code":
            out.append(value)
        elif f.fields is not None and value is not None:
            for item in value if f.is_array else [value]:
                out += present_error_codes(f.fields, item, version)
    return out


_ERROR_LINE = re.compile(r"level='(error|critical)'|\"level\": \"(error|critical)\"|\[(error|critical)\s*\]")


def error_lines(text: str) -> list[str]:
    """The error-level lines of the broker's log (text or JSON): tracebacks, failed handlers."""
    return [line for line in text.splitlines() if _ERROR_LINE.search(line)]
