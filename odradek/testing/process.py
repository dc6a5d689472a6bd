"""``odradek serve`` as a child process, for the benchmarks and crash drivers under ``scripts/``.

Tests use the in-process brokers (:mod:`odradek.testing.broker`); a
benchmark needs the broker's CPU time, a crash driver its signals, and a
memory test its RSS, to be its own process's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

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


@contextlib.contextmanager
def serving(settings: Sequence[str] = (), src: str | os.PathLike[str] | None = None,
            data_dir: str | os.PathLike[str] | None = None) -> Iterator[tuple[subprocess.Popen, int]]:
    """(process, port) of ``odradek serve`` from source tree ``src`` (default: this one) on a free
    port and a data directory of its own (a temporary one unless given), stopped on exit."""
    port = free_port()
    with contextlib.ExitStack() as stack:
        data = data_dir or stack.enter_context(tempfile.TemporaryDirectory())
        env = dict(os.environ, PYTHONPATH=str(src or Path(__file__).resolve().parents[2]))
        cmd = [*SERVE, *serve_args([f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data}",
                                    "log.level=warning", *settings])]
        proc = subprocess.Popen(cmd, cwd=data, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until_serving(proc, port)
            yield proc, port
        finally:
            stop(proc)


def memory_mb(pid: int) -> dict[str, float]:
    """The process's resident set now (``VmRSS``) and at its peak (``VmHWM``), in MiB, from /proc."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":")
            out[key] = int(value.split()[0]) / 1024
    return out


def reset_peak(pid: int) -> None:
    """Start ``VmHWM`` over from the current RSS (Linux ``clear_refs``, mode 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
