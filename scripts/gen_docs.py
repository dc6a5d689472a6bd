#!/usr/bin/env python3
"""Regenerate the generated parts of the docs (the README compatibility table)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.compat import markdown  # noqa: E402

BEGIN, END = "<!-- compat:begin -->", "<!-- compat:end -->"


def render(readme: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{BEGIN}\n{markdown()}\n{END}", readme)


def main() -> int:
    path = ROOT / "README.md"
    text = path.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in sys.argv:
        return 0 if new == text else 1
    path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
