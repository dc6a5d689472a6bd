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
    for release in ("4.1", "4.2", "4.3"):
        assert value_versions(release) == (4, None)
    assert api_limits("4.2")[0] == (3, 13) and api_limits("4.2")[1] == (4, 18)  # KIP-896 floors
    assert api_limits("4.3")[19] == (2, 7) and api_limits("4.3")[22] == (0, 5)  # InitProducerId v6 unstable


def test_a_4x_profile_is_cut_to_what_this_broker_serves():
    """Keys a 4.2/4.3 broker serves that are not implemented here (the streams group protocol's,
    the share coordinator's broker-to-broker state RPCs) stay unserved (UpdateFeatures, the consumer
    and share group protocols are served now); versions above ours are cut to ours; KIP-896's
    minimums apply; and the default profile keeps the old versions old clients send."""
    from odradek.broker.doc_tables import _served

    default = _served({})
    assert default[0][0] == 0 and default[1][0] == 0 and default[2][0] == 0  # old tools' versions
    for release in ("4.2", "4.3"):
        served = _served({"odradek.emulate.kafka.version": release})
        assert not {83, 84, 85, 86, 87, 88, 89} & set(served)
        assert {57, 68, 69, 76, 77, 78, 79, 90, 91, 92} <= set(served)
        for key, (lo, hi) in served.items():
            rlo, rhi = RELEASES[release]["apis"][key][1:3]
            assert (lo, hi) == (max(rlo, default[key][0]), min(rhi, default[key][1])), key
        assert served[1][0] == 4 and served[19][0] == 2 and served[32][0] == 1


def test_an_unknown_release_stops_start_up_naming_the_setting():
    with pytest.raises(Exception, match="odradek.emulate.kafka.version"):
        Config.load(None, overrides={"odradek.emulate.kafka.version": "1.0"}, environ={})
    assert Config.load(None, overrides={"odradek.emulate.kafka.version": "2.8"},
                       environ={})["odradek.emulate.kafka.version"] == "2.8"
