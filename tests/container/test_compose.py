"""The compose example of docs/running.md, run as written (image name and host port aside) with
podman-compose or docker compose where one is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import pytest

from tests.container.engine import ROOT, free_port

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]


def readme_compose() -> str:
    text = (ROOT / "docs" / "running.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    found = [b for b in blocks if "services:" in b and "odradek health --bootstrap kafka:9092" in b]
    assert found, "docs/running.md has no compose example"
    return found[0]


def compose_command(engine: str) -> list[str] | None:
    if engine == "podman" and shutil.which("podman-compose"):
        return ["podman-compose"]
    if engine == "docker" and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


def test_readme_compose_example_runs(engine, tmp_path):
    command = compose_command(engine.exe)
    if command is None:
        pytest.skip(f"no compose tool for {engine.exe} (apt-get install podman-compose "
                    "golang-github-containernetworking-plugin-dnsname)")
    text = readme_compose().replace("image: odradek", f"image: {engine.image}")
    text = text.replace('"127.0.0.1:9092:9092"', f'"127.0.0.1:{free_port()}:9092"')
    (tmp_path / "docker-compose.yml").write_text(text)
    project = f"odradektest{uuid.uuid4().hex[:8]}"
    base = [*command, "-p", project, "-f", str(tmp_path / "docker-compose.yml")]
    try:
        subprocess.run([*base, "up", "-d"], check=True, capture_output=True, timeout=120)
        app = f"{project}_app_1" if command == ["podman-compose"] else f"{project}-app-1"
        deadline = time.monotonic() + 60
        while engine("inspect", "--format", "{{.State.Running}}", app).stdout.strip() == "true":
            assert time.monotonic() < deadline, "app container still running"
            time.sleep(0.2)
        logs = engine("logs", app, check=False)
        assert engine("inspect", "--format", "{{.State.ExitCode}}", app).stdout.strip() == "0", logs.stdout + logs.stderr
        assert "healthy: kafka:9092" in logs.stdout
    finally:
        subprocess.run([*base, "down", "-v"], capture_output=True, timeout=120)
        if command == ["podman-compose"]:  # 1.0.3 leaves its network behind
            engine("network", "rm", "-f", f"{project}_default", check=False)
