"""Driving the container engine (podman, or docker where its daemon answers) from the tests.

The image is built by ``scripts/container.sh``, the same script a user runs: it installs
podman where none is present (root, Debian), makes a base image from the machine's Debian
mirror when ``python:3.11-slim`` cannot be pulled, and builds with the health check kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from odradek.testing.process import free_ports

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "container.sh"
NO_ENGINE = 3  # container.sh: no engine and none can be installed here
HOW_TO_RUN = ("the container tests need podman or docker: run them as root on Debian (the build "
              "script installs podman), or install an engine, then `python -m pytest -m container`")


class EngineMissing(RuntimeError):
    pass


def find_engine() -> str:
    out = subprocess.run(["bash", str(SCRIPT), "engine"], capture_output=True, text=True, timeout=900)
    if out.returncode == NO_ENGINE:
        raise EngineMissing(out.stderr.strip())
    if out.returncode != 0:
        raise RuntimeError(f"container.sh engine failed: {out.stderr}")
    return out.stdout.strip().splitlines()[-1]


def build_image(tag: str) -> None:
    out = subprocess.run(["bash", str(SCRIPT), "build", tag], capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError(f"image build failed:\n{out.stderr[-4000:]}")


SESSION_LABEL = f"odradek-test-session={uuid.uuid4().hex[:12]}"  # what this test session started
PID_KEY = "odradek-test-pid"  # the pytest process that started it: a dead one's are leftovers


def free_port() -> int:
    """A free host port for publishing a container's port, below the kernel's ephemeral range and
    in a band of its own (``free_ports(band=1)``).

    Why not port 0: the engine forwards a published port with NAT rules, not a bound socket, so
    once the picked port is released an in-process broker binding port 0 can get the very same
    number -- and while that container lives (or if it leaks) every connection to the broker is
    sent into the container instead.  Ports outside the ephemeral range are never handed out by
    ``bind(0)``, and the listeners other tests pick with ``free_port`` come from another band, so
    a container can never shadow another test's broker.
    """
    return free_ports(1, band=1)


def unique(prefix: str) -> str:
    return f"odradek-test-{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class Engine:
    exe: str
    image: str
    _names: list[str] = field(default_factory=list)
    _volumes: list[str] = field(default_factory=list)

    def __call__(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        out = subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise AssertionError(f"{self.exe} {' '.join(args)}: exit {out.returncode}\n{out.stderr}")
        return out

    def inspect_image(self) -> dict:
        return json.loads(self("image", "inspect", self.image).stdout)[0]

    def volume(self) -> str:
        name = unique("vol")
        self("volume", "create", name)
        self._volumes.append(name)
        return name

    def run(self, *args: str, mount: str | None = None, port: int | None = None, inner_port: int = 9092,
            env: dict[str, str] | None = None, advertise: bool = True,
            binds: dict[str, str] | None = None, publish: dict[int, int] | None = None) -> Container:
        """Start a detached container publishing a free port on 127.0.0.1 only (``binds``: host
        directory -> container path, read-only; ``publish``: more host port -> container port)."""
        port = port or free_port()
        name = unique("c")
        env = dict(env or {})
        if advertise:
            env.setdefault("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
        cmd = ["run", "-d", "--name", name, "--label", SESSION_LABEL,
               "--label", f"{PID_KEY}={os.getpid()}", "-p", f"127.0.0.1:{port}:{inner_port}"]
        for host_port, inner in (publish or {}).items():
            cmd += ["-p", f"127.0.0.1:{host_port}:{inner}"]
        if mount:
            cmd += ["-v", f"{mount}:/var/lib/odradek"]
        for host_dir, path in (binds or {}).items():
            cmd += ["-v", f"{host_dir}:{path}:ro"]
        for key, value in env.items():
            cmd += ["-e", f"{key}={value}"]
        self._names.append(name)  # before the run: a run that fails or times out may still leave it
        self(*cmd, self.image, *args)
        return Container(self, name, port)

    def cleanup(self) -> None:
        """Remove what the test started; a container still there afterwards fails the test's
        teardown (a leaked container keeps its published port forwarded)."""
        names, self._names = self._names, []
        for name in names:
            self._remove(name)
        for vol in self._volumes:
            self("volume", "rm", "-f", vol, check=False)
        self._volumes.clear()
        left = [name for name in names if self._exists(name)]
        assert not left, f"containers left after rm: {left}"

    def _remove(self, name: str) -> None:
        for _ in range(3):  # -v: its anonymous volume too; a busy engine may time out once
            try:
                self("rm", "-f", "-v", "-t", "0", name, check=False, timeout=180)
            except subprocess.TimeoutExpired:
                continue
            if not self._exists(name):
                return

    def _exists(self, name: str) -> bool:
        return self("container", "inspect", name, check=False).returncode == 0

    def sweep_session(self) -> None:
        """At the session's end: remove every container this session labelled, whatever a
        test's own cleanup missed (an interrupted test, a killed worker's leftovers aside)."""
        out = self("ps", "-a", "-q", "--filter", f"label={SESSION_LABEL}", check=False)
        for cid in out.stdout.split():
            self._remove(cid)

    def sweep_orphans(self) -> None:
        """At the session's start: remove test containers whose pytest process is gone (a run
        killed mid-test never reached its cleanup, and its published ports stay forwarded)."""
        out = self("ps", "-a", "-q", "--filter", f"label={PID_KEY}", check=False)
        for cid in out.stdout.split():
            owner = self("container", "inspect", "--format", f'{{{{index .Config.Labels "{PID_KEY}"}}}}',
                         cid, check=False).stdout.strip()
            if owner.isdigit() and not _alive(int(owner)):
                self._remove(cid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Container:
    engine: Engine
    name: str
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def inspect(self) -> dict:
        return json.loads(self.engine("inspect", self.name).stdout)[0]

    def health(self) -> subprocess.CompletedProcess:
        """Run the image's health check now (no systemd timers run it on podman here)."""
        if self.engine.exe == "podman":
            return self.engine("healthcheck", "run", self.name, check=False, timeout=60)
        return self.engine("exec", self.name, "odradek", "health", check=False, timeout=60)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            result = self.health()
            if result.returncode == 0:
                return
            if not self.running():
                raise AssertionError(f"{self.name} exited: {self.logs()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} never healthy: {result.stdout}{result.stderr}")
            time.sleep(0.2)

    def running(self) -> bool:
        return self.inspect()["State"]["Running"]

    def exit_code(self) -> int:
        return self.inspect()["State"]["ExitCode"]

    def wait_exit(self, timeout: float = 60.0) -> int:
        out = self.engine("wait", self.name, timeout=timeout)
        return int(out.stdout.strip().splitlines()[-1])

    def logs(self) -> str:
        out = self.engine("logs", self.name, check=False)
        return out.stdout + out.stderr

    def host_pid(self) -> int:
        return self.inspect()["State"]["Pid"]

    def restart(self) -> None:
        """SIGTERM, wait, start again with the same volume and port."""
        self.engine("stop", "-t", "30", self.name)
        assert self.exit_code() == 0, self.logs()[-2000:]
        self.engine("start", self.name)
        self.wait_healthy()

    def kill_and_start(self) -> None:
        self.engine("kill", "-s", "KILL", self.name)
        self.wait_exit()
        self.engine("start", self.name)
        self.wait_healthy()


def running_under_ci() -> bool:
    return bool(os.environ.get("CI"))
