"""A class-data archive (Java 17 AppCDS) for the JVM of the local sessions ``odradek-report`` starts.

A run over a small input spends seconds of its JVM's CPU loading the same
~20,000 classes every time -- each looked up across the ~250 jars of
pyspark's classpath, parsed and verified -- before and while it runs its
first queries.  Java's class-data sharing keeps them, parsed and verified,
in an archive the JVM maps at start: the first run has its JVM write one as
it exits (``-XX:ArchiveClassesAtExit``, a few seconds, once), later runs map
it (``-XX:SharedArchiveFile``).

The archive lives in the user's cache dir (``$XDG_CACHE_HOME/odradek``, else
``~/.cache/odradek``), one per JVM and Spark installation: its name hashes
the java binary the launcher runs and the list of Spark's jars.  It is used
only where it can be: not when the launcher would put a non-empty directory
(a Spark, Hadoop or YARN conf dir) or an unknown classpath
(``SPARK_DIST_CLASSPATH``, ``SPARK_CLASSPATH``) in front of the jars, where
Java refuses to write one.  A written archive is kept only when the JVM exited
cleanly and a JVM started with it runs (a truncated archive would crash every
later JVM); a JVM whose classpath no longer matches an archive ignores it
(``-Xshare:auto``, Java's default).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # Java's notes about classes it skips, or an archive it ignores
DUMP_TIMEOUT_S = 300.0


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/odradek``, else ``~/.cache/odradek``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "odradek"


def spark_home() -> Path | None:
    """Where spark-submit runs from: ``SPARK_HOME``, else pyspark's own (the pip install)."""
    try:
        from pyspark.find_spark_home import _find_spark_home

        return Path(os.environ.get("SPARK_HOME") or _find_spark_home())
    except Exception:  # noqa: BLE001 -- no Spark found: no archive
        return None


def java_binary() -> str | None:
    """The java bin/spark-class runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    found = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def _nonempty_dir(path: str | os.PathLike[str] | None) -> bool:
    return bool(path) and os.path.isdir(path) and any(os.scandir(path))


def usable(env: dict[str, str] | None = None, home: Path | None = None) -> bool:
    """Whether the driver's classpath is one Java can archive: the jars, no directory holding files in front.

    bin/spark-class puts the Spark conf dir (``SPARK_CONF_DIR``, else
    ``$SPARK_HOME/conf``), ``HADOOP_CONF_DIR`` and ``YARN_CONF_DIR`` on the
    classpath; Java refuses to write an archive ("Cannot have non-empty
    directory in paths") if one of them holds files.
    """
    env = os.environ if env is None else env
    if home is None:
        return False
    if env.get("SPARK_DIST_CLASSPATH") or env.get("SPARK_CLASSPATH"):
        return False
    conf = env.get("SPARK_CONF_DIR") or str(home / "conf")
    return not any(_nonempty_dir(d) for d in (conf, env.get("HADOOP_CONF_DIR"), env.get("YARN_CONF_DIR")))


def archive_path(java: str, home: Path, directory: Path | None = None) -> Path:
    """One archive per JVM binary (path, size, mtime) and Spark installation (its jars' names and sizes)."""
    digest = hashlib.sha256()
    st = os.stat(java)
    digest.update(f"{java}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    jars = home / "jars"
    for entry in sorted(os.scandir(jars), key=lambda e: e.name) if jars.is_dir() else []:
        digest.update(f"{entry.name}\0{entry.stat().st_size}\0".encode())
    version = "unknown"
    try:
        import pyspark

        version = pyspark.__version__
    except Exception:  # noqa: BLE001
        pass
    return (directory or cache_dir()) / f"spark-{version}-{digest.hexdigest()[:16]}.jsa"


@dataclass
class ClassArchive:
    """The archive of this run: ``java_options`` for the driver, ``finish`` after the session stops."""

    path: Path
    java: str
    writing: Path | None = None  # the archive this run's JVM writes as it exits (none yet)

    @classmethod
    def for_local_session(cls, directory: Path | None = None) -> ClassArchive | None:
        """The archive to use or write, or None where there can be none (see :func:`usable`)."""
        home, java = spark_home(), java_binary()
        if home is None or java is None or not usable(home=home):
            return None
        try:
            path = archive_path(java, home, directory)
        except OSError:
            return None
        return cls(path, java)

    def java_options(self) -> str:
        """Map the archive; or, with none yet, have this JVM write one as it exits."""
        if self.path.is_file():
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return ""
        self._forget_abandoned()
        self.writing = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        return f"-XX:ArchiveClassesAtExit={self.writing} {QUIET}"

    def finish(self, gateway: Any, note: Any = None, timeout: float = DUMP_TIMEOUT_S) -> bool:
        """After the session stopped: if this JVM writes the archive, let it exit, then keep the archive.

        ``gateway`` is pyspark's (``SparkContext._gateway``): closing its
        process's stdin is how pyspark ends the JVM; the archive is written on
        the way out.  True when an archive was kept.
        """
        if self.writing is None:
            return False
        proc = getattr(gateway, "proc", None)
        if proc is None:
            return False
        if note is not None:
            note(f"writing the JVM's class archive for later runs (once): {self.path}")
        try:
            try:
                gateway.shutdown()
            except Exception:  # noqa: BLE001 -- the JVM's end is what matters
                pass
            if proc.stdin is not None:
                proc.stdin.close()
            rc = proc.wait(timeout)
            if rc == 0 and self.writing.is_file() and self._runs_with(self.writing):
                os.replace(self.writing, self.path)
                return True
            return False
        except (OSError, subprocess.TimeoutExpired):
            return False
        finally:
            self.writing.unlink(missing_ok=True)

    def _forget_abandoned(self, age_s: float = 86_400) -> None:
        """Archives a killed run's JVM left half-written (a day old: none is being written any more)."""
        for tmp in self.path.parent.glob(".spark-*.jsa.*.tmp"):
            try:
                if time.time() - tmp.stat().st_mtime > age_s:
                    tmp.unlink()
            except OSError:
                pass

    def _runs_with(self, archive: Path) -> bool:
        """A JVM maps ``archive`` and runs (a truncated or damaged one makes it crash)."""
        try:
            done = subprocess.run([self.java, f"-XX:SharedArchiveFile={archive}", *QUIET.split(), "-version"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0
