"""The docs' promises stay true: generated pages current, CI runs the README command, the README's
links and the documented container settings work."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_docs_are_current():
    """docs/compatibility.md's table, docs/CONFIGURATION.md, docs/control-operations.md and
    docs/captured-fields.md come from the code's own tables."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for path, text in gen.outputs().items():
        assert path.read_text(encoding="utf-8") == text, f"stale {path.name}: run python scripts/gen_docs.py"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    assert len(commands) >= 2
    test_command = commands[1].strip()
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci
    # ... in a bare copy (a clone in a fresh temp dir, nothing beside it), then the ../shared tests
    copy = ci.index("\ngit clone")
    assert "mktemp -d" in ci[:copy] and copy < ci.index(test_command) < ci.index("pytest -p no:cacheprovider -m shared")


def test_clients_tested_line_names_the_installed_series():
    """README's "Clients tested in CI" line: each client's version (same minor series as the one
    installed here; a newer patch release must not fail a fresh clone) and what it bundles."""
    from importlib.metadata import version

    from odradek.broker.doc_tables import CLIENTS_TESTED

    def series(v: str) -> str:
        return ".".join(v.split(".")[:2])

    tested = dict(CLIENTS_TESTED)
    for name in ("kafka-python", "aiokafka", "confluent-kafka"):
        assert series(tested[name]) == series(version(name)), name
    assert "bundled librdkafka" in tested["confluent-kafka"]


def test_readme_links_reach_files():
    """The README is a landing page of links into docs/: each must name a file of the checkout."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme) if "://" not in t]
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_the_documented_container_control_settings_are_the_settings():
    """docs/test-control.md's container example configures the control endpoint and capture
    through KAFKA_* variables: they must name those settings."""
    from odradek.broker.config import Config

    page = (ROOT / "docs" / "test-control.md").read_text(encoding="utf-8")
    compose = dict(re.findall(r"^\s+(KAFKA_ODRADEK_\w+): \"([^\"]*)\"", page, re.M))
    assert set(compose) == {"KAFKA_ODRADEK_CONTROL_LISTENER", "KAFKA_ODRADEK_CONTROL_CAPTURE_REQUESTS"}
    config = Config.load(None, environ=compose)
    assert config["odradek.control.listener"] == "0.0.0.0:9644"
    assert config["odradek.control.capture.requests"] == 1000
