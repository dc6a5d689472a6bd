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
import socket
import uuid
from pathlib import Path

META = "meta.properties"
LOCK = ".lock"
BOUND = ".listeners"  # host:port per line, as bound by the running broker (for ``odradek health``)


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
    except OSError as exc:
        raise DataDirError(_unusable(data_dir, setting, exc)) from None


def _unusable(data_dir: Path, setting: str, exc: OSError) -> str:
    """Why the data dir cannot be made or written, naming the setting to change."""
    if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:  # e.g. a root-owned or :ro mount
        return f"{not_writable(data_dir)}; or set {setting} to a directory this user can write"
    if isinstance(exc, FileExistsError):
        reason = "it is a file, not a directory"
    elif isinstance(exc, NotADirectoryError):
        reason = "part of its path is a file, not a directory"
    else:
        reason = exc.strerror or str(exc)
    return f"cannot use {data_dir} as the data directory ({reason}): set {setting} to a directory this user can write"


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
    """An exclusive ``flock`` on ``<dir>/.lock``, held while the broker runs.

    The file names its holder as ``pid=N host=NAME``: a pid alone means nothing
    outside the holder's host or container (in a container it is usually 1), and a
    container's hostname is its id, so a refused broker can say who holds the dir.
    """

    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if not isinstance(exc, PermissionError) and exc.errno != errno.EROFS:
                raise
            raise DataDirError(not_writable(self.path.parent)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirError(self._in_use()) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid={os.getpid()} host={socket.gethostname()}\n".encode())
        self._fd = fd

    def _in_use(self) -> str:
        try:
            holder = parse_holder(self.path.read_text())
        except OSError:
            holder = {}
        where = f"data directory {self.path.parent} is in use by another broker process"
        pid, host = holder.get("pid"), holder.get("host")
        if host and host != socket.gethostname():
            return (f"{where}: pid {pid} on host {host!r} (another machine or container that "
                    "shares this directory; a container's hostname is its id)")
        if pid:
            return f"{where}: pid {pid}"
        return where

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class DirLocks:
    """A :class:`DirLock` on every log dir (Kafka locks each of its ``log.dirs``): a second broker
    naming any of them refuses to start; all or none are held."""

    def __init__(self, dirs: list[Path]):
        self._locks = [DirLock(d) for d in dirs]

    def acquire(self) -> None:
        taken: list[DirLock] = []
        try:
            for lock in self._locks:
                lock.acquire()
                taken.append(lock)
        except BaseException:
            for lock in taken:
                lock.release()
            raise

    def release(self) -> None:
        for lock in self._locks:
            lock.release()


def parse_holder(text: str) -> dict[str, str]:
    """``pid=N host=NAME`` (or the bare pid older versions wrote) as a dict."""
    words = text.split()
    if len(words) == 1 and words[0].isdigit():
        return {"pid": words[0]}
    return dict(w.split("=", 1) for w in words if "=" in w)


def read_only_file_system(path: Path) -> bool:
    """Is ``path`` (or, if missing, its nearest existing parent) on a file system mounted read-only?"""
    for candidate in (path, *path.parents):
        try:
            return bool(os.statvfs(candidate).f_flag & os.ST_RDONLY)
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return False


def not_writable(path: Path) -> str:
    """Why the data dir cannot be written and what to do: a read-only file system (a ``:ro``
    mount), a directory of ours without write permission, or one that belongs to someone else
    (a root-owned bind mount)."""
    if read_only_file_system(path):
        return (f"data directory {path} is on a read-only file system; mount it read-write "
                "(for a container: a volume or bind mount without :ro)")
    uid, gid = os.getuid(), os.getgid()
    try:
        stat = os.stat(path)
    except OSError:
        stat = None
    if stat is not None and stat.st_uid == uid and not stat.st_mode & 0o200:  # ours, write bit off
        return (f"data directory {path} is read-only (mode {stat.st_mode & 0o777:o}); make it writable: "
                f"chmod u+w {path}")
    return (f"data directory {path} is not writable by this process (uid {uid}, gid {gid}); "
            f"make it writable by that uid, e.g. for a bind mount into the container: "
            f"chown -R {uid}:{gid} HOST_DIR (or use a named volume)")


def write_bound(data_dir: Path, bound: list[tuple[str, int]]) -> None:
    """Record the addresses actually bound, so a health check finds the broker however it was
    configured (file, KAFKA_* variables or command-line overrides, port 0)."""
    path = data_dir / BOUND
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{host}:{port}\n" for host, port in bound), encoding="utf-8")
    os.replace(tmp, path)


def read_bound(data_dir: Path) -> list[tuple[str, int]]:
    """The addresses written by :func:`write_bound`; empty when no broker recorded any."""
    try:
        text = (data_dir / BOUND).read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.split():
        host, _, port = line.rpartition(":")
        if port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def clear_bound(data_dir: Path) -> None:
    try:
        (data_dir / BOUND).unlink()
    except OSError:
        pass
