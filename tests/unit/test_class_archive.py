"""The local JVM's class-data archive (odradek.pipeline.classarchive): when it is used, written, kept.

No JVM here: the archive's name, where Java can write one, and what a run
does with the one its JVM wrote (tests/spark/test_cli.py runs the CLI twice
with a real one).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from odradek.pipeline.classarchive import ClassArchive, archive_path, usable


def _home(tmp_path: Path, jars: dict[str, bytes]) -> Path:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name, content in jars.items():
        (home / "jars" / name).write_bytes(content)
    return home


def test_no_archive_where_the_classpath_has_a_directory_with_files(tmp_path):
    home = _home(tmp_path, {"a.jar": b"x"})
    assert usable({}, home)  # pyspark's pip install: no conf dir at all
    (home / "conf").mkdir()
    assert usable({}, home)  # an empty one is fine
    (home / "conf" / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    assert not usable({}, home)
    conf = tmp_path / "hadoop"
    conf.mkdir()
    (conf / "core-site.xml").write_text("<configuration/>")
    assert not usable({"SPARK_CONF_DIR": str(tmp_path / "none"), "HADOOP_CONF_DIR": str(conf)}, home)
    assert not usable({"SPARK_CONF_DIR": str(tmp_path / "none"), "SPARK_DIST_CLASSPATH": "/opt/hadoop/*"}, home)
    assert usable({"SPARK_CONF_DIR": str(tmp_path / "none")}, home)
    assert not usable({}, None)


def test_one_archive_per_jvm_and_spark_installation(tmp_path):
    home = _home(tmp_path, {"a.jar": b"x", "b.jar": b"yy"})
    java = tmp_path / "java"
    java.write_bytes(b"#!")
    first = archive_path(str(java), home, tmp_path / "cache")
    assert first == archive_path(str(java), home, tmp_path / "cache")
    assert first.parent == tmp_path / "cache" and first.suffix == ".jsa"
    (home / "jars" / "c.jar").write_bytes(b"z")
    assert archive_path(str(java), home, tmp_path / "cache") != first


def test_the_first_run_writes_it_later_runs_map_it(tmp_path):
    archive = ClassArchive(tmp_path / "cache" / "spark-x.jsa", sys.executable)
    options = archive.java_options()
    assert archive.writing is not None and options.startswith(f"-XX:ArchiveClassesAtExit={archive.writing} ")
    archive.path.write_bytes(b"archive")
    again = ClassArchive(archive.path, sys.executable)
    assert again.java_options().startswith(f"-XX:SharedArchiveFile={archive.path} ") and again.writing is None
    assert not again.finish(object())  # nothing to write: nothing to wait for


class _Gateway:
    """pyspark's gateway as finish() sees it: a process that ends when its stdin closes."""

    def __init__(self, script: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)

    def shutdown(self) -> None:
        pass


def _writer(path: Path, rc: int) -> _Gateway:
    return _Gateway(f"import sys; sys.stdin.read(); open({str(path)!r}, 'wb').write(b'archive'); sys.exit({rc})")


def test_a_written_archive_is_kept_only_when_the_jvm_exited_cleanly_and_runs_with_it(tmp_path, monkeypatch):
    notes: list[str] = []
    for rc, runs, kept in ((0, True, True), (1, True, False), (0, False, False)):
        archive = ClassArchive(tmp_path / f"spark-{rc}-{runs}.jsa", sys.executable)
        archive.java_options()
        assert archive.writing is not None
        monkeypatch.setattr(ClassArchive, "_runs_with", lambda self, path, ok=runs: ok and path.is_file())
        assert archive.finish(_writer(archive.writing, rc), notes.append) is kept
        assert archive.path.is_file() is kept
        assert not archive.writing.exists()  # a discarded one is not left behind
    assert len(notes) == 3 and "class archive" in notes[0]

