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


def _run_command(tmp_path, **env: str) -> list[str]:
    """The engine command ``container.sh run`` would execute, from a stand-in engine that prints it."""
    fake = tmp_path / "fake-engine"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    out = subprocess.run(["bash", str(SCRIPT), "run", "--override", "num.partitions=3"], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ODRADEK_ENGINE": str(fake), **env})
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def _env_of(command: list[str]) -> dict[str, str]:
    return dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "-e")


def test_run_advertises_the_published_port(tmp_path):
    """Clients bootstrapped on ODRADEK_PORT are told that port in Metadata, not 9092."""
    command = _run_command(tmp_path, ODRADEK_PORT="19093")
    assert "127.0.0.1:19093:9092" in command
    assert _env_of(command)["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://localhost:19093"
    assert command[-2:] == ["--override", "num.partitions=3"]  # the user's arguments reach serve
    default = _run_command(tmp_path)
    assert "127.0.0.1:9092:9092" in default
    assert _env_of(default)["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://localhost:9092"


def test_run_publishes_the_control_endpoint_when_asked(tmp_path):
    """ODRADEK_CONTROL_PORT: the endpoint binds every interface inside the container (loopback
    there is unreachable through -p) and is published on the host's loopback only."""
    command = _run_command(tmp_path, ODRADEK_CONTROL_PORT="19644")
    assert "127.0.0.1:19644:9644" in command
    env = _env_of(command)
    assert env["KAFKA_ODRADEK_CONTROL_LISTENER"] == "0.0.0.0:9644"
    assert int(env["KAFKA_ODRADEK_CONTROL_CAPTURE_REQUESTS"]) > 0
    assert "KAFKA_ODRADEK_CONTROL_LISTENER" not in _env_of(_run_command(tmp_path))


def test_run_publishes_the_schema_registry(tmp_path):
    """The image serves the schema registry on 8081: published on the host's loopback, at
    ODRADEK_REGISTRY_PORT when given."""
    assert "127.0.0.1:8081:8081" in _run_command(tmp_path)
    assert "127.0.0.1:18081:8081" in _run_command(tmp_path, ODRADEK_REGISTRY_PORT="18081")


def test_run_publishes_the_console(tmp_path):
    """The image serves the web console on 8080: published on the host's loopback, at
    ODRADEK_CONSOLE_PORT when given."""
    assert "127.0.0.1:8080:8080" in _run_command(tmp_path)
    assert "127.0.0.1:18080:8080" in _run_command(tmp_path, ODRADEK_CONSOLE_PORT="18080")
