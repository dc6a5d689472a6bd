"""The emulated-release table: generated output, committed as is, and its setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.broker.config import Config
from odradek.broker.emulation import api_limits, value_versions
from odradek.protocol.kafka_releases import RELEASES

ROOT = Path(__file__).resolve().parents[2]
MIRRORS = Path(os.environ.get("ODRADEK_KAFKA_MIRRORS", "/work/.mirror"))


def test_committed_table_is_the_scripts_output():
    """Regenerating from Kafka's repositories gives the committed module byte for byte."""
    args: list[str] = []
    for release, table in RELEASES.items():
        git_dir = MIRRORS / table["repository"].replace("/", "+") / "repo"
        if not (git_dir / "objects").is_dir():
            pytest.skip(f"no bare clone of {table['repository']} at {git_dir} (ODRADEK_KAFKA_MIRRORS)")
        args += ["--git", str(git_dir), f"{release}={table['ref']}"]
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_kafka_release_versions.py"),
                          *args], check=True, capture_output=True, text=True).stdout
    assert out == (ROOT / "odradek" / "protocol" / "kafka_releases.py").read_text()


def test_limits_and_value_versions_per_release():
    assert api_limits("") is None
    assert api_limits("2.0")[0] == (0, 6) and 60 not in api_limits("2.0")
    assert value_versions("2.0") == (1, 1)
    for release in ("2.8", "3.0", "3.5", "3.9", "4.0"):
        assert value_versions(release) == (None, None)
    assert value_versions("4.1") == (4, None)


def test_an_unknown_release_stops_start_up_naming_the_setting():
    with pytest.raises(Exception, match="odradek.emulate.kafka.version"):
        Config.load(None, overrides={"odradek.emulate.kafka.version": "1.0"}, environ={})
    assert Config.load(None, overrides={"odradek.emulate.kafka.version": "2.8"},
                       environ={})["odradek.emulate.kafka.version"] == "2.8"
