"""The README's fixture example runs as written, against the plugin's own fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_fixture_example_passes(clean_kafka_broker):
    blocks = re.findall(r"```python\n(.*?)\n```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the README shows one fixture example"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    tests = [fn for name, fn in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0](clean_kafka_broker)
