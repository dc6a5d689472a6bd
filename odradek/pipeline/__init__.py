"""PySpark jobs over Odradek's (and Kafka's) log directories: reports and offline compaction.

Needs the ``spark`` extra (``pip install 'odradek[spark]'``) and Java 17.
Layering (docs/ARCHITECTURE.md): this package reads ``odradek.offsets``,
``odradek.transactions``, ``odradek.shares``, ``odradek.storage`` and
``odradek.protocol`` only, never ``odradek.broker``.

- :mod:`.decode`      segment bytes -> Arrow batches (the one decoder)
- :mod:`.datasource`  ``spark.read.format("odradek-log")``, the same read planned in the driver, and the
                      binaryFile path
- :mod:`.splits`      segment runs sized for the cluster (the data source's input partitions)
- :mod:`.partial`     split-local aggregation: Spark merges keys, not records
- :mod:`.reports`     latest offsets, group timeline, KIP-211 expiry audit, commit rates, lag,
                      transactional offsets, transactions, share groups
- :mod:`.html`        the HTML summary with inline SVG charts
- :mod:`.compact`     offline compaction of a data dir, in Kafka's segment format
- :mod:`.cli`         ``odradek-report``
- :mod:`.classarchive` the local JVM's class-data archive (AppCDS), kept between runs
- :mod:`.sparkdaemon` the local session's Python daemon: workers import pyspark's bytecode, not its zip
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_session(master: str = "local[*]", *, app_name: str = "odradek-report", shuffle_partitions: int = 8,
                  conf: Mapping[str, str] | None = None, data_source: bool = True) -> SparkSession:
    """A SparkSession for one machine: what the CLI, the tests and the benchmark share.

    Executors run this interpreter (``PYSPARK_PYTHON``), so they import the
    same odradek; the driver binds to 127.0.0.1 (no network exposure, and no
    dependence on the host name resolving); no UI.  ``shuffle_partitions``:
    Spark's default of 200 costs seconds of task overhead on reports this size.
    Python workers start through :mod:`.sparkdaemon` (pyspark's bytecode,
    not its zip's sources: half a second less per worker process).
    ``data_source``: register ``odradek-log`` (Spark's first registration
    starts a Python process to look up installed data sources, about a
    second; ``odradek-report`` reads with ``read_planned`` and skips it).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind everything (block manager too) to loopback
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.worker.reuse", "true")
               .config("spark.python.daemon.module", "odradek.pipeline.sparkdaemon"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if data_source:
        from odradek.pipeline.datasource import register

        register(spark)
    return spark
