"""The generated reference pages of test control: the operations and the captured-body fields.

Both come from the code a test talks to, so the docs cannot drift from it:
the operations are :class:`BrokerControl`'s public methods (their signatures
and docstrings), the fields are the request declarations of every served API
(``odradek/protocol/messages``), whose snake_case names are Kafka's JSON field
names (``CommittedOffset`` -> ``committed_offset``).  ``scripts/gen_docs.py``
writes them to ``docs/control-operations.md`` and ``docs/captured-fields.md``;
``tests/unit/test_docs.py`` fails when a page is stale.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

from ...protocol.registry import APIS
from ...protocol.schema import F

GENERATED = "Generated from `{source}` by `python scripts/gen_docs.py`; do not edit."


def operations_markdown() -> str:
    """docs/control-operations.md: every operation, its arguments and what it does."""
    from . import BrokerControl

    lines = [
        "# Test-control operations",
        "",
        GENERATED.format(source="odradek/broker/control/__init__.py"),
        "",
        "Each operation is reachable three ways, with the same arguments: in-process as",
        "`broker.control(\"NAME\", **arguments)` on the fixture's handle, `Broker` or `ThreadedBroker`",
        "(most also have a typed method, see [Test control](test-control.md)); from a shell as",
        "`odradek control [--endpoint HOST:PORT] NAME key=value …`; and over HTTP as",
        "`POST /v1/NAME` with a JSON object of the arguments (`GET /v1/` lists the names).",
        "A bad argument is a `ValueError` in-process and a 400 answer naming it over HTTP.",
        "",
        "| operation | arguments |",
        "|---|---|",
    ]
    names = BrokerControl.operations()
    for name in names:
        lines.append(f"| [`{name}`](#{name}) | {_arguments(getattr(BrokerControl, name))} |")
    for name in names:
        fn = getattr(BrokerControl, name)
        lines += ["", f"## {name}", "", f"`{name}({_arguments(fn, plain=True)})`"
                  + (" — a coroutine in-process on `Broker` (await it)" if inspect.iscoroutinefunction(fn) else ""),
                  "", inspect.cleandoc(fn.__doc__ or "").replace("``", "`")]
    lines.append("")
    return "\n".join(lines)


def _arguments(fn, plain: bool = False) -> str:
    """``api, *, error=None, …`` from the signature; annotations left out (the docstring names them)."""
    parts = []
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        text = p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not any(x.startswith("*") for x in parts):
            parts.append("*")
        parts.append(text)
    joined = ", ".join(parts)
    return joined if plain else (f"`{joined}`" if joined else "(none)")


def captured_fields_markdown(served: dict[int, tuple[int, int]]) -> str:
    """docs/captured-fields.md: the attribute path of every request field, per API ``served``
    ({api key: (min, max)}, ``doc_tables.served``)."""
    lines = [
        "# Captured request bodies: field names",
        "",
        GENERATED.format(source="odradek/protocol/messages/"),
        "",
        "`captured()` returns each request decoded: `req.body` has one attribute per field of the",
        "request version the client sent, named as Kafka's JSON message definitions name it, in",
        "snake_case (`CommittedOffset` → `committed_offset`); arrays are lists of such objects.",
        "A field outside the version sent holds its default. For example",
        "`req.body.topics[0].partitions[0].committed_offset` for OffsetCommit. Records",
        "(`records` fields) are the raw record-batch bytes. Over the control endpoint the same names",
        "are JSON keys (bytes as base64).",
        "",
        "APIs: " + ", ".join(f"[{APIS[k].name}](#{APIS[k].name.lower()})" for k in sorted(served)) + ".",
    ]
    for key in sorted(served):
        spec = APIS[key]
        lo, hi = served[key]
        lines += ["", f"## {spec.name}", "",
                  f"API key {key}, versions {lo}–{hi} served.", "",
                  "| attribute | Kafka's name | type | versions |", "|---|---|---|---|"]
        for path, kafka, f in _fields(spec.request.fields, "", ""):
            lines.append(f"| `{path}` | `{kafka}` | {_type(f)} | {_versions(f.versions)} |")
    lines.append("")
    return "\n".join(lines)


def _fields(fields: list[F], prefix: str, kafka_prefix: str) -> Iterator[tuple[str, str, F]]:
    for f in fields:
        path, kafka = prefix + f.name, kafka_prefix + _camel(f.name)
        yield path, kafka, f
        if f.fields:
            sub = "[]." if f.is_array else "."
            yield from _fields(f.fields, path + sub, kafka + sub)


def _camel(name: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in name.split("_"))


def _type(f: F) -> str:
    if f.fields is not None:
        return "array of objects" if f.is_array else "object"
    base = f"array of {f.elem_type}" if f.is_array else f.elem_type
    n = f.nullable
    return base + (f" (nullable {_versions(n)})" if n.hi is None or n.lo <= n.hi else "")


def _versions(v) -> str:
    return f"{v.lo}+" if v.hi is None else str(v.lo) if v.lo == v.hi else f"{v.lo}–{v.hi}"
