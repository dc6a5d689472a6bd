#!/usr/bin/env python3
"""Run confluent-kafka-python's own schema-registry integration tests against ``odradek serve``.

    python scripts/confluent_sr_tests.py /path/to/confluent-kafka-python [pytest arguments]

The checkout's ``tests/integration/schema_registry`` (``_sync`` and ``_async``: the API client
and the Avro, JSON and Protobuf serializers) run with ``BROKERS`` and ``SR_URL`` pointing at a
broker started here on free ports, as their README describes for an existing cluster.  Two
shims stand in for what a bring-your-own cluster lacks there: ``trivup`` (imported, never used
without it) and ``ByoFixture.async_schema_registry`` (the async tests call it; v2.15.0's BYO
fixture has only the sync one).  The CP 7.0.1 case, which starts a cluster of its own, is left
out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.testing.process import free_port, serving  # noqa: E402

PLUGIN = '''
import pytest


def pytest_configure(config):
    from confluent_kafka.schema_registry import AsyncSchemaRegistryClient
    from tests.integration.cluster_fixture import ByoFixture

    if not hasattr(ByoFixture, "async_schema_registry"):
        ByoFixture.async_schema_registry = lambda self, conf=None: AsyncSchemaRegistryClient({"url": self._sr_url})
'''


def main() -> int:
    if len(sys.argv) < 2 or not (Path(sys.argv[1]) / "tests" / "integration" / "schema_registry").is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    checkout = Path(sys.argv[1]).resolve()
    registry = free_port()
    with tempfile.TemporaryDirectory() as shims:
        stub = Path(shims, "trivup", "clusters")
        stub.mkdir(parents=True)
        (stub.parent / "__init__.py").write_text("")
        (stub / "__init__.py").write_text("")
        (stub / "KafkaCluster.py").write_text("class KafkaCluster:  # not used with BROKERS set\n    pass\n")
        Path(shims, "odradek_byo_shim.py").write_text(PLUGIN)
        with serving([f"odradek.schema.registry.listener=http://127.0.0.1:{registry}"]) as (_proc, port):
            env = {**os.environ, "BROKERS": f"127.0.0.1:{port}", "SR_URL": f"http://127.0.0.1:{registry}",
                   "PYTHONPATH": os.pathsep.join([str(checkout), shims])}
            command = [sys.executable, "-m", "pytest", "tests/integration/schema_registry", "-p", "odradek_byo_shim",
                       "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
                       "-o", "asyncio_default_fixture_loop_scope=session", "-k", "not 7_0_1", "-q",
                       *sys.argv[2:]]
            return subprocess.run(command, cwd=checkout, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
