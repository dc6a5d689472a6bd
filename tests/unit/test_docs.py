"""The docs' promises stay true: generated pages current, CI runs the README command, the README's
links and the documented container settings work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


KAFKA_SPECS = ROOT.parent / "shared" / "kafka-spec" / "kafka-4.2" / "messages"


@pytest.mark.shared
@pytest.mark.skipif(not KAFKA_SPECS.is_dir(),
                    reason=f"Kafka's message specs not found at {KAFKA_SPECS} (optional; kept outside the repository)")
def test_captured_field_names_are_kafkas_json_names():
    """docs/captured-fields.md says each attribute is Kafka's JSON field name in snake_case: every
    served request field's CamelCase form is a field name of Kafka 4.2's definition of that request,
    except the fields of versions Kafka 4 no longer defines."""
    import json

    from odradek.broker.control.reference import _camel, _fields
    from odradek.protocol.registry import APIS

    dropped_by_kafka_4 = {"MaxNumOffsets", "CommitTimestamp"}  # ListOffsets v0, OffsetCommit v1

    def names(node) -> set[str]:
        found = set()
        for f in node.get("fields", []) + node.get("commonStructs", []):
            found |= {f["name"].lower()} | names(f)
        return found

    wrong = []
    for spec in APIS.values():
        text = (KAFKA_SPECS / f"{spec.name}Request.json").read_text(encoding="utf-8")
        kafka = names(json.loads("\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//"))))
        for path, _, f in _fields(spec.request.fields, "", ""):
            if _camel(f.name).lower() not in kafka and _camel(f.name) not in dropped_by_kafka_4:
                wrong.append(f"{spec.name}: {path}")
    assert wrong == []
