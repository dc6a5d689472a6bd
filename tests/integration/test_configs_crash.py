"""Acknowledged config changes (topic overrides, dynamic broker configs) survive SIGKILL of ``odradek serve``.

Runs scripts/crash_configs.py with a small, bounded count (the script itself takes larger ones).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("crash_configs", ROOT / "scripts" / "crash_configs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_configs"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_checker_notices_lost_or_invented_changes(tmp_path):
    crash = _script()
    ledger = crash.Ledger(acked={(2, "t"): 5}, sent={(2, "t"): 7}, records={"t": 10})
    assert crash.check(tmp_path, {(2, "t"): 5}, {"t": 10}, ledger) == []
    assert crash.check(tmp_path, {(2, "t"): 7}, {"t": 12}, ledger) == []  # the unanswered change landed
    assert crash.check(tmp_path, {(2, "t"): 4}, {"t": 10}, ledger)  # an acknowledged change lost
    assert crash.check(tmp_path, {(2, "t"): None}, {"t": 10}, ledger)
    assert crash.check(tmp_path, {(2, "t"): 8}, {"t": 10}, ledger)  # a value never sent
    assert crash.check(tmp_path, {(2, "t"): 5}, {"t": 9}, ledger)  # an acknowledged record lost
    (tmp_path / "broker-configs.json").write_text('{"brokers": {')
    assert crash.check(tmp_path, {(2, "t"): 5}, {"t": 10}, ledger)  # a torn file


@pytest.mark.timeout(120)
def test_config_changes_survive_kill_9(tmp_path):
    assert _script().run(cycles=3, seconds=30, seed=11, data_dir=tmp_path) == []
