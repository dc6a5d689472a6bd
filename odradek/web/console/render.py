"""Keys, values and header values as the console shows them: text, JSON (pretty) or hex.

Only the shaping happens here; escaping is Jinja2's autoescape in the templates, so a key that
holds ``<script>`` is shown as text whatever the format.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json", "hex")
MAX_SHOWN = 4096  # bytes of one field shown on a page (the rest is counted, not sent)


@dataclass(frozen=True)
class Shown:
    text: str | None  # None: a null key/value
    size: int
    note: str = ""  # how it was shown when not as asked (binary as hex, bad JSON as text)


def show(data: bytes | None, fmt: str) -> Shown:
    if data is None:
        return Shown(None, 0)
    size = len(data)
    head = bytes(data[:MAX_SHOWN])
    cut = " (first 4096 bytes)" if size > MAX_SHOWN else ""
    if fmt == "hex":
        return Shown(head.hex(" "), size, cut.strip())
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return Shown(head.hex(" "), size, ("binary: hex" + cut).strip())
    if fmt == "json":
        try:
            return Shown(json.dumps(json.loads(text), indent=2, ensure_ascii=False), size)
        except ValueError:
            return Shown(text, size, ("not JSON: text" + cut).strip())
    return Shown(text, size, cut.strip())


def schema_id(data: bytes | None) -> int | None:
    """The schema id of Confluent's wire format (magic byte 0, a 4-byte id, the payload), if it is one."""
    if data is None or len(data) < 5 or data[0] != 0:
        return None
    return int.from_bytes(data[1:5], "big")


@dataclass(frozen=True)
class Registered:
    """What the schema registry says of an id: where it is registered and its parsed model."""

    label: str  # "orders-value v2 (AVRO)"
    schema_type: str
    model: Any  # the registry's parsed model (AVRO: ``registry.avro.AvroModel``); None: not parsed


def show_registered(data: bytes, fmt: str, registered: Registered) -> Shown:
    """A value in Confluent's wire format decoded with its registered schema (Avro and JSON Schema;
    Protobuf payloads are shown as asked, with the id)."""
    note = f"schema id {schema_id(data)}: {registered.label}"
    payload = bytes(data[5:])
    try:
        if registered.schema_type == "AVRO" and registered.model is not None:
            from fastavro import schemaless_reader  # noqa: PLC0415 - the registry's own dependency

            value = schemaless_reader(io.BytesIO(payload), registered.model.schema, None)
            return Shown(json.dumps(value, indent=2, ensure_ascii=False, default=str), len(data), note)
        if registered.schema_type == "JSON":
            return Shown(json.dumps(json.loads(payload), indent=2, ensure_ascii=False), len(data), note)
    except Exception as exc:  # a payload that does not match its schema: shown raw, with why
        shown = show(data, "hex")
        return Shown(shown.text, shown.size, f"{note}; not decoded: {type(exc).__name__}")
    shown = show(payload, fmt)
    return Shown(shown.text, len(data), f"{note}; payload {shown.note}" if shown.note else note)


def iso_ms(ms: int | None) -> str:
    """A Kafka timestamp (ms since the epoch) as UTC with milliseconds; -1 (none) as empty."""
    if ms is None or ms < 0:
        return ""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def human_bytes(n: int | None) -> str:
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)
