#!/usr/bin/env python3
"""Regenerate the generated docs pages: the compatibility table in docs/compatibility.md, the
configuration reference, the test-control operations and the captured-body field names.

tests/unit/test_docs.py fails while any of them is stale; run this script, then commit."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.control.reference import captured_fields_markdown, operations_markdown  # noqa: E402
from odradek.broker.doc_tables import configuration_markdown, markdown, served  # noqa: E402

BEGIN, END = "<!-- compat:begin -->", "<!-- compat:end -->"


def render(page: str) -> str:
    """The page with the text between its compat markers generated anew (the prose around is kept)."""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{BEGIN}\n{markdown()}\n{END}", page)


DOCS = ROOT / "docs"


def outputs() -> dict[Path, str]:
    """Every generated file and the text it should hold."""
    compatibility = DOCS / "compatibility.md"
    return {compatibility: render(compatibility.read_text(encoding="utf-8")),
            DOCS / "CONFIGURATION.md": configuration_markdown(),
            DOCS / "control-operations.md": operations_markdown(),
            DOCS / "captured-fields.md": captured_fields_markdown(served())}


def main() -> int:
    stale = [p for p, text in outputs().items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    if "--check" in sys.argv:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)}")
        return 1 if stale else 0
    for p, text in outputs().items():
        p.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
