"""The data directory's identity and ownership: meta.properties and a lock file.

``meta.properties`` keeps the cluster id stable across restarts (clients
store it) in Kafka's own format, and a lock file makes a second broker on
the same directory refuse to start instead of corrupting logs.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import os
import uuid
from pathlib import Path

META = "meta.properties"
LOCK = ".lock"


class DataDirError(RuntimeError):
    pass


def prepare_data_dir(data_dir: Path, setting: str = "log.dirs (--data-dir)") -> None:
    """Create the data dir if missing and check we may write it.

    A failure names the setting to change (the user fixes ``log.dirs``, not
    the errno), the path and the reason."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(data_dir, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(data_dir))
    except FileExistsError:
        reason = "it is a file, not a directory"
    except NotADirectoryError:
        reason = "part of its path is a file, not a directory"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    else:
        return
    raise DataDirError(f"cannot use {data_dir} as the data directory ({reason}): "
                       f"set {setting} to a directory this user can write") from None


def new_cluster_id() -> str:
    """Kafka's format: a random UUID in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def read_meta(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def load_or_create_meta(data_dir: Path, node_id: int) -> str:
    """Return the cluster id, creating meta.properties on first start."""
    path = data_dir / META
    if path.exists():
        meta = read_meta(path)
        stored = meta.get("node.id") or meta.get("broker.id")
        if stored is not None and int(stored) != node_id:
            raise DataDirError(f"{path} belongs to node.id {stored}, but node.id is {node_id}")
        if meta.get("cluster.id"):
            return meta["cluster.id"]
    cluster_id = new_cluster_id()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"#Written by odradek\ncluster.id={cluster_id}\nnode.id={node_id}\nversion=1\n",
                   encoding="utf-8")
    os.replace(tmp, path)
    return cluster_id


class DirLock:
    """An exclusive ``flock`` on ``<dir>/.lock``, held while the broker runs."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = ""
            try:
                holder = self.path.read_text().strip()
            except OSError:
                pass
            raise DataDirError(f"data directory {self.path.parent} is in use by another broker"
                               + (f" (pid {holder})" if holder else "")) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
