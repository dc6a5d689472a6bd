#!/usr/bin/env python3
"""Regenerate the generated parts of the docs (the README compatibility table)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.doc_tables import configuration_markdown, markdown  # noqa: E402

BEGIN, END = "<!-- compat:begin -->", "<!-- compat:end -->"


def render(readme: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{BEGIN}\n{markdown()}\n{END}", readme)


CONFIGURATION = ROOT / "docs" / "CONFIGURATION.md"


def outputs() -> dict[Path, str]:
    """Every generated file and the text it should hold."""
    readme = ROOT / "README.md"
    return {readme: render(readme.read_text(encoding="utf-8")),
            CONFIGURATION: configuration_markdown()}


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
