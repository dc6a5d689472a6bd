"""The real clients' data-plane, group and offsets tests again, against three brokers in the process.

A user's group and offsets code must behave the same when the coordinator and the partition
leaders are spread over brokers (docs/CLUSTER.md); these files take ``ODRADEK_TEST_BROKERS`` for
that (``tests/conftest.py``), and this runs them so in a child pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
SUITES = ["test_dataplane_clients.py", "test_groups_aiokafka.py", "test_groups_confluent.py",
          "test_groups_kafka_python.py", "test_offsets_clients.py"]


def test_client_suites_pass_against_three_brokers():
    env = {**os.environ, "ODRADEK_TEST_BROKERS": "3"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          *(f"tests/integration/{name}" for name in SUITES)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1400)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert " passed" in out.stdout
