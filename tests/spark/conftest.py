"""One SparkSession for every Spark test (JVM start-up costs ~10 s here; a second one would double it).

local[2] (the reference machine has two cores), 2 shuffle partitions, no UI,
driver bound to 127.0.0.1 -- the settings ``odradek.pipeline.local_session``
gives the CLI too.  Skipped as a whole when the ``spark`` extra or Java is
missing (each test module skips itself without pyspark: a conftest may not skip).
"""

from __future__ import annotations

import shutil

import pytest

from tests.spark.datagen import Scenario, build_scenario


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 on PATH")
    from odradek.pipeline import local_session

    session = local_session("local[2]", app_name="odradek-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def scenario(tmp_path_factory) -> Scenario:
    """Two brokers' data dirs in one parent, written once for the whole session (read-only!)."""
    return build_scenario(tmp_path_factory.mktemp("logs"))


@pytest.fixture(scope="session")
def records(spark, scenario):
    """The decoded scenario, cached: most tests run reports over it."""
    df = spark.read.format("odradek-log").load(str(scenario.parent)).cache()
    df.count()
    yield df
    df.unpersist()
