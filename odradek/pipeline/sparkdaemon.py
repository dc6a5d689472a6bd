"""Spark's Python daemon for local sessions, importing pyspark as installed rather than from its zip.

Spark starts every Python worker process (and the data-source planner
processes) as ``python -m <spark.python.daemon.module>`` with
``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on
``PYTHONPATH`` (``PythonWorkerFactory``).  Python cannot cache bytecode for
a module it imports from a zip, so each such process compiles pyspark's
sources again: about half a second of CPU before the first task, on the
critical path of a short run.  With pip's pyspark, ``SPARK_HOME`` is the
installed package itself, so the zip holds the same sources as the package
beside it, whose bytecode is cached.

This module moves those zips to the end of ``sys.path`` when they belong
to the very pyspark installation that is importable without them (so the
same version is imported either way), then runs ``pyspark.daemon`` as
Spark would.  Anything else (a cluster's ``SPARK_HOME``, another pyspark)
leaves ``sys.path`` as Spark set it.  ``local_session`` names it in
``spark.python.daemon.module``.
"""

from __future__ import annotations

import os
import runpy
import sys
from importlib.machinery import PathFinder


def _installed_zips(path: list[str]) -> list[str]:
    """The zips on ``path`` shipped inside the pyspark importable without any zip (pyspark's and py4j's).

    py4j's zip moves with pyspark's: pip installs the py4j version pyspark
    pins, and a zip moved last still serves whatever nothing else provides.
    """
    spec = PathFinder.find_spec("pyspark", [p for p in path if not p.endswith(".zip")])
    if spec is None or spec.origin is None:
        return []
    lib = os.path.join(os.path.dirname(os.path.realpath(spec.origin)), "python", "lib")
    zips = [p for p in path if p.endswith(".zip") and os.path.dirname(os.path.realpath(p)) == lib]
    return zips if any(os.path.basename(z) == "pyspark.zip" for z in zips) else []


def prefer_installed(path: list[str]) -> list[str]:
    """``path`` with the installed pyspark's own zips moved last (unchanged if they are not its own)."""
    zips = _installed_zips(path)
    return [p for p in path if p not in zips] + zips


if __name__ == "__main__":
    sys.path[:] = prefer_installed(sys.path)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
