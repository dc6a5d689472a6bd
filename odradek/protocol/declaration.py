"""What a Kafka message declaration is: its fields, their version ranges, the message's versions.

The data both codecs read -- the construct structs of ``schema.py`` and the
generated readers and writers of ``fastcodec.py`` -- and nothing of either,
so each codec imports this and neither imports the other's user.
"""

from __future__ import annotations

from typing import Any

from construct import Container

from . import primitives as p
from .lean_dataclass import dataclass


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``hi`` None means open-ended, lo > hi empty."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | Versions | None) -> Versions:
        if isinstance(text, Versions):
            return text
        if text is None or text == "none":
            return cls(1, 0)
        text = str(text).strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v and (self.hi is None or v <= self.hi)

    def __iter__(self):
        if self.hi is None:
            raise ValueError("open-ended range")
        return iter(range(self.lo, self.hi + 1))

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        if self.lo > self.hi:
            return "none"
        return f"{self.lo}-{self.hi}"


_MISSING = object()

_PRIM_DEFAULTS = {
    "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
    "float64": 0.0, "bool": False, "uuid": p.ZERO_UUID, "string": "",
    "bytes": b"", "records": None,
}


class F:
    """One field of a message declaration (see module docstring)."""

    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "default", "declared_default",
                 "fields", "flexible")

    def __init__(self, name: str, type: str, versions: str = "0+", *,
                 nullable: str = "none", tag: int | None = None, tagged: str | None = None,
                 default: Any = _MISSING, fields: list[F] | None = None,
                 flexible: str | None = None):
        self.name = name
        self.type = type
        self.versions = Versions.parse(versions)
        self.nullable = Versions.parse(nullable)
        self.tag = tag
        self.tagged = Versions.parse(tagged if tagged is not None else
                                     (versions if tag is not None else "none"))
        self.fields = fields
        # flexible=None follows the message; "none" keeps classic encoding
        # (RequestHeader.client_id is the one field that needs it)
        self.flexible = None if flexible is None else Versions.parse(flexible)
        if fields is None and self.elem_type not in _PRIM_DEFAULTS:
            raise ValueError(f"{name}: unknown type {type!r}")
        self.default = self._initial_default() if default is _MISSING else default
        # the declaration names its default (Kafka's JSON ``default``): a value senders often leave
        self.declared_default = default is not _MISSING

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def _initial_default(self) -> Any:
        if self.is_array:
            return []
        if self.fields is not None:
            return Container({f.name: f.default for f in self.fields})
        return _PRIM_DEFAULTS[self.type]


class Declaration:
    """A request, response, header or record declared once for all versions: what a codec reads."""

    def __init__(self, name: str, fields: list[F], valid: str, flexible: str = "none"):
        self.name = name
        self.fields = fields
        self.valid = Versions.parse(valid)
        self.flexible = Versions.parse(flexible)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {self.valid})"

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible
