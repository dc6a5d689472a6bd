"""The local session's Python daemon imports pyspark as installed, never a different pyspark."""

from __future__ import annotations

from pathlib import Path

from odradek.pipeline.sparkdaemon import prefer_installed


def _install(site: Path) -> list[str]:
    """A pip-style pyspark under ``site``: the package, and its SPARK_HOME zips inside it."""
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    zips = [lib / "pyspark.zip", lib / "py4j-0.10.9.9-src.zip"]
    for z in zips:
        z.write_bytes(b"")
    return [str(z) for z in zips]


def test_the_installed_pysparks_own_zips_move_last(tmp_path):
    site = tmp_path / "site-packages"
    zips = _install(site)
    path = [*zips, "/somewhere/else", str(site)]
    assert prefer_installed(path) == ["/somewhere/else", str(site), *zips]


def test_zips_of_another_spark_home_stay_first(tmp_path):
    """A cluster's SPARK_HOME may hold another pyspark version than the one pip installed."""
    site = tmp_path / "site-packages"
    _install(site)
    cluster = tmp_path / "spark-home" / "python" / "lib"
    cluster.mkdir(parents=True)
    other = [str(cluster / "pyspark.zip"), str(cluster / "py4j-0.10.9.7-src.zip")]
    path = [*other, str(site)]
    assert prefer_installed(path) == path


def test_without_an_installed_pyspark_nothing_moves(tmp_path):
    lib = tmp_path / "spark-home" / "python" / "lib"
    lib.mkdir(parents=True)
    path = [str(lib / "pyspark.zip"), str(tmp_path)]
    assert prefer_installed(path) == path
