"""scripts/container.sh where no engine can be had, and the container tests' skip rule."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "container.sh"
TOOLS = ("bash", "sh", "id", "flock", "timeout", "grep", "awk", "sed", "head", "cat", "mkdir", "touch")


def test_no_engine_and_no_way_to_install_one_exits_3_saying_what_to_do(tmp_path):
    """The status the container tests turn into a skip (or, under CI, a failure)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:  # a machine without podman, docker or apt-get
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} not installed")
        (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    out = subprocess.run([str(bin_dir / "bash"), str(SCRIPT), "engine"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "podman" in out.stderr and "docker" in out.stderr


def test_missing_engine_skips_with_how_to_run_but_fails_under_ci(monkeypatch):
    from tests.container import conftest, engine

    def missing():
        raise engine.EngineMissing("no container engine")

    monkeypatch.setattr(conftest, "find_engine", missing)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        conftest.engine_exe.__wrapped__()
    assert "pytest -m container" in str(skipped.value)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        conftest.engine_exe.__wrapped__()
