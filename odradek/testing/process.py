"""``odradek serve`` as a child process, for the benchmarks and crash drivers under ``scripts/``.

Tests use the in-process brokers (:mod:`odradek.testing.broker`); a
benchmark needs the broker's CPU time, a crash driver its signals, and a
memory test its RSS, to be its own process's.
"""

from __future__ import annotations

import contextlib
import os
import random
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


PORT_BAND = 4096  # ports per band below the ephemeral range


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (``bind(0)`` and every client socket's
    local port come from there)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int = 1, host: str = "127.0.0.1", band: int = 0) -> int:
    """The first of ``count`` consecutive ports, all bound at once to check them free, for a
    process started next to bind.  Why not ``bind(0)``: the port is released before the child
    binds it, and in between any connection on the machine may be given it as its local port;
    ports *below* the ephemeral range are never handed out that way.  ``band`` 0 is for
    listeners, 1 for ports a container engine publishes (NAT rules, not sockets: a bind check
    cannot see them, so the two uses never draw from the same numbers)."""
    high = max(ephemeral_low() - band * PORT_BAND, 1024 + PORT_BAND)
    for _ in range(200):
        first = random.randrange(high - PORT_BAND, high - count + 1)
        socks = [socket.socket() for _ in range(count)]
        try:
            for i, s in enumerate(socks):
                s.bind((host, first + i))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports in {high - PORT_BAND}..{high - 1}")


def free_port(host: str = "127.0.0.1") -> int:
    """A free port for a child process to listen on (see :func:`free_ports`)."""
    return free_ports(1, host)


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
