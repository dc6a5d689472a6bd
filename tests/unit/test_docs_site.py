"""The documentation site (mkdocs.yml, docs/) builds strictly: a broken link, a missing anchor
or a page left out of the nav fails the suite, not a reader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner, not a warning of ours
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                          "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "site" / "test-control" / "index.html").exists()


def test_every_page_is_in_the_nav():
    """mkdocs only warns (strict: fails) for pages left out; this names them plainly."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if f": {p}" not in nav] == []
