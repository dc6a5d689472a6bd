"""The source of ``odradek/`` as a reader meets it: layers import downward, no cycles, no outside citations.

Read from the source with ``ast``, deferred (function-level) imports and
``if TYPE_CHECKING:`` blocks included: a cycle hidden inside a function or
behind a type hint is still a cycle a reader must untangle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import odradek

ROOT = Path(odradek.__file__).parent

# what each layer may import (besides itself), per docs/ARCHITECTURE.md
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "offsets": {"protocol", "storage"},
    "transactions": {"protocol", "storage", "offsets"},
    "broker": {"protocol", "storage", "offsets", "transactions"},
    "pipeline": {"protocol", "storage", "offsets"},
    "testing": {"protocol", "storage", "offsets", "transactions", "broker"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str], name: str | None = None) -> set[str]:
    """The odradek modules ``path`` (module ``name``) imports: at import time, in a function or for type checking."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) for p in paths}


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def test_layers_only_import_downward():
    wrong = []
    for module, imports in graph().items():
        own = layer(module)
        if own is None:
            continue
        for target in imports:
            other = layer(target)
            if other is not None and other != own and other not in ALLOWED[own]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other in a loop (Tarjan's strongly connected components).

    A package and its own modules are no loop (``__init__`` importing a submodule).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def targets(module: str) -> list[str]:
        return sorted(t for t in edges[module]
                      if t != module.rpartition(".")[0] and module != t.rpartition(".")[0])

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in targets(module):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_import_circles():
    """No modules import each other in a loop, however the import is written."""
    # (for now) the handlers' circle through BrokerApp, which the handlers-take-what-they-use change removes
    assert [c for c in circles(graph()) if "odradek.broker.app" not in c] == []


def test_circles_are_found_behind_type_hints_and_in_functions(tmp_path):
    edges = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a": {"a.x"}, "a.w": set()}
    assert circles(edges) == [["a.x", "a.y", "a.z"]]
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from odradek.q import A\n"
                      "def f():\n    import odradek.r\n")
    assert imports_of(source, {"odradek.q", "odradek.r"}, "odradek.m") == {"odradek.q", "odradek.r"}


def test_comments_cite_nothing_outside_the_repository():
    """Comments cite Kafka's classes and methods or our docs/, never sections of an outside document."""
    # the reference material beside a checkout: design page, fact sheets, client notes, spec copies
    outside = re.compile(r"§|[a-z]+-facts\b|client-needs|record-batch-v2|DESIGN\.md|shared/|kafka-spec")
    found = [f"{path.relative_to(ROOT.parent)}:{number}"
             for path in sorted(ROOT.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if outside.search(line)]
    assert found == []
