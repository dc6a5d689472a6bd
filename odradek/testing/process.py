"""``odradek serve`` as a child process, for the benchmarks and crash drivers under ``scripts/``.

Tests use the in-process brokers (:mod:`odradek.testing.broker`); a
benchmark needs the broker's CPU time, and a crash driver its signals, to be
its own process's.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from ..broker.health import check

SERVE = (sys.executable, "-m", "odradek.broker.cli", "serve")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def serve_args(settings: Sequence[str]) -> list[str]:
    """``--override`` flags for ``settings`` (``name=value`` strings)."""
    return [x for s in settings for x in ("--override", s)]


def wait_until_serving(proc: subprocess.Popen, port: int, timeout: float = 30.0,
                       failure: str = "broker did not start") -> None:
    """Poll ApiVersions (what ``odradek health`` asks) until it answers; raise if the process dies first."""
    deadline = time.monotonic() + timeout
    while not check(f"127.0.0.1:{port}", timeout=1.0)[0]:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.05)


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM (a clean shutdown), SIGKILL if it is not done in ``timeout`` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
