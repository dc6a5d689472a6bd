"""Keys, values and header values as the console shows them: text, JSON (pretty) or hex.

Only the shaping happens here; escaping is Jinja2's autoescape in the templates, so a key that
holds ``<script>`` is shown as text whatever the format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

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


def human_bytes(n: int | None) -> str:
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)
